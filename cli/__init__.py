"""The command-line surface: one module per command group, above the library and the backends.

`python -m visualizer ...` (and `python -m cli ...`) run `cli.main.main`; see that module.
"""

from .main import main

__all__ = ["main"]
