"""The one small interface every backend implements.

A backend loads a model once, says what it is, and runs a generation as a generator of records
(`visualizer.records`): RunStart, a StepRecord per denoising step, a BlockRecord per finished
block, RunEnd.  It checks the `stop` event between steps and then ends the run with
RunEnd(finish_reason="cancelled"), so everything recorded so far is kept.

    backend = load_backend("assets/models/diffusiongemma-tiny-demo")   # backends/__init__.py
    print(backend.info)                                                 # ModelInfo
    for record in backend.generate("Write a haiku", GenerationSettings(seed=0)):
        ...

Errors a user can cause (a model that does not load, a prompt that is too long, out of memory)
are raised as `BackendError` with a message meant for the UI and the CLI.
"""

from __future__ import annotations

import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import numpy as np

from visualizer.records import (
    FINISH_CANCELLED,
    FINISH_EOS,
    FINISH_ERROR,
    FINISH_LENGTH,
    STOP_CONVERGED,
    STOP_OUT_OF_STEPS,
    BlockRecord,
    ModelInfo,
    Record,
    RunEnd,
    StepRecord,
    frozen_array,
    frozen_matrix,
)
from visualizer.settings import GenerationSettings

_QUEUE_SIZE = 64  # records buffered between the model's thread and a slow consumer
_DONE = object()  # the worker's run returned
_CANCELLED = object()  # the worker's run stopped between two steps


class BackendError(RuntimeError):
    """A problem the user can act on; the message is shown as is."""


class BackendUnavailable(BackendError):
    """The backend's libraries are not installed on this machine."""


class GenerationCancelled(Exception):
    """Raised inside a backend's step loop, between two steps, when the run has to stop."""


class Backend(ABC):
    name: str = ""  # "transformers" or "mlx"
    info: ModelInfo

    @abstractmethod
    def default_settings(self) -> GenerationSettings:
        """The checkpoint's own generation defaults, every knob filled in."""

    @abstractmethod
    def prompt_ids(self, prompt: str) -> list[int]:
        """The prompt as the model sees it: one user turn through the chat template."""

    @abstractmethod
    def generate(
        self, prompt: str, settings: GenerationSettings, stop: threading.Event | None = None
    ) -> Iterator[Record]:
        """Run one generation, yielding records as the model produces them."""

    def resolve(self, settings: GenerationSettings) -> GenerationSettings:
        """Fill every None knob from the checkpoint's defaults."""
        defaults = self.default_settings()
        filled = {k: (v if v is not None else getattr(defaults, k)) for k, v in settings.to_dict().items()}
        return GenerationSettings(**filled)

    def check(self, prompt: str, settings: GenerationSettings) -> list[int]:
        """Validate a request before any work; returns the prompt ids or raises BackendError."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise BackendError("The prompt is empty: type something for the model to answer.")
        problems = settings.problems()
        if problems:
            raise BackendError("; ".join(problems))
        ids = self.prompt_ids(prompt)
        problems = self.resolve(settings).problems(
            max_context=self.info.max_context, prompt_tokens=len(ids), canvas_length=self.info.canvas_length
        )
        if problems:
            raise BackendError("; ".join(problems))
        return ids

    def close(self) -> None:
        """Free the model's memory; the backend cannot be used afterwards."""

    # ---- shared by the backends --------------------------------------------------------------
    def decode(self, sequence: np.ndarray) -> str:
        """The response text of a run's committed tokens."""
        return self.tokenizer.decode(sequence.tolist(), skip_special_tokens=True)

    def failure_message(self, exc: BaseException) -> str:
        """One line for a run that failed (backends add their own out-of-memory types)."""
        if isinstance(exc, MemoryError):
            return "Out of memory during generation: lower max new tokens, or use a shorter prompt."
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"Generation failed: {type(exc).__name__}: {first[:300]}"

    def stream(
        self,
        launch: Callable[[Callable[[], None]], Future],
        produce: Callable[[Callable[[Record], None], Callable[[], bool]], None],
        stop: threading.Event,
        started: float,
    ) -> Iterator[Record]:
        """Yield the records a worker thread produces, as they come, then the run's RunEnd.

        `produce(emit, should_stop)` runs the generation on the worker (`launch` starts it and
        returns a Future), calls `emit` for each StepRecord and BlockRecord, and raises
        GenerationCancelled between two steps once `should_stop()` is true.  A bounded queue
        bridges the two threads; exceptions come through it and end the run with a message.
        When the consumer closes this generator early, the worker stops at its next step and is
        waited for, so no run outlives its generator.
        """
        records: queue.Queue = queue.Queue(maxsize=_QUEUE_SIZE)
        halt = threading.Event()  # set when the consumer is gone: the worker must not wait on the queue

        def emit(item) -> None:
            while not halt.is_set():
                try:
                    records.put(item, timeout=0.1)
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
        blocks: list[np.ndarray] = []
        finish, error = None, None
        try:
            while True:
                try:
                    item = records.get(timeout=0.1)
                except queue.Empty:
                    if job.done() and records.empty():
                        break
                    continue
                if item is _DONE:
                    break
                if item is _CANCELLED:
                    finish = FINISH_CANCELLED
                    break
                if isinstance(item, BaseException):
                    finish, error = FINISH_ERROR, self.failure_message(item)
                    break
                if isinstance(item, BlockRecord):
                    blocks.append(item.tokens)
                yield item
        finally:
            halt.set()
            job.exception()  # waits until the worker has left the run
        sequence = np.concatenate(blocks) if blocks else np.zeros(0, np.int32)
        if finish is None:
            finish = FINISH_EOS if np.isin(sequence, self.info.eos_token_ids).any() else FINISH_LENGTH
        yield RunEnd(
            finish_reason=finish,
            sequence=frozen_array(sequence, np.int32),
            text=self.decode(sequence),
            wall_time_s=time.perf_counter() - started,
            error=error,
        )


def start_thread(fn: Callable[[], None], name: str) -> Future:
    """Run `fn` on a new thread; the Future says when it is done.

    Not a daemon thread: the Future is set a moment before the thread ends, and the interpreter
    joins a non-daemon thread before it shuts down, so no run is cut off mid-step at exit.
    (C++ thread-locals are freed after that join; see transformers_backend for the one torch
    stashes Python objects in.)
    """
    future: Future = Future()

    def run():
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=False).start()
    return future


def step_record(item, pieces) -> StepRecord:
    """A StepRecord from a backend's captured step (block, step, steps_remaining, accepted,
    canvas, argmax, entropy_nats, wall_time_s, and optionally topk_ids, topk_probs and
    sample_probability), with the pieces of ids not sent before."""
    topk_ids = getattr(item, "topk_ids", None)
    topk_probs = getattr(item, "topk_probs", None)
    sample_probability = getattr(item, "sample_probability", None)
    shown = [item.argmax, item.canvas[item.accepted]] + ([topk_ids.reshape(-1)] if topk_ids is not None else [])
    return StepRecord(
        block=item.block,
        step=item.step,
        steps_remaining=item.steps_remaining,
        accepted=frozen_array(item.accepted, bool),
        canvas=frozen_array(item.canvas, np.int32),
        argmax=frozen_array(item.argmax, np.int32),
        entropy_nats=frozen_array(item.entropy_nats, np.float32),
        wall_time_s=item.wall_time_s,
        new_pieces=pieces.new(np.concatenate(shown)),
        topk_ids=None if topk_ids is None else frozen_matrix(topk_ids, np.int32, topk_ids.shape[-1]),
        topk_probs=None if topk_probs is None else frozen_matrix(topk_probs, np.float16, topk_probs.shape[-1]),
        sample_probability=None if sample_probability is None else frozen_array(sample_probability, np.float32),
    )


def block_record(item, pieces, eos_token_ids) -> BlockRecord:
    """A BlockRecord from a captured block (block, tokens, steps_used, converged)."""
    eos = np.flatnonzero(np.isin(item.tokens, eos_token_ids))
    return BlockRecord(
        block=item.block,
        tokens=frozen_array(item.tokens, np.int32),
        eos_position=int(eos[0]) if eos.size else None,
        stop_reason=STOP_CONVERGED if item.converged else STOP_OUT_OF_STEPS,
        steps_used=item.steps_used,
        new_pieces=pieces.new(item.tokens),
    )
