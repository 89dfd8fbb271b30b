"""Drive a backend through one generation into a `Trace`: the loop every surface shares.

    trace = record_trace(backend, "Why is the sky blue?", GenerationSettings(seed=0))

    trace = Trace(model=backend.info, prompt=prompt)            # the app: live, batch by batch
    for batch in run_records(backend, prompt, settings, trace=trace, stop=stop):
        ...                                                     # draw what arrived

The app, the command line and the probe all record through these two, so a stop, an error or
Ctrl-C ends every run the same way: with a RunEnd that keeps everything recorded so far.

    traces = record_batch(backend, ["Why is the sky blue?", "Count to ten."], settings)

runs several prompts as one batched call of the model and gives one complete Trace per prompt, in
order (a batch of one is `record_trace` exactly).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from visualizer.records import Record
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace


def run_records(
    backend,
    prompt: str,
    settings: GenerationSettings,
    *,
    trace: Trace,
    stop: threading.Event | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> Iterator[list[Record]]:
    """Append each record of one run to `trace` (and hand it to `on_record`), yielding each batch
    of records as it arrives. Setting `stop` (or Ctrl-C) ends the run at the next step."""
    stop = stop or threading.Event()
    for batch in _until_the_end(backend.generate_batches(prompt, settings, stop), stop):
        for record in batch:
            trace.append(record)
            if on_record is not None:
                on_record(record)
        yield batch


def record_trace(
    backend,
    prompt: str,
    settings: GenerationSettings,
    *,
    stop: threading.Event | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> Trace:
    """Run one generation into a Trace; Ctrl-C stops it between steps and keeps what was recorded.
    `on_record` sees each record as it arrives (the CLI's progress, `cli/progress.py`)."""
    trace = Trace(model=backend.info, prompt=prompt)
    for _ in run_records(backend, prompt, settings, trace=trace, stop=stop, on_record=on_record):
        pass
    return trace


def record_batch(
    backend,
    prompts: list[str],
    settings: GenerationSettings,
    *,
    stop: threading.Event | None = None,
) -> list[Trace]:
    """Run the prompts as one batch (one seed, one batched `generate`) into one Trace per prompt,
    in order, each a whole run (RunStart ... RunEnd) that saves, loads and replays like any other.

    The batch is part of what reproduces a row (`RunStart.batch`): the same prompts in the same
    order with the same settings give the same traces, bit for bit. The rows share the batch's
    times: a step's `wall_time_s` is the batched step's, a RunEnd's the whole call's. Ctrl-C or
    `stop` ends every row at the next step, each with RunEnd "cancelled"; a bad prompt is a
    BackendError naming it.
    """
    stop = stop or threading.Event()
    traces = [Trace(model=backend.info, prompt=prompt) for prompt in prompts]
    for batch in _until_the_end(backend.generate_rows(list(prompts), settings, stop), stop):
        for row, record in batch:
            traces[row].append(record)
    return traces


def _until_the_end(batches: Iterator, stop: threading.Event) -> Iterator:
    """The batches of a run to its RunEnd; Ctrl-C (raised outside the backend's own wait) sets `stop`
    and the reading goes on, so the run ends at its next step with everything recorded."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except KeyboardInterrupt:
            stop.set()
            continue
        yield batch
