"""The app's runs: the models every session shares, and one generation driven into a trace.

    backend = MODELS.get(source)                         # loaded once for everyone
    for batch in run_live(backend, source, prompt, settings, trace=trace, stop=session.stop):
        ...                                              # records appended to `trace` since the last batch

Directly on the backend, or on ZeroGPU hardware (SPACES_ZERO_GPU set by the Space) inside
`spaces.GPU`: there the run happens in a forked worker that inherits the model moved to CUDA at
start-up (`preload_for_zero_gpu`); arguments and records travel pickled, and the worker cannot see
this process's stop event, so Stop closes the worker's stream and the run ends here as cancelled,
keeping every recorded step.  Import this module before anything imports torch: `spaces` must
come first on ZeroGPU.
"""

from __future__ import annotations

try:  # ZeroGPU: `spaces` must be imported before torch (it prepares CUDA for the lent GPU)
    import spaces
except ImportError:
    spaces = None

import time
from collections.abc import Iterator

import numpy as np

from backends.base import BackendError
from backends.cache import LoadedModels
from hosting import env_int, on_zero_gpu
from visualizer.live_stream import batches
from visualizer.records import FINISH_CANCELLED, BlockRecord, RunEnd, frozen_array
from visualizer.trace import Trace

GPU_SECONDS_ENV = "DV_GPU_SECONDS"
MODELS = LoadedModels(keep=2)  # every session's loaded models (module level: ZeroGPU's worker finds them here)


def on_gpu(duration: int):
    """`spaces.GPU(duration=...)` where the `spaces` package is installed (it is a no-op itself off
    ZeroGPU hardware); a plain pass-through elsewhere."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)


@on_gpu(duration=env_int(GPU_SECONDS_ENV, 120))
def _generate_on_gpu(source: str, prompt: str, settings):
    """The records of one run, computed where the GPU is."""
    yield from MODELS.get(source).generate(prompt, settings)


def run_live(backend, source: str, prompt: str, settings, *, trace: Trace, stop, min_interval: float = 0.0) -> Iterator[list]:
    """Run one generation into `trace`, yielding each batch of records after appending it.

    Raises BackendError before anything is appended when the request is bad (checked here, not in
    ZeroGPU's worker).  Closing the generator stops the run.
    """
    if settings.compiled:
        raise BackendError("torch.compile is off in the app (ZeroGPU forbids it).")
    if on_zero_gpu():
        backend.check(prompt, settings)  # a bad request gets its message here, not from the GPU worker
        records = _stop_from_here(backend, _generate_on_gpu(source, prompt, settings), stop)
    else:
        records = backend.generate(prompt, settings, stop)
    first = next(records)  # validation happens here: a bad request raises before the trace changes
    trace.append(first)
    return _appended(trace, batches(records, stop=stop.set, min_interval=min_interval), first)


def _appended(trace: Trace, source, first) -> Iterator[list]:
    yield [first]
    for batch in source:
        for record in batch:
            trace.append(record)
        yield batch


def _stop_from_here(backend, records, stop):
    started, blocks = time.perf_counter(), []
    for record in records:
        yield record
        if isinstance(record, BlockRecord):
            blocks.append(record.tokens)
        if stop.is_set() and not isinstance(record, RunEnd):
            records.close()
            sequence = np.concatenate(blocks) if blocks else np.zeros(0, np.int32)
            yield RunEnd(
                finish_reason=FINISH_CANCELLED, sequence=frozen_array(sequence, np.int32),
                text=backend.decode(sequence), wall_time_s=time.perf_counter() - started, error=None,
            )
            return


def preload_for_zero_gpu(source: str) -> None:
    """ZeroGPU's rule: the model goes to CUDA at start-up (the worker forks with it in place)."""
    if on_zero_gpu():
        MODELS.get(source)
