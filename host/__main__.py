"""``python -m specmem`` runs the command line."""

import sys

from specmem.cli import main

sys.exit(main())
