"""The capture's per-step summary of the logits: the old entropy against the fused one, and what top-k costs.

    python benchmarks/bench_entropy.py                                   # on the GPU machine: 256 x 262,144
    python benchmarks/bench_entropy.py --device cpu --canvas 16 --vocab 16384 --reps 5   # a dry run here

On logits shaped like one real step (batch 1, canvas 256, vocabulary 262,144, float32, softcapped
at 30 and divided by a schedule temperature), it times, median of `--reps` after a warm-up:

    categorical      the capture before: torch.distributions.Categorical(logits).entropy(),
                     the sampler's own formula, several unfused passes
    fused eager      backends.logit_summary's max-shifted form, run eagerly (the CPU path)
    fused compiled   the same, torch.compile'd (the CUDA path): entropy only (--topk 0)
    + top-k two-stage  compiled entropy and the top-k in two stages (the default)
    + top-k one pass   compiled entropy and one torch.topk over the whole vocabulary

and prints each one's time, its ratio to `categorical` measured in this run, the largest
difference of its entropy to the sampler's value and to the float64 entropy, and whether its
candidates equal torch.topk's. The integrator keeps the faster top-k as the default.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from backends.logit_summary import _summarize  # noqa: E402


def real_like_logits(canvas: int, vocab: int, device: str) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(0)
    scale = torch.logspace(-1, 1.5, canvas)[:, None]
    logits = torch.tanh(torch.randn(canvas, vocab, generator=g) * scale / 30) * 30
    logits[::3, 7] += 40  # a third of the positions nearly sure of their token
    return (logits / 0.4)[None].to(device)


def timed(fn, logits, *, reps: int, device: str) -> float:
    """Median milliseconds of one call, after two warm-up calls (compilation)."""
    for _ in range(2):
        fn(logits)
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(logits)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            started = time.perf_counter()
            fn(logits)
            times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--canvas", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=262_144)
    parser.add_argument("--topk", type=int, default=5)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"device: {name}, torch {torch.__version__}; logits (1, {args.canvas}, {args.vocab}) float32", flush=True)
    logits = real_like_logits(args.canvas, args.vocab, args.device)
    sampler = torch.distributions.Categorical(logits=logits, validate_args=False).entropy()
    truth = torch.distributions.Categorical(logits=logits.double(), validate_args=False).entropy()
    reference_ids = torch.topk(logits, args.topk, dim=-1).indices if args.topk else None

    variants = {
        "categorical": lambda x: torch.distributions.Categorical(logits=x.float(), validate_args=False).entropy(),
        "fused eager": lambda x: _summarize(x, 0).entropy,
        "fused compiled": torch.compile(functools.partial(_summarize, k=0), dynamic=False),
    }
    if args.topk:
        variants["+ top-k two-stage"] = torch.compile(functools.partial(_summarize, k=args.topk, two_stage=True), dynamic=False)
        variants["+ top-k one pass"] = torch.compile(functools.partial(_summarize, k=args.topk, two_stage=False), dynamic=False)

    rows = []
    for label, fn in variants.items():
        out = fn(logits)
        entropy = out if isinstance(out, torch.Tensor) else out.entropy
        ids = None if isinstance(out, torch.Tensor) else out.topk_ids
        ms = timed(fn, logits, reps=args.reps, device=args.device)
        same_ids = "–" if ids is None else str(bool(torch.equal(ids.long(), reference_ids)))
        rows.append((label, ms, (entropy - sampler).abs().max().item(), (entropy.double() - truth).abs().max().item(), same_ids))
        print(f"{label}: {ms:.3f} ms", flush=True)
    base = rows[0][1]
    print(f"\n{name}, logits (1, {args.canvas}, {args.vocab}) float32, median of {args.reps}; top-k = {args.topk}\n")
    print("| variant | ms per step | ratio to categorical | max diff to the sampler, nats | max diff to float64, nats | top-k ids equal torch.topk |")
    print("|---|---|---|---|---|---|")
    for label, ms, to_sampler, to_truth, same_ids in rows:
        print(f"| {label} | {ms:.3f} | {ms / base:.3f} | {to_sampler:.2e} | {to_truth:.2e} | {same_ids} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
