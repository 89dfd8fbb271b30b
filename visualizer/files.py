"""Files written whole or not at all: a reader (or a resumed run) never meets half a file.

    write_atomically(path, trace.save)                                   # any writer that takes a path
    write_atomically(path, lambda partial: pq.write_table(table, partial))

The writer writes `PATH.partial` beside the target, which is then renamed onto it: `os.replace` is atomic
on one file system, so an interrupted writer leaves the old file (or none) and at most a stray `.partial`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def write_atomically(path, write: Callable[[Path], object]) -> Path:
    """Call `write(partial)` with a temporary path beside `path`, then rename it onto `path` (making its
    folder first). Returns `path`. When `write` fails, the partial file is removed and the error raised."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")  # the whole name: a.json and a.parquet never share one
    try:
        write(partial)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)
    return path
