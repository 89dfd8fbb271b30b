"""The app's runs: the models every session shares, and one generation driven into a trace.

    backend = MODELS.get(source, kind)                    # loaded once for everyone (kind: the backend, None: the model's own)
    trace = Trace(model=backend.info, prompt=prompt)
    for batch in run_live(backend, source, prompt, settings, trace=trace, stop=session.stop, kind=kind):
        ...                                               # the records appended to `trace` since the last batch

Every run goes through `backends.run_records`, as the CLI's and the probe's do.  On ZeroGPU
hardware (SPACES_ZERO_GPU, set by the Space) the backend's run happens inside `spaces.GPU`: in a
forked worker that inherits the model moved to CUDA at start-up (`preload_for_zero_gpu`), with
arguments and batches of records travelling pickled.  That worker cannot see this process's stop
event, so there Stop closes the worker's stream and the run ends here as cancelled, keeping every
recorded step.
Under torchrun (a sharded model, `serve_only`) rank 0's runs go through its `backends.Leader`,
which announces each to the other ranks and runs one at a time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from backends import run_records
from backends.base import BackendError, run_end
from backends.cache import LoadedModels
from backends.known import on_zero_gpu
from visualizer.live_stream import LiveEncoder, LiveRing
from visualizer.records import FINISH_CANCELLED, BlockRecord, RunEnd
from visualizer.trace import Trace

from .hosting import env_int
from .zero_gpu import on_gpu

# At most ~6 live updates a second: each costs Gradio a few ms of server CPU whatever it carries, so at
# 25 steps/s an update carries ~4 frames (BENCHMARKS.md, "a few updates a second, paced out in the browser"); the view paces them out
# (live_view.js), and a run's last frames and end line go out at once (`generate` flushes the end).
LIVE_MIN_INTERVAL_S = 0.16
GPU_SECONDS_ENV = "DV_GPU_SECONDS"
MODELS = LoadedModels(keep=2)  # every session's loaded models (module level: ZeroGPU's worker finds them here)
LEADER = None  # rank 0's `backends.Leader` when the app serves a model sharded under torchrun (`serve_only`)


def serve_only(source: str, backend, leader=None) -> None:
    """This server runs `backend`, loaded at start-up, and no other model; with a `leader` (rank 0 of
    a sharded model) every run goes through it, one at a time, in lockstep with the other ranks."""
    global LEADER
    MODELS.pin(source, backend)
    LEADER = leader


def sharded_problem() -> str | None:
    """Why the sharded model can run no more (a rank stopped, the server is shutting down); None when it can."""
    return LEADER.problem() if LEADER is not None else None


def run_live(backend, source: str, prompt: str, settings, *, trace: Trace, stop, kind: str | None = None) -> Iterator[list]:
    """Run one generation into `trace` (`backends.run_records`), yielding each batch of records
    after appending it; `backend` is `MODELS.get(source, kind)`.  A bad request raises BackendError at the first batch, before anything is
    appended; setting `stop` ends the run at the next step; closing the generator ends it too."""
    if settings.compiled:
        raise BackendError("torch.compile is off in the app (ZeroGPU forbids it).")
    if LEADER is not None:  # the other ranks run it too: announced, one run at a time (backends/sharded_server.py)
        return LEADER.run_records(prompt, settings, trace=trace, stop=stop)
    if on_zero_gpu():
        backend.check(prompt, settings)  # a bad request gets its message here, not from the GPU worker
        backend = _OnZeroGPU(backend, source, kind)
    return run_records(backend, prompt, settings, trace=trace, stop=stop)


def live_values(session, trace: Trace, batches: Iterator[list], *, min_interval_s: float) -> Iterator[list[str]]:
    """The live view's values for a run whose first batch (RunStart) `batches` already gave: a `LiveRing` of the
    newest frame lines, at most one value every `min_interval_s` (what arrives meanwhile waits in the backend's queue
    and comes with the next), the run's end at once.  `session` (a RunSession) is marked running meanwhile; closing
    this generator (the tab went) closes `batches`, which ends the run at its next step.  Generate and a fork's
    branch (`fork_panel.py`) stream through it."""
    session.running = True
    session.stop.clear()
    encoder = LiveEncoder(trace, run=session.run_id)
    ring = LiveRing(encoder.start_line())
    try:
        yield ring.value()
        last = time.monotonic()
        for _ in batches:
            wait = last + min_interval_s - time.monotonic()
            if wait > 0 and not trace.finished:
                time.sleep(wait)
            ring.add(encoder.frame_lines() + (encoder.end_line() if trace.finished else ""))
            if trace.finished:  # over once its end is recorded: a browser shown the end asks about it at once (the
                session.running = False  # step on screen into Fork at), and must not be told a run is still going
            yield ring.value()
            last = time.monotonic()
        yield ring.closed()
    finally:
        batches.close()
        session.running = False
        session.stop.clear()


@on_gpu(duration=env_int(GPU_SECONDS_ENV, 120))
def _generate_on_gpu(source: str, kind: str | None, prompt: str, settings):
    """The batches of one run, computed where the GPU is."""
    yield from MODELS.get(source, kind).generate_batches(prompt, settings)


class _OnZeroGPU:
    """A backend as `run_records` sees it, whose runs happen in ZeroGPU's worker."""

    def __init__(self, backend, source: str, kind: str | None):
        self.backend, self.source, self.kind = backend, source, kind

    def generate_batches(self, prompt: str, settings, stop) -> Iterator[list]:
        started, blocks = time.perf_counter(), []
        batches = _generate_on_gpu(self.source, self.kind, prompt, settings)
        for batch in batches:
            yield batch
            blocks += [record.tokens for record in batch if isinstance(record, BlockRecord)]
            if stop.is_set() and not isinstance(batch[-1], RunEnd):
                batches.close()  # ends the worker's run
                yield [run_end(self.backend, blocks, finish=FINISH_CANCELLED, error=None, started=started)]
                return


def preload_for_zero_gpu(source: str) -> None:
    """ZeroGPU's rule: the model goes to CUDA at start-up (the worker forks with it in place)."""
    if on_zero_gpu():
        MODELS.get(source)
