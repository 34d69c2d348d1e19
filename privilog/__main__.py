"""``python -m privilog`` runs the command line."""

import sys

from privilog.cli import main

sys.exit(main())
