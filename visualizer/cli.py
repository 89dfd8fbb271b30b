"""Command line: record runs and render frames without the UI.

    python -m visualizer record --prompt "Why is the sky blue?" --seed 0 --out run.json
    python -m visualizer record --demo acrostic --model FOLDER_OR_HUB_ID --out run.json
    python -m visualizer frame run.json --step 5 --out frame.png
    python -m visualizer export run.json --gif run.gif --mp4 run.mp4 --webp run.webp
    python -m visualizer demos --out assets/demos
    python -m visualizer compare seed0.json seed1.json --gif both.gif --png end.png

Every flag of `record` maps to a field of `GenerationSettings`; a knob left out takes the
checkpoint's default.  Bad input ends with a one-line `error: ...` and exit status 2, never a
traceback; a run that fails or is interrupted (Ctrl-C) still writes what it recorded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .export_cli import add_compare_command, add_demos_command, add_export_command
from .metrics import add_metrics_command
from .probe import add_probe_command
from .settings import SAMPLERS, GenerationSettings
from .trace import Trace, TraceError


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def refuse_problems(problems: list[str]) -> None:
    """Raise one CliError naming every problem found in the user's settings, if there are any."""
    if problems:
        raise CliError("; ".join(problems))


# ---- record ----------------------------------------------------------------------------------
def add_record_command(subparsers) -> None:
    p = subparsers.add_parser("record", help="run the model on a prompt and write its trace (JSON)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="the user message")
    source.add_argument("--demo", help="one of the demo prompts: acrostic, sky, palindrome, planets, story, haiku")
    p.add_argument("--out", required=True, help="trace file to write (.json)")
    add_generation_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no per-step progress on stderr")
    p.set_defaults(run=run_record)


def add_generation_arguments(p) -> None:
    """The model and the knobs: shared by every command that runs the model on a prompt."""
    p.add_argument("--model", help="hub id or local folder (default: the built-in model)")
    p.add_argument("--backend", choices=("transformers", "mlx"), help="default: chosen from the model")
    p.add_argument("--device", help="transformers only: cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--steps", type=int, dest="max_denoising_steps", help="max denoising steps per block")
    p.add_argument("--entropy-bound", type=float)
    p.add_argument("--t-min", type=float)
    p.add_argument("--t-max", type=float)
    p.add_argument("--sampler", choices=SAMPLERS, help="MLX only")
    p.add_argument("--temperature", type=float, help="MLX only")
    p.add_argument("--compiled", action="store_true", help="transformers: static cache + torch.compile")


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
    )


def run_record(args) -> int:
    from backends import BackendError, default_model, load_backend
    from prompts.demos import demo_prompt

    try:
        prompt = demo_prompt(args.demo) if args.demo else args.prompt
    except KeyError as exc:
        raise CliError(exc.args[0]) from None
    if not prompt or not prompt.strip():
        raise CliError("the prompt is empty: give --prompt TEXT or --demo NAME")
    settings = settings_from_args(args)
    refuse_problems(settings.problems())
    out = Path(args.out)
    if not out.parent.exists():
        raise CliError(f"folder {out.parent} does not exist")
    try:
        backend = load_backend(args.model or default_model(), backend=args.backend, device=args.device)
        trace = record_trace(backend, prompt, settings, progress=None if args.quiet else sys.stderr)
    except BackendError as exc:
        raise CliError(str(exc)) from None
    trace.save(out)
    end = trace.end
    print(
        f"wrote {out}: {len(trace.steps)} steps, {len(trace.blocks)} block(s), finished: {end.finish_reason}"
        + (f" ({end.error})" if end.error else ""),
        file=sys.stderr,
    )
    return 1 if end.finish_reason == "error" else 0


def record_trace(backend, prompt: str, settings: GenerationSettings, *, progress=None) -> Trace:
    """Run one generation into a Trace; Ctrl-C stops it between steps and keeps what was recorded."""
    import threading

    from .records import BlockRecord, StepRecord

    stop = threading.Event()
    trace = Trace(model=backend.info, prompt=prompt)
    records = backend.generate(prompt, settings, stop)
    while True:
        try:
            record = next(records)
        except StopIteration:
            break
        except KeyboardInterrupt:
            stop.set()  # the backend ends the run at the next step and yields RunEnd("cancelled")
            continue
        trace.append(record)
        if progress is not None and isinstance(record, StepRecord):
            accepted = int(record.accepted.sum())
            print(f"\rblock {record.block + 1} step {record.step + 1}: {accepted} accepted   ", end="", file=progress)
        elif progress is not None and isinstance(record, BlockRecord):
            print(f"\rblock {record.block + 1} committed after {record.steps_used} steps ({record.stop_reason})", file=progress)
    return trace


# ---- frame -----------------------------------------------------------------------------------
def add_frame_command(subparsers) -> None:
    p = subparsers.add_parser("frame", help="render one step of a trace to a PNG")
    p.add_argument("trace", help="trace file (.json)")
    p.add_argument("--out", required=True, help="image to write (.png)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--step", type=int, help="denoising step, counted over all blocks from 0; negative from the end")
    which.add_argument("--frame", type=int, help="frame index as in the app's slider (steps and block commits)")
    p.add_argument("--layout", choices=("grid", "text"), default="grid")
    p.add_argument("--palette", choices=("standard", "colorblind"), default="standard")
    p.add_argument("--font-size", type=int, default=13)
    p.set_defaults(run=run_frame)


def run_frame(args) -> int:
    from .layout import grid_layout, text_layout
    from .palette import get_palette
    from .render_image import render_frame_image
    from .states import frame_refs, frame_state

    trace = load_trace(args.trace)
    refs = frame_refs(trace)
    if not refs:
        raise CliError(f"{args.trace} holds no steps to render")
    if args.step is not None:
        steps = [i for i, r in enumerate(refs) if r.kind == "step"]
        if not -len(steps) <= args.step < len(steps):
            raise CliError(f"--step must be from 0 to {len(steps) - 1} (or negative from the end)")
        index = steps[args.step]
    elif args.frame is not None:
        if not -len(refs) <= args.frame < len(refs):
            raise CliError(f"--frame must be from 0 to {len(refs) - 1}")
        index = args.frame
    else:
        index = len(refs) - 1
    layout = text_layout(trace) if args.layout == "text" else grid_layout(trace.max_blocks, trace.canvas_length)
    if not 6 <= args.font_size <= 72:
        raise CliError("--font-size must be from 6 to 72")
    image = render_frame_image(trace, frame_state(trace, index, refs), layout, get_palette(args.palette), font_size=args.font_size)
    try:
        image.save(args.out)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot write {args.out}: {exc}") from None
    print(f"wrote {args.out} ({image.width}x{image.height}, frame {index % len(refs)} of {len(refs)})", file=sys.stderr)
    return 0


def load_trace(path: str) -> Trace:
    try:
        return Trace.load(path)
    except TraceError as exc:
        raise CliError(f"{path}: {exc}") from None


# ---- entry point -------------------------------------------------------------------------------
COMMANDS = (
    add_record_command, add_frame_command, add_metrics_command, add_probe_command,
    add_export_command, add_demos_command, add_compare_command,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m visualizer", description="Watch DiffusionGemma denoise.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
