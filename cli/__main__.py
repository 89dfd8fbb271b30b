"""`python -m cli ...`: the same as `python -m visualizer ...`."""

import sys

from .main import run_as_process

sys.exit(run_as_process())
