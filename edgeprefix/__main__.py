"""``python -m edgeprefix``: the same as the ``edgeprefix`` command."""

import sys

from edgeprefix.cli import main

sys.exit(main())
