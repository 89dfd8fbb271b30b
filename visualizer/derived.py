"""Values computed from a trace's records, kept on the trace they describe.

A trace only grows (records are appended, never changed), so a value computed from its first
records stays true while the trace lives, and the live view asks for the same values at every
step.  Each `Trace` holds one `Derived` (`trace.derived`): it goes when the trace goes, so no
module-level table keyed by `id()` has to guess whether an id was reused, and its lock makes it
safe for the app's "why" handlers, which may read one session's trace from several threads.

    point = trace.derived.get(("series", block, i), compute)              # computed once
    ids = trace.derived.get("markers", compute, version=len(trace.pieces))  # again when pieces grow
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Derived:
    """A trace's cache: key -> (version, value)."""

    def __init__(self):
        self._values: dict = {}
        self._lock = threading.Lock()

    def get(self, key, compute: Callable[[], Any], *, version=None):
        """The value for `key` computed at `version`; `compute()` runs when there is none yet or it
        was computed at another version (then it replaces the old one).  `compute` runs outside the
        lock: two threads asking at once may both compute (the same value, as it is pure), but one
        slow value never holds up the others."""
        with self._lock:
            entry = self._values.get(key)
        if entry is not None and entry[0] == version:
            return entry[1]
        value = compute()
        with self._lock:
            self._values[key] = (version, value)
        return value

    def __len__(self) -> int:
        return len(self._values)

    def __reduce__(self):  # a copied or pickled trace (the probe's writer process) starts with an empty cache: a lock cannot be copied
        return (Derived, ())
