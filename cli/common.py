"""What every command shares: the one-line user error, loading a trace, the model and knob flags.

A `CliError` is a user's mistake: `cli.main` prints it as one `error: ...` line with exit status 2,
never a traceback.
"""

from __future__ import annotations

import sys

from backends.registry import backend_names
from visualizer.settings import KNOBS, GenerationSettings
from visualizer.trace import Trace, TraceError


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def refuse_problems(problems: list[str]) -> None:
    """Raise one CliError naming every problem found in the user's settings, if there are any."""
    if problems:
        raise CliError("; ".join(problems))


def parse_positive_step(step: int | None) -> int | None:
    """A step given counted from 1 (as printed) as the 0-based index, None kept."""
    if step is None:
        return None
    if step < 1:
        raise CliError("--step counts from 1, as the app's captions do")
    return step - 1


def load_trace(path: str) -> Trace:
    try:
        return Trace.load(path)
    except TraceError as exc:
        raise CliError(f"{path}: {exc}") from None


def add_generation_arguments(p) -> None:
    """The model and the knobs: shared by every command that runs the model on a prompt."""
    p.add_argument("--model", help="hub id or local folder (default: the built-in model)")
    p.add_argument("--backend", choices=backend_names(), help="default: the first installed backend that runs the "
                   "model with the chosen sampler")
    p.add_argument("--device", help="where the backend places the model: cuda, cuda:1, cpu (default: cuda when available)")
    add_knob_arguments(p)


def add_knob_arguments(p, *, skip: tuple[str, ...] = ()) -> None:
    """A flag for every knob of the knob table (`visualizer.settings.KNOBS`) but those in `skip`."""
    defaults = GenerationSettings()
    for knob in KNOBS.values():
        if knob.name in skip or not knob.generated_flag:  # pins, layers, --no-shift: the command's own flags
            continue
        notes = [f"{', '.join(knob.samplers)} only"] if knob.samplers else []
        if knob.kind is bool:
            p.add_argument(knob.cli_flag, dest=knob.name, action="store_true", help=_with_notes(knob.help, notes))
            continue
        default = getattr(defaults, knob.name)  # None: the model's generation config decides
        notes.append(f"default {knob.default}" if default is not None else f"default: the model's own, else {knob.default}")
        p.add_argument(knob.cli_flag, dest=knob.name, type=knob.kind, default=default, help=_with_notes(knob.help, notes))


def _with_notes(text: str, notes: list[str]) -> str:
    return f"{text} ({'; '.join(notes)})" if notes else text


def load_model(args, settings: GenerationSettings, **options):
    """The model of `--model` on `--backend`, or without it on the backend that runs the chosen sampler,
    saying so on stderr when that is not the model's own; CliError in one line when it cannot load."""
    from backends import BackendError, backend_for_source, default_model, load_backend

    source = args.model or default_model()
    try:
        backend = load_backend(source, backend=args.backend, sampler=settings.sampler, device=args.device, **options)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    if args.backend is None and backend.name != backend_for_source(source):
        print(f"the {settings.sampler} sampler runs on the {backend.name} backend", file=sys.stderr)
    return backend


def settings_from_args(args) -> GenerationSettings:
    """The settings of the knob flags parsed (`add_knob_arguments`); a knob without a flag keeps its default."""
    return GenerationSettings(**{name: getattr(args, name) for name in KNOBS if hasattr(args, name)})
