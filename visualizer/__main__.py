"""`python -m visualizer ...`: see visualizer/cli.py."""

import sys

from .cli import main

sys.exit(main())
