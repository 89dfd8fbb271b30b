"""The push-to-pull bridge: a model's run that pushes items (`emit`) read as a generator, on two threads.

A backend's capture calls `emit(item)` on the model's thread, step by step; the UI and the CLI want a
generator they can read at their own pace and close when they like. `stream` runs the producing
function on a worker, passes its items through a bounded queue, converts each on the reading thread,
and yields them in lists of whatever has arrived; the stop flag (`Stop`) and the exceptions travel
the same way. It knows nothing of records or models: what it streams is what `convert` makes.

    outcome = yield from stream(produce, stop, launch=start, convert=to_record, failure_message=str)
    # then: outcome.finish ("cancelled", "error" or None: it ran to its end), outcome.error, outcome.model_error

`Backend.generate_rows` (`base.py`) is its one caller: it adds the run's RunStart before and RunEnds after.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import Future
from dataclasses import dataclass

from visualizer.records import FINISH_CANCELLED, FINISH_ERROR

from .process_group import abandon_process

log = logging.getLogger(__name__)  # a failed run's traceback, at DEBUG: the UI and the CLI show one line
_DONE = object()  # the worker's run returned
_CANCELLED = object()  # the worker's run stopped between two steps
# After `Stop.abandon`, how long the model is given to reach its next step before the run ends without it.
ABANDON_GRACE_S = 3.0


class GenerationCancelled(Exception):
    """Raised inside a backend's step loop, between two steps, when the run has to stop."""


class Stop(threading.Event):
    """A run's stop flag: `set()` ends the run at its next step.

    `abandon(reason)` also says the model may never reach that step: a rank of a sharded model died
    and, with NCCL, the others wait inside its collective for ever (a GPU kernel spinning on a peer
    that is gone; no Python runs on that thread again). The run then ends `ABANDON_GRACE_S` later
    whatever the model does, with `reason` and every record so far, and its worker is left where it
    is; the process can then only end with `os._exit` (`process_group.abandon_process`)."""

    def __init__(self, linked: threading.Event | None = None):
        super().__init__()
        self.linked = linked  # another flag that also stops the run (the caller's, where a Leader makes this one)
        self.abandon_reason: str | None = None
        self.abandoned_at: float | None = None

    def is_set(self) -> bool:
        return super().is_set() or (self.linked is not None and self.linked.is_set())

    def abandon(self, reason: str) -> None:
        if self.abandon_reason is None:
            self.abandon_reason, self.abandoned_at = reason, time.monotonic()
        self.set()

    def given_up(self) -> str | None:
        """The reason, once the grace after `abandon` has passed; None before."""
        if self.abandoned_at is None or time.monotonic() - self.abandoned_at < ABANDON_GRACE_S:
            return None
        return self.abandon_reason


@dataclass(frozen=True)
class Outcome:
    """How a streamed run ended: `stream`'s return value."""

    finish: str | None  # FINISH_CANCELLED, FINISH_ERROR, or None: the run went to its end
    error: str | None  # the one-line message of an error that ended it
    model_error: BaseException | None  # what the worker's `produce` raised, if that ended it


def stream(
    produce: Callable[[Callable[[object], None], Callable[[], bool]], None],
    stop: threading.Event,
    *,
    launch: Callable[[Callable[[], None]], Future],
    convert: Callable[[object], object],
    failure_message: Callable[[BaseException], str],
    buffered: int,
) -> Generator[list, None, Outcome]:
    """Yield `convert(item)` for each item a worker's `produce` emits, in lists of whatever has arrived;
    return how the run ended (`Outcome`).

    `produce(emit, should_stop)` runs on the worker (`launch(work)` starts it), calls `emit` for each
    item (which `convert` turns into what is yielded here, on the consuming thread), and raises
    GenerationCancelled between two steps once `should_stop()` is true.  A queue of `buffered` items
    bridges the two threads; exceptions come through it and end the run with `failure_message(exc)`.
    When the consumer closes this generator early, the worker stops at its next step and is waited
    for, so no run outlives its generator.  Ctrl-C in the consuming thread stops the run the same way
    as `stop`.  An item that cannot be converted ends the run with its error and stops the worker as a
    stop does (at its next step): the model's run did not fail, so no `model_error` is returned for it.
    """
    items: queue.Queue = queue.Queue(maxsize=buffered)
    halt = threading.Event()  # set when the consumer is gone: the worker must not wait on the queue

    def emit(item) -> None:
        while not halt.is_set():
            try:
                items.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def work() -> None:
        try:
            produce(emit, lambda: stop.is_set() or halt.is_set())
            emit(_DONE)
        except GenerationCancelled:
            emit(_CANCELLED)
        except BaseException as exc:  # forwarded to the consumer, which ends the run with it
            emit(exc)

    job = launch(work)
    finish, error, abandoned = None, None, False
    model_error = None  # what the worker's `produce` raised, if anything
    try:
        while finish is None:
            try:
                first = items.get(timeout=0.1)
            except queue.Empty:
                if job.done() and items.empty():
                    break
                given_up = stop.given_up() if isinstance(stop, Stop) else None
                if given_up:  # the model never reached its next step: end the run without it
                    finish, error, abandoned = FINISH_ERROR, given_up, True
                    abandon_process(given_up)
                    break
                continue
            except KeyboardInterrupt:
                stop.set()  # the worker ends the run at its next step; its end says "cancelled"
                continue
            batch = []
            for item in _drain(items, first):
                if item is _DONE:
                    finish = finish or "done"
                elif item is _CANCELLED:
                    finish = FINISH_CANCELLED
                elif isinstance(item, BaseException):
                    model_error = item
                    finish, error = FINISH_ERROR, failure_message(item)
                    log.debug("the run failed: %s", error, exc_info=item)
                else:
                    try:
                        batch.append(convert(item))
                    except Exception as exc:  # an item that broke the record rules: end the run with it
                        # `halt` (below) stops the worker as a Stop does: on a sharded model at a vote
                        finish, error = FINISH_ERROR, failure_message(exc)
                        break
                if finish is not None:
                    break
            if batch:
                yield batch
    finally:
        halt.set()
        if not abandoned:
            job.exception()  # waits until the worker has left the run
    return Outcome(finish=None if finish == "done" else finish, error=error, model_error=model_error)


def _drain(items: queue.Queue, first):
    """`first`, then every item already waiting in the queue."""
    yield first
    while True:
        try:
            yield items.get_nowait()
        except queue.Empty:
            return
