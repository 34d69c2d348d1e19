"""``python -m privilog.pipeline decide ...``, or ``spark-submit privilog/pipeline/__main__.py decide ...``."""

import sys

from privilog.pipeline.commands import main

sys.exit(main())
