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

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from visualizer.records import FINISH_EOS, FINISH_LENGTH, ModelInfo, Record, RunEnd, RunStart, frozen_array
from visualizer.samplers import SamplerSpec
from visualizer.settings import KNOBS, STRUCTURED, GenerationSettings

from .bridge import stream
from .captured import CapturedBlock, CapturedStep, block_record, step_record
from .known import first_line
from .text import PieceDecoder, PieceTable

_QUEUE_SIZE = 64  # captured items buffered per batch row between the model's thread and a slow consumer


class BackendError(RuntimeError):
    """A problem the user can act on; the message is shown as is."""


class BackendUnavailable(BackendError):
    """The backend's libraries are not installed on this machine."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared once: the app, the CLI, hosted mode and the traces read this,
    never the backend's name."""

    knobs: frozenset[str]  # the GenerationSettings fields its every run reads, whatever the sampler; with each
    #                        sampler's own (`SamplerSpec.knobs`), what it reads; the others are recorded as None
    samplers: tuple[SamplerSpec, ...]  # the samplers it runs, its default first
    max_batch: int | None = 1  # most prompts one generate call takes (`generate_rows`); None: no limit but memory
    # The intervention kinds a fork of its runs applies (`visualizer.interventions.KINDS`); empty: it cannot fork.
    interventions: frozenset[str] = frozenset()

    def knobs_for(self, sampler: str | None) -> frozenset[str]:
        """The knobs a run with this sampler (None: the default) reads: the backend's and the sampler's own."""
        return self.knobs | self.sampler(sampler).knobs

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
        stop = stop or threading.Event()
        started = time.perf_counter()
        decoder = self._piece_decoder()
        tables = [PieceTable(decoder=decoder) for _ in prompts]
        yield [
            (row, self.run_start(ids, settings, tables[row], batch=None if len(prompts) == 1 else {"size": len(prompts), "row": row}))
            for row, ids in enumerate(rows_ids)
        ]

        def produce(emit, should_stop):
            self._produce_batch(rows_ids, settings, emit, should_stop)

        blocks: list[list[np.ndarray]] = [[] for _ in prompts]  # each row's committed tokens, for its RunEnd

        def to_record(item: CapturedStep | CapturedBlock) -> tuple[int, Record]:
            # On the consuming thread, not the model's: the copies, the pieces and the decoding of
            # B rows a step stay off the worker that keeps the GPU busy.
            pieces = tables[item.row]
            if isinstance(item, CapturedStep):
                return item.row, step_record(item, pieces)
            record = block_record(item, pieces, self.info.eos_token_ids)
            blocks[item.row].append(record.tokens)
            return item.row, record

        outcome = yield from stream(
            produce, stop, launch=self._launch, convert=to_record, failure_message=self.failure_message,
            buffered=_QUEUE_SIZE * len(prompts),  # as many steps buffered at any batch size
        )
        yield [
            (row, run_end(self, blocks[row], finish=outcome.finish, error=outcome.error, started=started))
            for row in range(len(prompts))
        ]
        return outcome.model_error

    def run_start(self, ids: list[int], settings: GenerationSettings, table: PieceTable, *, batch: dict | None) -> RunStart:
        """The RunStart of one run of `ids` with resolved `settings`; `table` is the run's piece table."""
        pins = self.pinned_ids(settings)
        return RunStart(
            prompt_ids=frozen_array(ids, np.int32),
            settings=settings.to_dict(),
            max_blocks=math.ceil(settings.max_new_tokens / self.info.canvas_length),
            sampler_rule=self.capabilities.sampler(settings.sampler).rule.to_dict(),
            batch=batch,
            pins=pins,
            new_pieces=table.new(ids + [token for _, token in pins]),
        )

    def record_refilled(self, prompts: list[str], seeds: list[int], settings: GenerationSettings, *, rows: int,
                        stop: threading.Event | None = None, exact: bool = True) -> tuple[list, int]:
        """One Trace per prompt, each with its seed, through a refilling loop on `rows` rows, and the row-passes it
        ran (the transformers backend: `backends/refill.py`, `exact` as its `refill_generate`); the others have none."""
        raise BackendError(f"the {self.name} backend has no refilling loop: use --batch-order suite or length")

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
        for name in STRUCTURED:  # made concrete for this model, as the trace records it ("all" layers: each layer)
            form = KNOBS[name].form
            if form.for_model is not None and filled[name] is not None:
                filled[name] = form.for_model(filled[name], self.info)
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
        reads = self.capabilities.knobs_for(settings.sampler)
        for name, knob in KNOBS.items():  # a hand on the run or a recording is refused where it would do nothing, never dropped
            value = getattr(settings, name)
            if value and knob.refusal_verb and name not in reads:
                raise BackendError(f"the {self.name} backend cannot {knob.refusal_verb} ({knob.cli_flag}) with the "
                                   f"{self.capabilities.sampler(settings.sampler).name} sampler: its capture has no such hook")
            if value and knob.form is not None and knob.form.model_problem is not None and (problem := knob.form.model_problem(value, self.info)):
                raise BackendError(problem)
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

def model_error(run: Iterator) -> BaseException | None:
    """What a run's generator (`Backend.generate_rows`, `generate_batches`) returned, read right after
    its last list (the RunEnds): the exception raised inside the model's run when one ended it, else None."""
    try:
        extra = next(run)
    except StopIteration as finished:
        return finished.value
    raise RuntimeError(f"the run went on after its RunEnd: {extra!r}")


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
