"""The serving extensions, the M/G/c queue law and the catalogue, model against simulation
(docs/model.md §19)."""
