"""What a fork costs and whether it changes nothing: record a run, fork it with no intervention and with each kind,
and print each fork's time over the parent's and whether the no-intervention fork equals its parent bit for bit.

    python -m benchmarks.bench_fork                       # the random test model, CPU or CUDA, eager
    python -m benchmarks.bench_fork --compiled --device cuda --steps 48 --at 24
    python -m benchmarks.bench_fork --backend diffusers --sampler block-refinement --model builtin
    python -m benchmarks.bench_fork --model fullshape --device cuda --steps 48 --at 24 --reps 2   # the 26B shape

A fork keeps no state: it replays the parent's steps up to the fork from the seed, so it costs about one parent run
(the goal: the steps after t plus the replay of the steps up to t). Alternating repetitions; medians printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from backends.interventions import fork_trace
from backends.random_model import build_random_model
from backends.run import record_trace
from visualizer.interventions import parse_spec
from visualizer.settings import GenerationSettings

PROMPT = "Write a six-line poem about the ocean."
FORKS = ("", "set 20=sea", "forbid 9=sea", "remask 30-39", "nudge 12=sea:0.5", "topk 4", "knob t_max=0.5")
# Each diffusers scheduler drawing from its generator (temperature above 0), as tests/test_diffusers_fork.py runs them.
DIFFUSERS_KNOBS = {"entropy-bound": {}, "discrete-ddim": dict(temperature=0.7),
                   "block-refinement": dict(temperature=0.7)}


def same(a, b) -> bool:
    return len(a.steps) == len(b.steps) and all(
        np.array_equal(x.canvas, y.canvas) and np.array_equal(x.accepted, y.accepted)
        and np.array_equal(x.entropy_nats, y.entropy_nats) for x, y in zip(a.steps, b.steps))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a model folder, 'builtin' for the built-in model, or 'fullshape' for the real "
                   "26B-A4B shape with random bf16 weights (benchmarks/bench_capture_fullshape.py; transformers only) "
                   "(default: the random test model, built in a temporary folder)")
    p.add_argument("--backend", choices=("transformers", "diffusers"), default="transformers")
    p.add_argument("--sampler", choices=tuple(DIFFUSERS_KNOBS), help="the diffusers scheduler (default: entropy-bound)")
    p.add_argument("--device", default=None)
    p.add_argument("--compiled", action="store_true")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--at", type=int, default=8, help="the fork step in block 1, from 1")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    if args.model == "builtin":
        from backends import BUILTIN_MODEL_DIR

        args.model = str(BUILTIN_MODEL_DIR)
    source = args.model if args.model == "fullshape" else (
        args.model or str(build_random_model(tempfile.mkdtemp(prefix="bench-fork-"))))
    started = time.perf_counter()
    backend, settings = load(args, source)
    load_s = time.perf_counter() - started
    parent = record_trace(backend, PROMPT, settings)  # the first run compiles, when compiled
    forks = tuple(spec for spec in FORKS if not spec or parse_spec(spec).kind in backend.capabilities.interventions)
    times = {spec: [] for spec in ("parent", *forks)}
    equal = []
    for _ in range(args.reps):
        for spec in ("parent", *forks):
            started = time.perf_counter()
            if spec == "parent":
                again = record_trace(backend, PROMPT, settings)
                equal.append(same(parent, again))
            else:
                branch = fork_trace(backend, parent, "0" * 64, block=1, step=args.at,
                                    interventions=tuple(parse_spec(s) for s in [spec] if s))
                if not spec:
                    equal.append(same(parent, branch))
            times[spec].append(time.perf_counter() - started)
    base = statistics.median(times["parent"])
    print(f"{backend.info.name} on {backend.info.device}, {backend.name} {settings.sampler}, "
          f"{'compiled' if args.compiled else 'eager'}, {len(parent.steps)} steps, fork at 1:{args.at}, {args.reps} reps; "
          f"model loaded in {load_s:.1f} s")
    print(f"no-intervention fork and re-runs equal the parent bit for bit: {all(equal)}")
    for spec, values in times.items():
        print(f"{spec or 'fork, no intervention':28s} {statistics.median(values) * 1000:9.1f} ms  "
              f"{statistics.median(values) / base:.3f}x the parent")


def load(args, source):
    """The backend and the run's settings: transformers' entropy-bound, or a diffusers scheduler."""
    settings = GenerationSettings(seed=1, max_new_tokens=256, max_denoising_steps=args.steps, compiled=args.compiled)
    if source == "fullshape":  # no folder holds it: built in memory, the probe benchmark's way
        from benchmarks.bench_capture_fullshape import REAL_SHAPE
        from benchmarks.bench_probe_scale import full_shape_backend

        shape = argparse.Namespace(model=None, device=args.device or "cuda", layers=REAL_SHAPE["num_hidden_layers"],
                                   experts=REAL_SHAPE["num_experts"], vocab=REAL_SHAPE["vocab_size"], steps=args.steps)
        return full_shape_backend(shape), settings
    if args.backend == "transformers":
        from backends.transformers_backend import TransformersBackend

        return TransformersBackend(source, device=args.device), settings
    from backends.diffusers_backend import DiffusersBackend

    sampler = args.sampler or "entropy-bound"
    return DiffusersBackend(source, device=args.device), settings.replace(sampler=sampler, **DIFFUSERS_KNOBS[sampler])


if __name__ == "__main__":
    main()
