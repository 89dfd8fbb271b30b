"""Command line for animations: export a saved run, record and export the demo prompts, compare two runs.

    python -m visualizer export run.json --gif run.gif [--mp4 run.mp4] [--webp run.webp]
    python -m visualizer export run.json --gif b2.gif --blocks 2 --frame-ms 100 --width 800 --palette colorblind
    python -m visualizer demos --out assets/demos [--model FOLDER_OR_HUB_ID] [--seed 0]
    python -m visualizer compare seed0.json seed1.json --gif both.gif --png end.png --step 1:10

`demos` records each demo prompt (`prompts/demos.py`) on the model (default: the built-in one),
writes its trace (NAME.json) and its GIF (NAME.gif) to the folder.  Progress goes to stderr;
bad input ends with one `error: ...` line and exit status 2 (handled by `cli.main`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from visualizer.animation import LAYOUTS, AnimationError, AnimationOptions, parse_blocks
from visualizer.export import ExportError, export_animation
from visualizer.palette import PALETTES

from .common import CliError, add_generation_arguments, add_step_argument, load_model, load_trace, locate_step_arg
from .common import refuse_problems, settings_from_args
from .progress import RunProgress


# ---- shared options --------------------------------------------------------------------------
APP_LAYOUT = "grid"  # the app's export default (its Layout radio), also frame's and compare's
DEMO_LAYOUT = "text"  # the shipped demo GIFs (assets/demos): each demo's final text, line by line


def add_animation_arguments(parser, *, layout: str = APP_LAYOUT) -> None:
    defaults = AnimationOptions()
    parser.add_argument("--blocks", help="blocks to show, counted from 1: e.g. 2 or 1,3 (default: all)")
    parser.add_argument("--frame-ms", type=int, default=defaults.frame_ms, help="milliseconds per step (default %(default)s)")
    parser.add_argument("--hold-ms", type=int, default=defaults.hold_ms, help="extra milliseconds on the last frame (default %(default)s)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--width", type=int, help="image width in pixels (picks the font size; text is never scaled)")
    size.add_argument("--font-size", type=int, default=defaults.font_size, help="font size in pixels (default %(default)s)")
    parser.add_argument("--palette", choices=tuple(PALETTES), default=defaults.palette)
    parser.add_argument("--layout", choices=LAYOUTS, default=layout,
                        help="grid: 16 cells a row; text: the final text's lines (finished runs) (default %(default)s)")
    parser.add_argument("--no-prompt", action="store_true", help="leave the prompt out of the caption")
    parser.add_argument("--no-caption", action="store_true", help="leave out the status line (model, step, tau_b)")
    parser.add_argument("--smooth", action="store_true", help="anti-aliased text (bigger files; default: crisp pixel text)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def options_from_args(args) -> AnimationOptions:
    try:
        blocks = parse_blocks(args.blocks)
    except AnimationError as exc:
        raise CliError(f"--{exc}") from None
    return AnimationOptions(
        blocks=blocks,
        frame_ms=args.frame_ms,
        hold_ms=args.hold_ms,
        width=args.width,
        font_size=args.font_size,
        palette=args.palette,
        layout=args.layout,
        prompt=not args.no_prompt,
        caption=not args.no_caption,
        antialias=args.smooth,
    )


class ProgressBar:
    """A one-line progress bar on stderr: `bar(done, total)`; `bar.close()` ends the line."""

    def __init__(self, label: str, *, stream=sys.stderr, width: int = 30):
        self.label, self.stream, self.width, self.shown = label, stream, width, -1

    def __call__(self, done: int, total: int) -> None:
        filled = self.width * done // max(total, 1)
        if filled != self.shown:
            self.shown = filled
            bar = "#" * filled + "-" * (self.width - filled)
            print(f"\r{self.label} [{bar}] {100 * done // max(total, 1):3d}%", end="", file=self.stream, flush=True)

    def close(self) -> None:
        if self.shown >= 0:
            print(file=self.stream)


def export_files(trace, options: AnimationOptions, *, label: str, quiet: bool, **paths):
    """`export_animation` with a progress bar and CLI errors; prints what was written."""
    bar = None if quiet else ProgressBar(label)
    try:
        result = export_animation(trace, options, progress=bar, **paths)
    except (AnimationError, ExportError) as exc:
        raise CliError(str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    for path in result.paths.values():
        print(
            f"wrote {path} ({result.size[0]}x{result.size[1]}, {result.frames} frames, "
            f"{result.duration_ms / 1000:.1f} s a loop, {path.stat().st_size / 1024:.0f} KB)",
            file=sys.stderr,
        )
    times = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in result.seconds.items())
    print(f"time: {times}", file=sys.stderr)
    return result


# ---- export ----------------------------------------------------------------------------------
def add_export_command(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a saved run as an animated GIF (and MP4 / WebP)")
    p.add_argument("trace", help="trace file (.json) saved by the app or `record`")
    p.add_argument("--gif", help="animated GIF to write")
    p.add_argument("--mp4", help="H.264 video to write")
    p.add_argument("--webp", help="lossless animated WebP to write")
    add_animation_arguments(p)
    p.set_defaults(run=run_export)


def run_export(args) -> int:
    if not (args.gif or args.mp4 or args.webp):
        raise CliError("nothing to write: give --gif FILE, --mp4 FILE and/or --webp FILE")
    options = options_from_args(args)
    refuse_problems(options.problems())
    trace = load_trace(args.trace)
    export_files(trace, options, label="encoding", quiet=args.quiet, gif=args.gif, mp4=args.mp4, webp=args.webp)
    return 0


# ---- demos -----------------------------------------------------------------------------------
def add_demos_command(subparsers) -> None:
    p = subparsers.add_parser("demos", help="record the six demo prompts and write a GIF of each")
    p.add_argument("--out", required=True, help="folder for NAME.json traces and NAME.gif animations")
    p.add_argument("--only", help="some demos, comma separated: acrostic, sky, palindrome, planets, story, haiku")
    p.add_argument("--mp4", action="store_true", help="also write NAME.mp4")
    p.add_argument("--webp", action="store_true", help="also write NAME.webp")
    add_generation_arguments(p)
    add_animation_arguments(p, layout=DEMO_LAYOUT)
    p.set_defaults(run=run_demos)


def run_demos(args) -> int:
    from backends import BackendError, record_trace
    from prompts.demos import DEMO_NAMES, demo

    names = DEMO_NAMES if args.only is None else tuple(n.strip() for n in args.only.split(",") if n.strip())
    unknown = [n for n in names if n not in DEMO_NAMES]
    if unknown or not names:
        raise CliError(f"unknown demo(s) {', '.join(unknown) or repr(args.only)}; choose from: {', '.join(DEMO_NAMES)}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"{out} is a file, not a folder")
    settings = settings_from_args(args)
    options = options_from_args(args)
    refuse_problems(settings.problems() + options.problems())
    out.mkdir(parents=True, exist_ok=True)
    backend = load_model(args, settings)
    failed = 0
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name}: {demo(name).prompt}", file=sys.stderr)
        progress = None if args.quiet else RunProgress(sys.stderr, label=name)
        try:
            trace = record_trace(backend, demo(name).prompt, settings, on_record=progress)
        except BackendError as exc:
            raise CliError(f"{name}: {exc}") from None
        finally:
            if progress is not None:
                progress.close()
        trace.save(out / f"{name}.json")
        if trace.end is not None and trace.end.finish_reason == "error":
            print(f"{name}: the run failed ({trace.end.error}); its trace is saved, no animation", file=sys.stderr)
            failed += 1
            continue
        paths = {"gif": out / f"{name}.gif"}
        paths |= {"mp4": out / f"{name}.mp4"} if args.mp4 else {}
        paths |= {"webp": out / f"{name}.webp"} if args.webp else {}
        export_files(trace, options, label=f"encoding {name}", quiet=args.quiet, **paths)
    return 1 if failed else 0


# ---- compare ---------------------------------------------------------------------------------
def add_compare_command(subparsers) -> None:
    p = subparsers.add_parser("compare", help="two saved runs side by side, stepped together (PNG, HTML, GIF)")
    p.add_argument("trace_a", help="first trace file (.json)")
    p.add_argument("trace_b", help="second trace file (.json)")
    add_step_argument(p, bare="of block 1, of the first run (the second is shown as far into its own steps)",
                      default="the end")
    p.add_argument("--png", help="image of both runs at --step")
    p.add_argument("--html", help="HTML fragment of both runs at --step")
    p.add_argument("--gif", help="animation of both runs stepped together")
    defaults = AnimationOptions()
    p.add_argument("--frame-ms", type=int, default=defaults.frame_ms)
    p.add_argument("--hold-ms", type=int, default=defaults.hold_ms)
    p.add_argument("--font-size", type=int, default=defaults.font_size)
    p.add_argument("--palette", choices=tuple(PALETTES), default=defaults.palette)
    p.add_argument("--layout", choices=LAYOUTS, default=APP_LAYOUT)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(run=run_compare)


def run_compare(args) -> int:
    from visualizer.compare import align, branch_changes, build_compare_animation, compare_html, compare_image
    from visualizer.export import save_gif

    if not (args.png or args.html or args.gif):
        raise CliError("nothing to write: give --png FILE, --html FILE and/or --gif FILE")
    options = AnimationOptions(frame_ms=args.frame_ms, hold_ms=args.hold_ms, font_size=args.font_size,
                               palette=args.palette, layout=args.layout)
    refuse_problems(options.problems())
    for path in (args.png, args.html, args.gif):
        if path and not Path(path).parent.is_dir():
            raise CliError(f"cannot write {path}: folder {Path(path).parent} does not exist")
    a, b = load_trace(args.trace_a), load_trace(args.trace_b)
    changes = branch_changes(a, b)  # B a branch (fork): what it changed, said once
    if changes is not None:
        print(f"B forks at step {changes.fork_step} (0-based, as --step counts): {len(changes.tokens)} position(s)' final "
              f"token and {len(changes.commit_steps)} commit step(s) changed", file=sys.stderr)
    try:
        last = len(align(a, b)) - 1  # the aligned steps, and one past them: both runs' last frames
        step = last if args.step is None else locate_step_arg(a, args.step).index
        record = a.steps[step] if step < len(a.steps) else None
        where = f"step {record.block + 1}:{record.step + 1} of the first run" if record else "the end"
        if args.png:
            compare_image(a, b, step, palette=args.palette, layout=args.layout, font_size=args.font_size).save(args.png)
            print(f"wrote {args.png} ({where})", file=sys.stderr)
        if args.html:
            Path(args.html).write_text(compare_html(a, b, step, palette=args.palette, layout=args.layout), encoding="utf-8")
            print(f"wrote {args.html} ({where})", file=sys.stderr)
        if args.gif:
            bar = None if args.quiet else ProgressBar("rendering")
            try:
                animation = build_compare_animation(a, b, options, progress=bar)
            finally:
                if bar is not None:
                    bar.close()
            save_gif(animation, args.gif)
            kb = Path(args.gif).stat().st_size / 1024
            print(f"wrote {args.gif} ({animation.size[0]}x{animation.size[1]}, {len(animation.frames)} frames, {kb:.0f} KB)", file=sys.stderr)
    except AnimationError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write: {exc}") from None
    return 0
