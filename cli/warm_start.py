"""`record --start-from RUN.json:BLOCK:STEP` and `--start-from-text POS=TEXT`: the warm start (docs/lab.md).

    python -m visualizer record --demo acrostic --seed 1 --start-from run.json:1:8 --out warm.json
    python -m visualizer record --demo acrostic --start-from-text 0="Ocean" --out warm.json

The new run's first canvas holds the tokens RUN accepted at that step (its noise positions stay the new run's own
noise), or TEXT's tokens from POS, not held: the stock sampler decides from the first step on, with the new run's
own prompt, seed and knobs. What a start refuses (a step outside RUN, a RUN of another canvas or vocabulary, a
backend that cannot) is refused in one line, the trace-only ones before a model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from visualizer.step_names import STEP_HELP, StepNameError, locate_step, parse_step
from visualizer.warm_start import WarmStart, accepted_tokens, parse_start_from, parse_start_text

from .common import CliError


@dataclass(frozen=True)
class StartRequest:
    """A warm start as the command line asked for it, read and checked against RUN (before a model loads)."""

    source: str | None  # RUN's content hash
    at: tuple[int, int] | None  # RUN's step, from 1
    canvas_length: int | None  # RUN's
    vocab_size: int | None
    from_run: tuple[tuple[int, int], ...]  # (position, id) RUN accepted at that step
    texts: tuple[tuple[int, str], ...]  # (position, text) of --start-from-text, in the order given


def add_warm_start_arguments(p) -> None:
    p.add_argument("--start-from", metavar="RUN.json:BLOCK:STEP",
                   help=f"start from the canvas RUN recorded at that step ({STEP_HELP}): its accepted "
                        "tokens on the first canvas, not held (docs/lab.md)")
    p.add_argument("--start-from-text", action="append", default=[], metavar="POS=TEXT",
                   help="place TEXT's tokens from position POS on the first canvas, not held (--pin holds them); "
                        "repeatable, after --start-from's")


def read_start(args, backend_kind: str | None, parallel: str | None) -> StartRequest | None:
    """The asked-for start (None: none), everything RUN alone can refuse refused (CliError in one line)."""
    if not args.start_from and not args.start_from_text:
        return None
    if backend_kind is not None:
        refuse_backend(backend_kind)
    if parallel:  # a sharded model's other ranks run the stock generation: they would not place the start
        raise CliError(f"a warm start runs on one model in one process, not with --parallel {parallel}")
    try:
        texts = tuple(parse_start_text(arg) for arg in args.start_from_text)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not args.start_from:
        return StartRequest(None, None, None, None, (), texts)
    from visualizer.interventions import content_hash
    from visualizer.trace import Trace, TraceError

    try:
        path, step = parse_start_from(args.start_from)
        name = parse_step(step)
    except ValueError as exc:
        raise CliError(f"--start-from {exc}" if isinstance(exc, StepNameError) else str(exc)) from None
    try:
        data = Path(path).read_bytes()
        run = Trace.from_json(data)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except TraceError as exc:
        raise CliError(f"{path}: {exc}") from None
    try:
        at = locate_step(run, name)
    except StepNameError as exc:
        raise CliError(f"--start-from {exc}") from None
    return StartRequest(content_hash(data), (at.block + 1, at.step + 1), run.canvas_length, run.model.vocab_size,
                        accepted_tokens(run.steps[at.index]), texts)


def refuse_backend(kind: str) -> None:
    """CliError naming the backends that warm-start when `kind` does not."""
    from backends import BACKENDS
    from backends.interventions import no_fork_reason, warm_starts

    def starts(name: str) -> bool:
        try:
            return warm_starts(BACKENDS[name].capabilities)
        except ImportError:  # its libraries are missing here
            return False

    if kind in BACKENDS and not starts(kind):
        can = [name for name in BACKENDS if starts(name)]
        raise CliError(f"the {kind} backend cannot warm-start a run ({no_fork_reason(kind)}); warm starts run on: "
                       f"{', '.join(can)}")


def record_warm(backend, prompt: str, settings, request: StartRequest, *, stop, on_record):
    """The run warm-started as `request` asks, its trace saying so (`warm_start`); BackendError in one line."""
    from backends.interventions import start_placement, warm_start_trace

    refuse_backend(backend.name)
    info = backend.info
    if request.canvas_length is not None and request.canvas_length != info.canvas_length:
        raise CliError(f"--start-from: that run's canvas is {request.canvas_length} positions and this model's "
                       f"{info.canvas_length}: start from a run of a model with the same canvas")
    if request.vocab_size is not None and request.vocab_size != info.vocab_size:
        raise CliError(f"--start-from: that run's vocabulary is {request.vocab_size} ids and this model's "
                       f"{info.vocab_size}: start from a run of a model with the same tokenizer")
    placed = start_placement(backend, request.from_run, request.texts, "--start-from-text")
    trace, placed = warm_start_trace(backend, prompt, settings, placed, stop=stop, on_record=on_record)
    trace.warm_start = WarmStart(request.source, *(request.at or (None, None)),
                                 tuple(f"{p}={t}" for p, t in request.texts), placed)
    return trace
