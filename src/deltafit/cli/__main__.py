"""``python -m deltafit.cli``: the command line, as the ``deltafit`` script runs it."""

import sys

from deltafit.cli import main

sys.exit(main())
