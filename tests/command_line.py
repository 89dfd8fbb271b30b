"""The command line as a user runs it, for tests: `cli(...)` runs `python -m visualizer ...` in this process.

In-process through `cli.main.main` (a new Python process costs seconds of imports per command); the one test
of the real process, `python -m visualizer` itself, is tests/test_cli.py's smoke test, through `cli_process`.
Both answer as `subprocess.run` does (returncode, stdout, stderr), so a test reads either the same way.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cli(*args) -> subprocess.CompletedProcess:
    """`python -m visualizer ARGS` in this process: its exit status and what it printed.

    An exception escapes to the test (the traceback a user would have seen fails it), and argparse's own
    refusals (exit status 2, usage on stderr) come back as a status like the command's."""
    from cli.main import main

    argv = [str(arg) for arg in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(ROOT):
        try:
            status = main(argv)
        except SystemExit as exit:
            status = exit.code or 0
    return subprocess.CompletedProcess(["python", "-m", "visualizer", *argv], status, out.getvalue(), err.getvalue())


def cli_process(*args, timeout: int = 600) -> subprocess.CompletedProcess:
    """`python -m visualizer ARGS` as its own process, as a user starts it."""
    return subprocess.run([sys.executable, "-m", "visualizer", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)
