"""The one thread that owns a model's MLX arrays: every MLX call of a backend runs on it, in order.

MLX arrays belong to the thread that made them, so `MLXBackend` submits loading, generation and
release to its `MLXWorker` and waits on futures.

    worker = MLXWorker()
    model = worker.submit(load, source).result()
    stop_worker(worker, closing_event)          # (weakref.finalize calls this when the backend goes)
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future


def stop_worker(worker: "MLXWorker", closing: threading.Event) -> None:
    closing.set()  # a run in progress stops at its next step instead of finishing
    worker.stop()


class MLXWorker:
    """One persistent thread that runs every MLX call of a backend, in order, as futures.

    Not a ThreadPoolExecutor: MLX (0.32) needs `mx.clear_streams()` on every thread that used
    it before that thread ends, or the process can abort at exit ("terminate called without an
    active exception"), and an executor's threads end at interpreter shutdown before anything
    could run on them.  This thread clears its streams on its way out.
    """

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="mlx-worker", daemon=True)
        self._thread.start()

    @property
    def ident(self) -> int | None:
        return self._thread.ident

    def submit(self, fn: Callable, *args) -> Future:
        future: Future = Future()
        with self._lock:
            if self._stopped:
                raise RuntimeError("the MLX worker thread has stopped")
            self._jobs.put((future, fn, args))
        return future

    def stop(self) -> None:
        """Let queued jobs finish, then end the thread (and wait for it, unless called on it)."""
        with self._lock:
            if not self._stopped:
                self._stopped = True
                self._jobs.put(None)
        if threading.current_thread() is not self._thread:
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
            if "mlx.core" in sys.modules:  # MLX was used on this thread
                sys.modules["mlx.core"].clear_streams()
