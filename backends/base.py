"""The one small interface every backend implements.

A backend loads a model once, says what it is (`info`) and what it can do (`capabilities`: the
knobs it reads, its samplers with their accept rules), and runs a generation as a generator of
records (`visualizer.records`): RunStart, a StepRecord per denoising step, a BlockRecord per
finished block, RunEnd.  It checks the `stop` event between steps and then ends the run with
RunEnd(finish_reason="cancelled"), so everything recorded so far is kept.

The run's sequence (check, resolve, the piece table, RunStart, the worker, the stream, RunEnd) is
written once, in `Backend.generate_rows`; a backend implements only `_produce`, which runs
its model and emits one `captured.CapturedStep` per step and one `CapturedBlock` per block
(a backend that batches several prompts in one call also implements `_produce_batch`).
Adding a backend means one module and one entry in `registry.py`.

    backend = load_backend("assets/models/diffusiongemma-tiny-demo")   # backends/__init__.py
    print(backend.info)                                                 # ModelInfo
    for record in backend.generate("Write a haiku", GenerationSettings(seed=0)):
        ...

Errors a user can cause (a model that does not load, a prompt that is too long, out of memory)
are raised as `BackendError` with a message meant for the UI and the CLI.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from visualizer.records import (
    FINISH_CANCELLED,
    FINISH_EOS,
    FINISH_ERROR,
    FINISH_LENGTH,
    LENS_DTYPES,
    STOP_CONVERGED,
    STOP_OUT_OF_STEPS,
    BlockRecord,
    ModelInfo,
    Record,
    RunEnd,
    RunStart,
    StepRecord,
    frozen_array,
    frozen_cube,
    frozen_matrix,
)
from visualizer.samplers import SamplerSpec
from visualizer.settings import KNOBS, LAYERS_ALL, GenerationSettings

from .captured import CapturedBlock, CapturedStep
from .known import first_line
from .process_group import abandon_process
from .text import PieceDecoder, PieceTable

log = logging.getLogger(__name__)  # a failed run's traceback, at DEBUG: the UI and the CLI show one line
_QUEUE_SIZE = 64  # captured items buffered per batch row between the model's thread and a slow consumer
_DONE = object()  # the worker's run returned
_CANCELLED = object()  # the worker's run stopped between two steps
# After `Stop.abandon`, how long the model is given to reach its next step before the run ends without it.
ABANDON_GRACE_S = 3.0


class BackendError(RuntimeError):
    """A problem the user can act on; the message is shown as is."""


class BackendUnavailable(BackendError):
    """The backend's libraries are not installed on this machine."""


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
class Capabilities:
    """What a backend can do, declared once: the app, the CLI, hosted mode and the traces read this,
    never the backend's name."""

    knobs: frozenset[str]  # the GenerationSettings fields it reads; the others are recorded as None
    samplers: tuple[SamplerSpec, ...]  # the samplers it runs, its default first
    max_batch: int | None = 1  # most prompts one generate call takes (`generate_rows`); None: no limit but memory
    # Knobs one of its samplers ignores although the knob table says that sampler reads them
    # (diffusers' entropy-bound scheduler has its own temperature schedule, no temperature).
    not_read: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def knobs_for(self, sampler: str | None) -> frozenset[str]:
        """The knobs a run with this sampler (None: the default) reads: those the backend reads that the
        knob table says the sampler reads (`visualizer.settings.KNOBS`), less its `not_read`."""
        name = self.sampler(sampler).name
        return frozenset(k for k in self.knobs if KNOBS[k].read_by(name)) - self.not_read.get(name, frozenset())

    def sampler(self, name: str | None) -> SamplerSpec:
        """The spec of a sampler by name (None: the default); BackendError naming the ones it has."""
        if name is None:
            return self.samplers[0]
        for spec in self.samplers:
            if spec.name == name:
                return spec
        names = ", ".join(spec.name for spec in self.samplers)
        if len(self.samplers) == 1:
            raise BackendError(f"this model's backend only has the {names} sampler (got {name!r})")
        raise BackendError(f"the sampler must be one of {names}, the ones this model's backend runs (got {name!r})")


@runtime_checkable
class Tokenizer(Protocol):
    """What the run sequence (`generate_rows`, `decode`) and `text.py` use of a backend's tokenizer; a
    Hugging Face tokenizer (transformers, mlx-vlm's processor's) has all of it. `chat_template` (the
    template's text, for the thinking switch) and a fast tokenizer's `backend_tokenizer` are read where
    present."""

    def apply_chat_template(self, conversation, **kwargs): ...

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str: ...

    def batch_decode(self, sequences, skip_special_tokens: bool = False) -> list[str]: ...


# Knobs every backend reads, as the knob table declares them (the rest are declared per backend).
COMMON_KNOBS = frozenset(knob.name for knob in KNOBS.values() if knob.every_backend)


class Backend(ABC):
    """One model on one backend. A subclass loads the model, declares `capabilities`, and implements
    `default_settings`, `prompt_ids` and `_produce`; the sequence of a run lives here, once."""

    name: str = ""  # the registry's name for it (`backends.registry`)
    capabilities: Capabilities
    info: ModelInfo
    tokenizer: Tokenizer  # set when the model loads: the prompt's template, the pieces' and the answer's text
    # Its runs queue on one model thread (`_launch`) and run one after another, so a caller may start the
    # next run while one generates (the probe runner does, to keep the GPU busy between batches).
    runs_in_order: bool = False

    @abstractmethod
    def default_settings(self) -> GenerationSettings:
        """The checkpoint's own generation defaults, every knob this backend reads filled in."""

    @abstractmethod
    def prompt_ids(self, prompt: str, *, thinking: bool = False) -> list[int]:
        """The prompt as the model sees it: one user turn through the chat template; `thinking`
        turns on the template's thinking channel (`enable_thinking`), a BackendError where it has none."""

    @abstractmethod
    def _produce(
        self,
        ids: list[int],
        settings: GenerationSettings,
        emit: Callable[[CapturedStep | CapturedBlock], None],
        should_stop: Callable[[], bool],
    ) -> None:
        """Run one generation on the worker (`_launch`), calling `emit` after every step and every
        block, and raising GenerationCancelled between two steps once `should_stop()` is true."""

    def _launch(self, work: Callable[[], None]) -> Future:
        """Start `work` where this backend's model runs. The backends here keep one thread for the
        model's life (`model_thread.ModelThread`: transformers and diffusers for CUDA graphs, MLX for
        its arrays); this default, a new thread per run, serves a backend without one (the tests' fakes)."""
        return start_thread(work, name=f"{self.name}-generate")

    # ---- the one run sequence ----------------------------------------------------------------
    def generate(
        self, prompt: str, settings: GenerationSettings, stop: threading.Event | None = None
    ) -> Iterator[Record]:
        """Run one generation, yielding records as the model produces them."""
        for batch in self.generate_batches(prompt, settings, stop):
            yield from batch

    def generate_batches(
        self, prompt: str, settings: GenerationSettings, stop: threading.Event | None = None
    ) -> Iterator[list[Record]]:
        """Run one generation, yielding lists of the records that arrived since the last list.

        RunStart comes first, alone; RunEnd comes last, also after a stop or an error. A slow
        consumer simply gets longer lists: nothing is dropped and no second thread is needed.
        Returns what `generate_rows` returns (`model_error` reads it).
        """
        rows = self.generate_rows([prompt], settings, stop)
        while True:
            try:
                batch = next(rows)
            except StopIteration as finished:
                return finished.value
            yield [record for _, record in batch]

    def generate_rows(
        self, prompts: list[str], settings: GenerationSettings, stop: threading.Event | None = None
    ) -> Iterator[list[tuple[int, Record]]]:
        """Run one generation per prompt in one batched call of the model, yielding lists of
        (row, record) as they arrive; row is the prompt's index.

        Each row's records are a whole run on their own: its RunStart (the first list holds
        every row's), its steps and blocks, and its RunEnd (the last list holds every row's).
        A row's samples depend on the batch it ran in (one seed per batch, batched kernels), so
        a batch of several records it in each RunStart's `batch` ({"size", "row"}); a batch of
        one is the single-prompt run exactly (`batch` None).

        Returns (the generator's return value, which `model_error` reads once the RunEnds came) the
        exception raised inside the model's run when one ended it, None when the model's run returned
        or stopped between two steps. A sharded server's leader tells by it whether the other ranks
        left their `generate` where this one did (`sharded_server.Leader`).
        """
        if not prompts:
            raise BackendError("No prompts to generate: give at least one.")
        limit = self.capabilities.max_batch
        if limit is not None and len(prompts) > limit:
            raise BackendError(
                f"The {self.name} backend runs at most {limit} prompt(s) at a time (got a batch of {len(prompts)})."
            )
        rows_ids = [self._check_row(prompt, settings, row, len(prompts)) for row, prompt in enumerate(prompts)]
        settings = self.resolve(settings)
        pins = self.pinned_ids(settings)
        sampler = self.capabilities.sampler(settings.sampler)
        stop = stop or threading.Event()
        started = time.perf_counter()
        decoder = self._piece_decoder()
        tables = [PieceTable(decoder=decoder) for _ in prompts]
        yield [
            (
                row,
                RunStart(
                    prompt_ids=frozen_array(ids, np.int32),
                    settings=settings.to_dict(),
                    max_blocks=math.ceil(settings.max_new_tokens / self.info.canvas_length),
                    sampler_rule=sampler.rule.to_dict(),
                    batch=None if len(prompts) == 1 else {"size": len(prompts), "row": row},
                    pins=pins,
                    new_pieces=tables[row].new(ids + [token for _, token in pins]),
                ),
            )
            for row, ids in enumerate(rows_ids)
        ]

        def produce(emit, should_stop):
            self._produce_batch(rows_ids, settings, emit, should_stop)

        def to_record(item: CapturedStep | CapturedBlock) -> Record:
            # On the consuming thread, not the model's: the copies, the pieces and the decoding of
            # B rows a step stay off the worker that keeps the GPU busy.
            pieces = tables[item.row]
            if isinstance(item, CapturedStep):
                return step_record(item, pieces)
            return block_record(item, pieces, self.info.eos_token_ids)

        return (yield from self._stream(produce, stop, started, rows=len(prompts), to_record=to_record))

    def _piece_decoder(self) -> PieceDecoder:
        """The decoded texts every run of this model shares (`text.PieceDecoder`), made at first use."""
        decoder = getattr(self, "_pieces", None)
        if decoder is None or decoder.tokenizer is not self.tokenizer:
            decoder = self._pieces = PieceDecoder(self.tokenizer)
        return decoder

    def _produce_batch(
        self,
        rows_ids: list[list[int]],
        settings: GenerationSettings,
        emit: Callable[[CapturedStep | CapturedBlock], None],
        should_stop: Callable[[], bool],
    ) -> None:
        """`_produce` for a batch of prompts, each captured item saying its `row`. A backend that
        batches overrides this (and declares `Capabilities.max_batch`); the others run one prompt."""
        if len(rows_ids) != 1:
            raise BackendError(f"The {self.name} backend runs one prompt at a time.")
        self._produce(rows_ids[0], settings, emit, should_stop)

    def supports_thinking(self) -> bool:
        """Whether the chat template has a thinking channel to turn on (`enable_thinking`)."""
        from .text import supports_thinking

        return supports_thinking(self.tokenizer)

    def templated_ids(self, prompt: str, thinking: bool) -> list[int]:
        """`chat_prompt_ids` with a missing thinking mode turned into a BackendError."""
        from .text import NoThinkingMode, chat_prompt_ids

        try:
            return chat_prompt_ids(self.tokenizer, prompt, thinking=thinking)
        except NoThinkingMode as exc:
            raise BackendError(f"{self.info.name}: {exc}") from None

    def resolve(self, settings: GenerationSettings) -> GenerationSettings:
        """Fill every None knob from the checkpoint's defaults; knobs this run's sampler does not
        read become None (a switch, False), so the trace records only what was really used."""
        defaults = self.default_settings()
        reads = self.capabilities.knobs_for(settings.sampler)
        filled = {}
        for key, value in settings.to_dict().items():
            if key not in reads:
                filled[key] = False if KNOBS[key].kind is bool else None
            else:
                filled[key] = value if value is not None else getattr(defaults, key)
        filled["seed"] = settings.seed
        if filled.get("layers") == LAYERS_ALL:
            filled["layers"] = tuple(range(self.info.layers))
        return GenerationSettings(**filled)

    def pinned_ids(self, settings: GenerationSettings) -> tuple[tuple[int, int], ...]:
        """settings.pins tokenized: ((position, token id), ...) sorted, each text on consecutive positions of
        the first block from its position. A pin outside the canvas, an empty text, tokens that run past the
        canvas or two pins on one position: BackendError with one line."""
        canvas, placed = self.info.canvas_length, {}
        for position, text in settings.pins or ():
            if not 0 <= position < canvas:
                raise BackendError(f"pin position {position} is outside the canvas (positions 0 to {canvas - 1})")
            if not text:
                raise BackendError(f"the pin at position {position} has an empty text")
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            quoted = repr(text if len(text) <= 40 else text[:37] + "...")  # a pin may be as long as a prompt
            if not ids:
                raise BackendError(f"the pin at position {position} ({quoted}) tokenizes to nothing")
            if position + len(ids) > canvas:
                raise BackendError(
                    f"the pin at position {position} is {len(ids)} tokens ({quoted}): more than the "
                    f"{canvas - position} position(s) left in the canvas of {canvas}"
                )
            for offset, token in enumerate(ids):
                if position + offset in placed:
                    raise BackendError(f"two pins cover position {position + offset}: pins must not overlap")
                placed[position + offset] = int(token)
        return tuple(sorted(placed.items()))

    def _check_row(self, prompt: str, settings: GenerationSettings, row: int, rows: int) -> list[int]:
        """`check` for one prompt of a batch; the message names the prompt when there are several."""
        try:
            return self.check(prompt, settings)
        except BackendError as exc:
            if rows == 1:
                raise
            raise BackendError(f"Prompt {row + 1} of {rows}: {exc}") from None

    def check(self, prompt: str, settings: GenerationSettings) -> list[int]:
        """Validate a request before any work; returns the prompt ids or raises BackendError."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise BackendError("The prompt is empty: type something for the model to answer.")
        problems = settings.problems()
        if problems:
            raise BackendError("; ".join(problems))
        self.capabilities.sampler(settings.sampler)  # a sampler this backend cannot run: one line
        for knob, what in (("pins", "pin tokens (--pin)"), ("layers", "record layers (--layers)"),
                           ("kl_to_final", "record the KL to the final step (--kl-to-final)")):
            if getattr(settings, knob) and knob not in self.capabilities.knobs:
                raise BackendError(f"the {self.name} backend cannot {what}: its capture has no such hook")
        if settings.layers and settings.layers != LAYERS_ALL and max(settings.layers) >= self.info.layers:
            raise BackendError(
                f"layer {max(settings.layers)} does not exist: this model's decoder has layers 0 to {self.info.layers - 1}"
            )
        self.pinned_ids(settings)  # a pin that does not fit: one line, before any work
        ids = self.prompt_ids(prompt, thinking=bool(settings.thinking))
        problems = self.resolve(settings).problems(
            max_context=self.info.max_context, prompt_tokens=len(ids), canvas_length=self.info.canvas_length
        )
        if problems:
            raise BackendError("; ".join(problems))
        return ids

    def close(self) -> None:
        """Free the model's memory; the backend cannot be used afterwards."""

    def decode(self, sequence: np.ndarray) -> str:
        """The response text of a run's committed tokens."""
        return self.tokenizer.decode(sequence.tolist(), skip_special_tokens=True)

    def failure_message(self, exc: BaseException) -> str:
        """One line for a run that failed (backends add their own out-of-memory types)."""
        if isinstance(exc, BackendError):
            return str(exc)
        if isinstance(exc, MemoryError):
            return "Out of memory during generation: lower max new tokens, or use a shorter prompt."
        return f"Generation failed: {type(exc).__name__}: {first_line(exc)[:300]}"

    def _stream(
        self,
        produce: Callable[[Callable[[CapturedStep | CapturedBlock], None], Callable[[], bool]], None],
        stop: threading.Event,
        started: float,
        *,
        rows: int = 1,
        to_record: Callable[[CapturedStep | CapturedBlock], Record],
    ) -> Generator[list[tuple[int, Record]], None, BaseException | None]:
        """Yield the (row, record) pairs a worker produces, in lists of whatever has arrived, then
        each row's RunEnd; return the exception the worker's `produce` raised, if one ended the run.

        `produce(emit, should_stop)` runs on the worker (`_launch`), calls `emit` for each
        CapturedStep and CapturedBlock (which `to_record` turns into records here, on the
        consuming thread), and raises GenerationCancelled between two steps once
        `should_stop()` is true.  A bounded queue bridges the two threads; exceptions come
        through it and end the run with a message.  When the consumer closes this generator
        early, the worker stops at its next step and is waited for, so no run outlives its
        generator.  Ctrl-C in the consuming thread stops the run the same way as `stop`.
        A record that cannot be made here ends the run with its error and stops the worker as a
        stop does (at its next step): the model's run did not fail, so nothing is returned for it.
        """
        records: queue.Queue = queue.Queue(maxsize=_QUEUE_SIZE * rows)  # as many steps buffered at any batch size
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

        job = self._launch(work)
        blocks: list[list[np.ndarray]] = [[] for _ in range(rows)]
        finish, error, abandoned = None, None, False
        model_error = None  # what the worker's `produce` raised, if anything
        try:
            while finish is None:
                try:
                    first = records.get(timeout=0.1)
                except queue.Empty:
                    if job.done() and records.empty():
                        break
                    given_up = stop.given_up() if isinstance(stop, Stop) else None
                    if given_up:  # the model never reached its next step: end the run without it
                        finish, error, abandoned = FINISH_ERROR, given_up, True
                        abandon_process(given_up)
                        break
                    continue
                except KeyboardInterrupt:
                    stop.set()  # the worker ends the run at its next step; RunEnd says "cancelled"
                    continue
                batch = []
                for item in _drain(records, first):
                    if item is _DONE:
                        finish = finish or "done"
                    elif item is _CANCELLED:
                        finish = FINISH_CANCELLED
                    elif isinstance(item, BaseException):
                        model_error = item
                        finish, error = FINISH_ERROR, self.failure_message(item)
                        log.debug("the run failed: %s", error, exc_info=item)
                    else:
                        try:
                            record = to_record(item)
                        except Exception as exc:  # a capture that broke the record rules: end the run with it
                            # `halt` (below) stops the worker as a Stop does: on a sharded model at a vote
                            finish, error = FINISH_ERROR, self.failure_message(exc)
                            break
                        if isinstance(record, BlockRecord):
                            blocks[item.row].append(record.tokens)
                        batch.append((item.row, record))
                    if finish is not None:
                        break
                if batch:
                    yield batch
        finally:
            halt.set()
            if not abandoned:
                job.exception()  # waits until the worker has left the run
        finish = None if finish == "done" else finish
        yield [(row, run_end(self, blocks[row], finish=finish, error=error, started=started)) for row in range(rows)]
        return model_error


def model_error(run: Iterator) -> BaseException | None:
    """What a run's generator (`Backend.generate_rows`, `generate_batches`) returned, read right after
    its last list (the RunEnds): the exception raised inside the model's run when one ended it, else None."""
    try:
        extra = next(run)
    except StopIteration as finished:
        return finished.value
    raise RuntimeError(f"the run went on after its RunEnd: {extra!r}")


def _drain(records: queue.Queue, first):
    """`first`, then every item already waiting in the queue."""
    yield first
    while True:
        try:
            yield records.get_nowait()
        except queue.Empty:
            return


def run_end(backend: Backend, blocks: list[np.ndarray], *, finish: str | None, error: str | None, started: float) -> RunEnd:
    """The RunEnd of a run whose committed blocks are `blocks`; `finish` None means it ran to its end
    (EOS when a block holds one, else length)."""
    sequence = np.concatenate(blocks) if blocks else np.zeros(0, np.int32)
    if finish is None:
        finish = FINISH_EOS if np.isin(sequence, backend.info.eos_token_ids).any() else FINISH_LENGTH
    return RunEnd(
        finish_reason=finish,
        sequence=frozen_array(sequence, np.int32),
        text=backend.decode(sequence),
        wall_time_s=time.perf_counter() - started,
        error=error,
    )


def start_thread(fn: Callable[[], None], name: str) -> Future:
    """Run `fn` on a new thread; the Future says when it is done.

    Not a daemon thread, unlike a `ModelThread` (whose backend's finalizer stops it at exit): nothing
    else would end this one, so the interpreter joins it before it shuts down and no run is cut off
    mid-step.
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


def step_record(item: CapturedStep, pieces) -> StepRecord:
    """A StepRecord from a captured step, with the pieces of ids not sent before."""
    topk_ids, topk_probs, sample_probability = item.topk_ids, item.topk_probs, item.sample_probability
    shown = [item.argmax, item.canvas[item.accepted]] + ([topk_ids.reshape(-1)] if topk_ids is not None else [])
    canvas = item.canvas.shape[-1]
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
        kl_nats=None if item.kl_nats is None else frozen_array(item.kl_nats, np.float32),
        layer_rms=None if item.layer_rms is None else frozen_matrix(item.layer_rms, np.float32, canvas),
        kl_to_final_nats=None if item.kl_to_final_nats is None else frozen_array(item.kl_to_final_nats, np.float32),
    )


def block_record(item: CapturedBlock, pieces, eos_token_ids) -> BlockRecord:
    """A BlockRecord from a captured block, with the pieces of ids not sent before."""
    eos = np.flatnonzero(np.isin(item.tokens, eos_token_ids))
    shown = [item.tokens] + ([item.lens_top_ids.reshape(-1)] if item.lens_top_ids is not None else [])
    lens = {} if item.lens_ranks is None else {
        name: frozen_cube(getattr(item, name), dtype, item.lens_ranks.shape[1:])
        for name, dtype in LENS_DTYPES.items()
    }
    return BlockRecord(
        block=item.block,
        tokens=frozen_array(item.tokens, np.int32),
        eos_position=int(eos[0]) if eos.size else None,
        stop_reason=STOP_CONVERGED if item.converged else STOP_OUT_OF_STEPS,
        steps_used=item.steps_used,
        new_pieces=pieces.new(np.concatenate(shown)),
        **lens,
    )
