"""Benchmark: render and encode a 100-frame animation of a 256-token canvas, against the naive way.

    python -m benchmarks.bench_gif                       # records the default run first (~1 min on CPU)
    python -m benchmarks.bench_gif --trace run.json      # any saved run with at least --frames frames
    python -m benchmarks.bench_gif --layout grid --repeats 5 --smooth

The default run is the `story` demo on the tiny random model (random weights never stop early:
99 steps + the commit = 100 frames of one 256-token canvas) with an entropy bound of 40 nats:
~7 positions accepted per step and all of them re-drawn at the next, so every frame changes
~14 cells spread over the canvas, a hard case for GIF frame differences.

Measured in one run, on the same frames (the first --frames frames of the trace):
- render: the cached renderer (`FrameRenderer`, pieces quantized to the shared palette once) vs
  `render_frame_image` drawing every frame whole (RGB, the reference pixels);
- encode: `save_gif` (one global palette, numpy frame deltas, Pillow's crop to the changed
  rectangle) vs the naive encode (the RGB frames handed to Pillow: a palette per frame), and
  Pillow's own `optimize=True` on the shared-palette frames, for reference.
Times are the median of --repeats runs (each with fresh caches); sizes are the files' bytes.
Budget (issue 5): encode <= 0.5 s and GIF <= 300 KB for 100 frames of a 256-token canvas.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from visualizer.animation import AnimationOptions, animation_layout, build_animation, caption
from visualizer.export import save_gif
from visualizer.palette import get_palette
from visualizer.records import FINISH_CANCELLED, RunEnd
from visualizer.render_image import render_frame_image
from visualizer.states import frame_refs, frame_state
from visualizer.trace import Trace

BUDGET_SECONDS = 0.5
BUDGET_KB = 300


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", help="a saved run (default: record one, see --model / --demo / --steps)")
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--layout", choices=("text", "grid"), default="text")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smooth", action="store_true", help="anti-aliased text, as `export --smooth`")
    parser.add_argument("--model", help="model to record with (default: the tiny random model)")
    parser.add_argument("--demo", default="story", help="demo prompt to record (default: story)")
    parser.add_argument("--steps", type=int, default=99, help="max denoising steps when recording")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="output budget when recording")
    parser.add_argument("--entropy-bound", type=float, default=40.0, help="nats accepted per step when recording")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    full = Trace.load(args.trace) if args.trace else record(args)
    if len(frame_refs(full)) < args.frames:
        print(f"error: the run has {len(frame_refs(full))} frames; --frames is {args.frames}", file=sys.stderr)
        return 2
    trace = first_frames(full, args.frames)
    options = AnimationOptions(layout=args.layout, antialias=args.smooth)
    print(f"trace: {trace.model.name}, {trace.canvas_length}-token canvas, first {args.frames} of "
          f"{len(frame_refs(full))} frames ({len(trace.steps)} steps, {len(trace.blocks)} commits), layout {args.layout}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ours_render = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            animation = build_animation(trace, options)
            ours_render.append(time.perf_counter() - start)
        ours_render_s = statistics.median(ours_render)
        reference, reference_render = reference_frames(trace, options, args.repeats)
        changed = changed_fraction(reference)

        ours_encode, ours_size = timed_file(lambda p: save_gif(animation, p), tmp / "ours.gif", args.repeats)
        naive_encode, naive_size = timed_file(
            lambda p: reference[0].save(p, save_all=True, append_images=reference[1:], duration=150, loop=0),
            tmp / "naive.gif", args.repeats,
        )
        pillow_encode, pillow_size = timed_file(
            lambda p: animation.frames[0].save(p, save_all=True, append_images=animation.frames[1:],
                                               duration=animation.durations_ms, loop=0, optimize=True),
            tmp / "pillow.gif", 1,
        )

    w, h = animation.size
    print(f"frames: {len(animation.frames)} distinct of {args.frames}, {w}x{h} px, {100 * changed:.1f} % of pixels change per frame")
    print(f"render  cached renderer  {ours_render_s:6.3f} s ({1000 * ours_render_s / args.frames:5.1f} ms/frame)")
    print(f"render  render_frame_image {reference_render:4.3f} s ({1000 * reference_render / args.frames:5.1f} ms/frame)"
          f"   ratio {reference_render / ours_render_s:5.1f}x")
    print(f"encode  save_gif          {ours_encode:6.3f} s  {ours_size / 1024:7.0f} KB")
    print(f"encode  naive (per-frame palette) {naive_encode:6.3f} s  {naive_size / 1024:7.0f} KB"
          f"   ratio {naive_encode / ours_encode:5.1f}x time, {naive_size / ours_size:5.1f}x size")
    print(f"encode  Pillow optimize=True, shared palette {pillow_encode:6.3f} s  {pillow_size / 1024:7.0f} KB (one run)")
    print(f"total   ours {ours_render_s + ours_encode:6.3f} s   naive {reference_render + naive_encode:6.3f} s")
    ok_time, ok_size = ours_encode <= BUDGET_SECONDS, ours_size / 1024 <= BUDGET_KB
    print(f"budget  encode <= {BUDGET_SECONDS} s: {'PASS' if ok_time else 'FAIL'};  GIF <= {BUDGET_KB} KB: {'PASS' if ok_size else 'FAIL'}")
    return 0 if ok_time and ok_size else 1


def record(args) -> Trace:
    from backends import RANDOM_MODEL_DIR, load_backend
    from prompts.demos import demo_prompt
    from backends import record_trace
    from visualizer.settings import GenerationSettings

    model = args.model or str(RANDOM_MODEL_DIR)
    print(f"recording the {args.demo!r} demo on {model} ...", file=sys.stderr)
    settings = GenerationSettings(
        seed=args.seed, max_denoising_steps=args.steps, max_new_tokens=args.max_new_tokens, entropy_bound=args.entropy_bound
    )
    return record_trace(load_backend(model), demo_prompt(args.demo), settings)


def first_frames(trace: Trace, count: int) -> Trace:
    """The run as if it had been stopped after its first `count` frames (steps and commits)."""
    refs = frame_refs(trace)[:count]
    steps = [trace.steps[r.index] for r in refs if r.kind == "step"]
    blocks = [trace.blocks[r.index] for r in refs if r.kind == "commit"]
    if len(refs) == len(frame_refs(trace)):
        return trace
    sequence = np.concatenate([b.tokens for b in blocks]) if blocks else np.zeros(0, np.int32)
    end = RunEnd(finish_reason=FINISH_CANCELLED, sequence=sequence, text="", wall_time_s=trace.end.wall_time_s if trace.end else 0.0)
    return Trace(model=trace.model, prompt=trace.prompt, start=trace.start, steps=steps, blocks=blocks, end=end,
                 pieces=trace.pieces, created=trace.created)


def reference_frames(trace: Trace, options: AnimationOptions, repeats: int):
    """Every frame drawn whole by `render_frame_image` (RGB, the reference pixels), and the median time."""
    refs = frame_refs(trace)
    layout = animation_layout(trace, options.layout)
    palette = get_palette(options.palette)
    times, frames = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        frames = [
            render_frame_image(trace, frame_state(trace, i, refs), layout, palette,
                               caption=caption(trace, refs, i, options), antialias=options.antialias)
            for i in range(len(refs))
        ]
        times.append(time.perf_counter() - start)
    return frames, statistics.median(times)


def changed_fraction(frames) -> float:
    arrays = [np.asarray(f) for f in frames]
    return float(np.mean([np.any(a != b, axis=2).mean() for a, b in zip(arrays, arrays[1:])]))


def timed_file(write, path: Path, repeats: int) -> tuple[float, int]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        write(path)
        times.append(time.perf_counter() - start)
    return statistics.median(times), path.stat().st_size


if __name__ == "__main__":
    sys.exit(main())
