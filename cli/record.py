"""`record` runs a model on a prompt into a trace file; `frame` renders one step of a trace as a PNG.

    python -m visualizer record --prompt "Why is the sky blue?" --seed 0 --out run.json
    python -m visualizer record --demo acrostic --model FOLDER_OR_HUB_ID --out run.json
    python -m visualizer frame run.json --step 1:5 --out frame.png
    python -m visualizer record --demo acrostic --layers 0,5 --pin 14="ocean" --out pinned.json

`--layers` records chosen decoder layers per step (RMS and logit lens), `--pin POS=TEXT` places TEXT's
tokens on the first canvas from position POS and holds them there (docs/layers-and-pins.md).
`--start-from RUN.json:BLOCK:STEP` starts from the tokens RUN accepted at that step, `--start-from-text POS=TEXT`
from text, on the first canvas, not held (the warm start: cli/warm_start.py, docs/lab.md).

`record` prints the committed text on stdout (as the app's Committed text box shows it) and its reports
on stderr: a tqdm bar per block on a terminal, one line per committed block when piped.

Every flag of `record` maps to a field of `GenerationSettings`; a knob left out takes the
checkpoint's default.  A run that fails or is interrupted (Ctrl-C, or under torchrun the SIGTERM
torchrun sends when another rank dies) still writes what it recorded.
Over several GPUs of one host (docs/sharded.md) every rank runs the model and rank 0 records and writes:

    torchrun --nproc-per-node 4 -m visualizer record --parallel expert --model M --demo acrostic --out run.json
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from backends.sharded import PARALLEL_KINDS
from visualizer.thinking import committed_text

from .common import CliError, add_generation_arguments, add_step_argument, load_model, load_trace, locate_step_arg
from .common import refuse_problems, settings_from_args
from .progress import RunProgress
from .warm_start import add_warm_start_arguments, read_start, record_warm


# ---- record ----------------------------------------------------------------------------------
# torchrun's SIGTERM to rank 0: another rank stopped. With NCCL the run in flight may never reach its
# next step (the dead rank's collective never completes), so the stop abandons it (`Stop.abandon`).
TORCHRUN_ENDED = "torchrun ended the job (SIGTERM: another rank stopped, its report below names it)"
# Under torchrun without --parallel, record shards the model this way: one model over the processes, rank 0
# writes. (N whole copies would each write the same file.)
TORCHRUN_DEFAULT_PARALLEL = "expert"


def add_record_command(subparsers) -> None:
    p = subparsers.add_parser("record", help="run the model on a prompt and write its trace (JSON)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="the user message")
    source.add_argument("--demo", help="one of the demo prompts: acrostic, sky, palindrome, planets, story, haiku")
    p.add_argument("--out", required=True, help="trace file to write (.json)")
    add_generation_arguments(p)
    add_warm_start_arguments(p)
    p.add_argument("--parallel", choices=PARALLEL_KINDS,
                   help="transformers: spread the model over several GPUs; expert/tensor/tensor+expert under "
                        f"torchrun --nproc-per-node N (default there: {TORCHRUN_DEFAULT_PARALLEL}), layers "
                        "(device_map auto) in one process (docs/sharded.md)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (a bar on a terminal, a line per block "
                   "when piped)")
    p.set_defaults(run=run_record)


def run_record(args) -> int:
    from backends import BackendError, Stop, record_trace
    from backends.sharded import is_follower, under_torchrun
    from prompts.demos import demo_prompt

    try:
        prompt = demo_prompt(args.demo) if args.demo else args.prompt
    except KeyError as exc:
        raise CliError(exc.args[0]) from None
    if not prompt or not prompt.strip():
        raise CliError("the prompt is empty: give --prompt TEXT or --demo NAME")
    settings = settings_from_args(args)
    refuse_problems(settings.problems())
    for note in settings.notes():
        print(f"note: {note}", file=sys.stderr)
    out = Path(args.out)
    if not out.parent.exists():
        raise CliError(f"folder {out.parent} does not exist")
    parallel = args.parallel
    if parallel is None and under_torchrun():  # one model over the processes, never N copies writing one file
        parallel = TORCHRUN_DEFAULT_PARALLEL
        if not is_follower():
            print(f"record under torchrun: --parallel {parallel} (the default there; rank 0 writes {out})", file=sys.stderr)
    start = read_start(args, args.backend, parallel)  # what RUN alone can refuse, before a model loads
    backend = load_model(args, settings, parallel=parallel)
    try:
        if parallel and is_follower():  # the same generation in lockstep, nothing recorded or written
            backend.follow(prompt, settings)
            return 0
        stop = Stop()
        if under_torchrun():  # torchrun's SIGTERM (a rank died) stops the run, which then writes what it recorded
            signal.signal(signal.SIGTERM, lambda signum, frame: stop.abandon(TORCHRUN_ENDED))
        progress = None if args.quiet else RunProgress(sys.stderr)
        try:
            if start is None:
                trace = record_trace(backend, prompt, settings, stop=stop, on_record=progress)
            else:
                trace = record_warm(backend, prompt, settings, start, stop=stop, on_record=progress)
        finally:
            if progress is not None:
                progress.close()
    except BackendError as exc:
        raise CliError(str(exc)) from None
    trace.save(out)
    end = trace.end
    print(
        f"wrote {out}: {len(trace.steps)} steps, {len(trace.blocks)} block(s), finished: {end.finish_reason}"
        + (f" ({end.error})" if end.error else ""),
        file=sys.stderr,
    )
    if stop.is_set():
        print(f"{TORCHRUN_ENDED}; the steps recorded before are kept in the trace.", file=sys.stderr)
    text = committed_text(trace)
    if text:  # the answer on stdout, the reports on stderr: `record ... > answer.txt` keeps only the answer
        print(text)
    return 1 if end.finish_reason == "error" else 0


# ---- frame -----------------------------------------------------------------------------------
def add_frame_command(subparsers) -> None:
    p = subparsers.add_parser("frame", help="render one step of a trace to a PNG")
    p.add_argument("trace", help="trace file (.json)")
    p.add_argument("--out", required=True, help="image to write (.png)")
    which = p.add_mutually_exclusive_group()
    add_step_argument(which, bare="of block 1", default="the last frame")
    which.add_argument("--frame", type=int, help="frame index as in the app's slider (steps and block commits)")
    p.add_argument("--layout", choices=("grid", "text"), default="grid")
    p.add_argument("--palette", choices=("standard", "colorblind"), default="standard")
    p.add_argument("--font-size", type=int, default=13)
    p.set_defaults(run=run_frame)


def run_frame(args) -> int:
    from visualizer.layout import grid_layout, text_layout
    from visualizer.palette import get_palette
    from visualizer.render_image import render_frame_image
    from visualizer.states import frame_refs, frame_state

    trace = load_trace(args.trace)
    refs = frame_refs(trace)
    if not refs:
        raise CliError(f"{args.trace} holds no steps to render")
    if args.step is not None:
        at = locate_step_arg(trace, args.step)
        index = next(i for i, r in enumerate(refs) if r.kind == "step" and r.index == at.index)
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
