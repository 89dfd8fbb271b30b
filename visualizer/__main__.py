"""`python -m visualizer ...`: the command line, kept under the name the README and users know.

The commands live in the `cli` package above the library (they drive backends, which the
library never imports); this entry point is the one place the library names them, and the
import-linter contract in pyproject.toml lists it as its only exception.
"""

import sys

from cli.main import run_as_process

sys.exit(run_as_process())
