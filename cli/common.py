"""What every command shares: the one-line user error, loading a trace, the model and knob flags.

A `CliError` is a user's mistake: `cli.main` prints it as one `error: ...` line with exit status 2,
never a traceback.
"""

from __future__ import annotations

from backends.registry import backend_names
from visualizer.settings import DEFAULT_RECORD_TOPK, GenerationSettings
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
    p.add_argument("--backend", choices=backend_names(), help="default: chosen from the model")
    p.add_argument("--device", help="where the backend places the model: cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--steps", type=int, dest="max_denoising_steps", help="max denoising steps per block")
    p.add_argument("--entropy-bound", type=float)
    p.add_argument("--t-min", type=float)
    p.add_argument("--t-max", type=float)
    p.add_argument("--sampler", help="one of the samplers the model's backend runs (default: its first; "
                   "another is refused with the list)")
    p.add_argument("--temperature", type=float, help="sampling temperature, where the backend has that knob")
    p.add_argument("--compiled", action="store_true", help="static cache + torch.compile, where the backend has that knob")
    p.add_argument("--corrector-steps", type=int, help="discrete-ddim: Gibbs corrector sweeps per early step, out of the step budget (default 0)")
    p.add_argument("--corrector-k", type=int, help="discrete-ddim: positions resampled per corrector sweep (default 1)")
    p.add_argument("--refine-threshold", type=float, help="block-refinement: a sample this probable commits at once (default 0.95)")
    p.add_argument("--editing-threshold", type=float, help="block-refinement: replace a committed token by a different sample this probable (default: never)")
    p.add_argument("--topk", type=int, default=DEFAULT_RECORD_TOPK, dest="record_topk",
                   help=f"record the K most probable candidates of every position at every step (default {DEFAULT_RECORD_TOPK}; 0: off)")
    p.add_argument("--thinking", action="store_true",
                   help="turn on the chat template's thinking channel (enable_thinking), where the model has one")


def settings_from_args(args) -> GenerationSettings:
    return GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        max_denoising_steps=args.max_denoising_steps,
        entropy_bound=args.entropy_bound,
        t_min=args.t_min,
        t_max=args.t_max,
        seed=args.seed,
        sampler=args.sampler,
        temperature=args.temperature,
        compiled=args.compiled,
        record_topk=args.record_topk,
        thinking=args.thinking,
        corrector_steps=args.corrector_steps,
        corrector_k=args.corrector_k,
        refine_threshold=args.refine_threshold,
        editing_threshold=args.editing_threshold,
    )
