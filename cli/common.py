"""What every command shares: the one-line user error, loading a trace, the model and knob flags.

A `CliError` is a user's mistake: `cli.main` prints it as one `error: ...` line with exit status 2,
never a traceback.
"""

from __future__ import annotations

import sys

from backends.registry import BACKENDS, backend_names, installed_samplers
from visualizer.settings import KNOBS, GenerationSettings, Knob
from visualizer.step_names import STEP_HELP, StepAt, StepNameError, locate_step, parse_step
from visualizer.trace import Trace, TraceError


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def refuse_problems(problems: list[str]) -> None:
    """Raise one CliError naming every problem found in the user's settings, if there are any."""
    if problems:
        raise CliError("; ".join(problems))


def add_step_argument(p, *, bare: str, default: str | None = None) -> None:
    """--step BLOCK:STEP, said the same way on every command (`visualizer.step_names`); `bare` says which block
    a STEP alone is of, `default` what the command shows without it (None: --step is required)."""
    shown = f"; default: {default}" if default else ""
    p.add_argument("--step", required=default is None, metavar="BLOCK:STEP", help=f"{STEP_HELP}; STEP alone: {bare}{shown}")


def locate_step_arg(trace: Trace, text: str, *, block: int = 1) -> StepAt:
    """The step --step names in `trace` (a bare STEP of `block`, from 1); CliError in one line naming the run's range."""
    try:
        return locate_step(trace, parse_step(text), block=block)
    except StepNameError as exc:
        raise CliError(f"--step {str(text)[:40]}: {exc}") from None


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


def add_knob_arguments(p, knobs: dict[str, Knob] = KNOBS, *, skip: tuple[str, ...] = ()) -> None:
    """A flag for every knob of the knob table (`visualizer.settings.KNOBS`) but those in `skip`: a switch
    (--no-X where it is on by default), a number or name, or a structured knob's text (repeatable where its
    form says so), which `settings_from_args` parses."""
    for knob in knobs.values():
        if knob.name not in skip:
            add_knob_argument(p, knob)


def add_knob_argument(p, knob: Knob) -> None:
    """The CLI flag of one knob, from its declaration alone."""
    if knob.name == "sampler":
        p.add_argument(knob.cli_flag, dest=knob.name, help=sampler_help())
    elif knob.kind is bool:
        action, help = ("store_false", f"turns off what is on by default: {knob.help}") if knob.field_default \
            else ("store_true", knob.help)
        p.add_argument(knob.cli_flag, dest=knob.name, action=action, default=knob.field_default, help=help)
    elif knob.form is not None:  # its text, parsed with the rest (one line for a bad one, not argparse's usage)
        action = "append" if knob.form.repeat else "store"
        repeat = "; repeatable" if knob.form.repeat else ""
        p.add_argument(knob.cli_flag, dest=knob.name, action=action, metavar=knob.form.metavar,
                       help=f"{knob.help} (default: none{repeat})")
    else:  # None: the model's generation config decides
        default = "default: the model's own, else {}" if knob.field_default is None else "default {}"
        p.add_argument(knob.cli_flag, dest=knob.name, type=knob.kind, default=knob.field_default,
                       help=f"{knob.help} ({default.format(knob.default)})")


def load_model(args, settings: GenerationSettings, **options):
    """The model of `--model` on `--backend`, or without it on the backend that runs the chosen sampler,
    saying so on stderr when that is not the model's own; CliError in one line when it cannot load."""
    from backends import BackendError, backend_for_source, default_model, load_backend, model_choices
    from backends.lookup import source_problem

    source = args.model or default_model()
    # the app's check before loading (backends/lookup.py): an unknown id or an unreachable hub is answered in
    # about a second, where from_pretrained would retry the hub for minutes. A built-in model is built here.
    if not any(choice.builtin and choice.source == source for choice in model_choices()):
        problem = source_problem(source)
        if problem is not None:
            raise CliError(problem)
    try:
        backend = load_backend(source, backend=args.backend, sampler=settings.sampler, device=args.device, **options)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    if args.backend is None and backend.name != backend_for_source(source):
        print(f"the {settings.sampler} sampler runs on the {backend.name} backend", file=sys.stderr)
    reads, stock = backend.capabilities.knobs_for(settings.sampler), GenerationSettings()
    unread = [knob.cli_flag for knob in KNOBS.values()  # a structured one is refused by the run instead
              if knob.form is None and knob.name not in reads and getattr(settings, knob.name) != getattr(stock, knob.name)]
    if unread:
        sampler = backend.capabilities.sampler(settings.sampler).name
        print(f"note: the {sampler} sampler on the {backend.name} backend does not read {', '.join(unread)} "
              "(the trace records none)", file=sys.stderr)
    return backend


def sampler_help() -> str:
    """--sampler's help: the samplers the backends installed here run, as the app offers them for the model
    (a checkpoint's, an MLX model's), each with the backends that run it."""
    def listed(samplers: dict[str, list[str]]) -> str:
        return ", ".join(f"{name} ({', '.join(kinds)})" for name, kinds in samplers.items())

    own = [f"for a model only {e.name} loads: {listed(installed_samplers([e]))}"
           for e in BACKENDS.values() if not e.loads_unclaimed and e.available()]
    return "; ".join([f"how a step decides what it accepts; for a checkpoint such as the built-in model: "
                      f"{listed(installed_samplers())}", *own]) + \
        f". The sampler picks the backend (default: the model's own, else {KNOBS['sampler'].default})"


def settings_from_args(args, cls=GenerationSettings, knobs: dict[str, Knob] = KNOBS):
    """The settings of the knob flags parsed (`add_knob_arguments`); a knob without a flag keeps its default,
    a structured knob's text is read by its form (CliError in one line when it is not one)."""
    values = {}
    for name, knob in knobs.items():
        value = getattr(args, name, None)
        if knob.form is None:
            if hasattr(args, name):
                values[name] = value
        elif value is not None:
            try:
                values[name] = knob.form.parse("\n".join(value) if knob.form.repeat else value)
            except ValueError as exc:
                raise CliError(f"{knob.cli_flag}: {exc}") from None
    return cls(**values)
