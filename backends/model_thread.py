"""One persistent thread that runs every call of a model, in order, as futures.

Two backends need their model's work on one thread that lives as long as the model:
- MLX arrays belong to the thread that made them, so `MLXBackend` submits loading, generation and
  release to its thread and waits on futures;
- torch.compile's CUDA graphs keep their trees in the thread's locals, so the transformers backend
  runs its compiled CUDA generations on one thread (`transformers_backend.py` says why).

    worker = ModelThread("mlx-worker", on_exit=clear_mlx_streams)
    model = worker.submit(load, source).result()
    stop_thread(worker, closing_event)          # (weakref.finalize calls this when the backend goes)
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future


def stop_thread(worker: "ModelThread", closing: threading.Event | None = None) -> None:
    if closing is not None:
        closing.set()  # a run in progress stops at its next step instead of finishing
    worker.stop()


class ModelThread:
    """A thread that runs submitted calls one after another, and `on_exit` on its way out.

    Not a ThreadPoolExecutor: what a library keeps in a thread's locals must be let go while that
    thread still runs Python (MLX 0.32 needs `mx.clear_streams()`, or the process can abort at exit
    with "terminate called without an active exception"; torch's CUDA-graph trees are Python objects
    held by C++ thread-locals), and an executor's threads end at interpreter shutdown before
    anything could run on them.  `stop()` (a `weakref.finalize` of the backend, which also runs at
    exit) lets the queued calls finish, then `on_exit`, then the thread ends.
    """

    def __init__(self, name: str, on_exit: Callable[[], None] | None = None):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stopped = False
        self._on_exit = on_exit
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    def submit(self, fn: Callable, *args) -> Future:
        future: Future = Future()
        with self._lock:
            if self._stopped:
                raise RuntimeError(f"the {self._thread.name} thread has stopped")
            self._jobs.put((future, fn, args))
        return future

    def stop(self) -> None:
        """Let queued jobs finish, then end the thread (and wait for it, unless called on it, or unless a
        run was abandoned inside a collective that never returns: then nobody waits for it, and the
        process ends with os._exit, `process_group.end_process`)."""
        from .process_group import stuck_reason

        with self._lock:
            if not self._stopped:
                self._stopped = True
                self._jobs.put(None)
        if threading.current_thread() is not self._thread and stuck_reason() is None:
            self._thread.join()

    def _run(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                future, fn, args = job
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # the caller gets it from the future
                    future.set_exception(exc)
                del job, future, fn, args  # drop the last references here, not at the next job
        finally:
            if self._on_exit is not None:
                self._on_exit()
