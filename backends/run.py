"""Drive a backend through one generation into a `Trace`: the loop every surface shares.

    trace = record_trace(backend, "Why is the sky blue?", GenerationSettings(seed=0))
"""

from __future__ import annotations

import threading

from visualizer.records import BlockRecord, StepRecord
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace


def record_trace(backend, prompt: str, settings: GenerationSettings, *, progress=None) -> Trace:
    """Run one generation into a Trace; Ctrl-C stops it between steps and keeps what was recorded."""

    stop = threading.Event()
    trace = Trace(model=backend.info, prompt=prompt)
    records = backend.generate(prompt, settings, stop)
    while True:
        try:
            record = next(records)
        except StopIteration:
            break
        except KeyboardInterrupt:
            stop.set()  # the backend ends the run at the next step and yields RunEnd("cancelled")
            continue
        trace.append(record)
        if progress is not None and isinstance(record, StepRecord):
            accepted = int(record.accepted.sum())
            print(f"\rblock {record.block + 1} step {record.step + 1}: {accepted} accepted   ", end="", file=progress)
        elif progress is not None and isinstance(record, BlockRecord):
            print(f"\rblock {record.block + 1} committed after {record.steps_used} steps ({record.stop_reason})", file=progress)
    return trace
