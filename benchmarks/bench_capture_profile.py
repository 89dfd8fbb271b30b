"""Where the compiled capture spends its extra time at the real 26B shape (issue 57): timing sections.

    python -m benchmarks.bench_capture_profile --reps 3          # on the GPU machine, compiled, batch 1

Builds the model as `bench_capture_fullshape` does (random bf16 weights), warms stock and captured up (the
identity check included), then alternates stock and captured runs and, inside the captured ones, sums the host
time of each part of the recorder per step: the logit summary's launch, `_to_host` (its copies and its one
synchronize: the wait includes the device work queued before it), the per-row record building and `on_step`.
The parts are wall-clock sections of the host thread, so they add up to at most the per-step overhead.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import torch

from backends import capture
from benchmarks.bench_capture_fullshape import build, full_shape_config, generate, REAL_SHAPE

SECTIONS = collections.defaultdict(float)


def timed(name, fn):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SECTIONS[name] += time.perf_counter() - started
    return wrapper


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--layers", type=int, default=REAL_SHAPE["num_hidden_layers"])
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    model, params = build(full_shape_config(layers=args.layers, experts=REAL_SHAPE["num_experts"],
                                            vocab=REAL_SHAPE["vocab_size"]), args.device)
    print(f"built {params / 1e9:.2f} B parameters", flush=True)
    capture.summarize_logits = timed("summary launch", capture.summarize_logits)
    capture._to_host = timed("_to_host (copies + wait)", capture._to_host)
    capture._step_of_row = timed("record building", capture._step_of_row)
    record_step = capture._StepRecorder.record_step
    capture._StepRecorder.record_step = timed("record_step total", record_step)
    prompt = torch.randint(107, REAL_SHAPE["vocab_size"], (1, 64), generator=torch.Generator().manual_seed(64)).to(args.device)
    run = dict(compiled=True, device=args.device, topk=0)
    started = time.perf_counter()
    ref = generate(model, prompt, seed=11, variant="stock", **run)
    got = generate(model, prompt, seed=11, variant="captured", **run)
    print(f"warm-up {time.perf_counter() - started:.0f} s; identical: {torch.equal(ref['sequences'], got['sequences'])}", flush=True)
    SECTIONS.clear()
    ratios, times = [], {"stock": [], "captured": []}
    for rep in range(args.reps):
        pair = {}
        for variant in (("stock", "captured") if rep % 2 == 0 else ("captured", "stock")):
            pair[variant] = generate(model, prompt, seed=rep, variant=variant, **run)["seconds"] / 48 * 1e3
            times[variant].append(pair[variant])
        ratios.append(pair["captured"] / pair["stock"])
        print(f"rep {rep}: stock {pair['stock']:.3f} captured {pair['captured']:.3f} ms/step ratio {ratios[-1]:.4f}", flush=True)
    steps = 48 * args.reps
    print(f"median stock {statistics.median(times['stock']):.3f} ms/step, captured {statistics.median(times['captured']):.3f}, "
          f"paired ratio median {statistics.median(ratios):.4f}")
    for name, seconds in SECTIONS.items():
        print(f"  {name:28s} {seconds / steps * 1e3:.3f} ms/step")


if __name__ == "__main__":
    main()
