"""Which optimiser to use, and how close each gets to the optimum (benchmarks/README.md §1, §9).

Entry points: ``edgeprefix compare`` (:mod:`.compare`), the known-optimum suite (:mod:`.classical`,
``compare --suite classical``) and the cost of a KKT certificate (:mod:`.certify_cost`)."""
