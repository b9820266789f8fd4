"""``python -m perfgate``: the same command line as the ``perfgate`` entry point."""

import sys

from perfgate.cli import main

sys.exit(main())
