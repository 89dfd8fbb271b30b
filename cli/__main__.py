"""`python -m cli ...`: the same as `python -m visualizer ...`."""

import sys

from .main import main

sys.exit(main())
