"""Where a refilling pass spends its time against a stock pass of as many rows (issue 57): timing sections.

    python -m benchmarks.bench_refill_profile --rows 16                 # on the GPU machine, eager
    python -m benchmarks.bench_refill_profile --device cpu --layers 2 --experts 8 --vocab 4096 --rows 4   # dry run

The model is bench_capture_fullshape's (random bf16 weights).  `--rows` generations of one 256-token block, each
forced to `--steps` steps, so no row is refilled and every pass has every row: the loop's pass is then comparable
with a stock `generate` pass of the same rows.  Both run captured (entropy only, as bench_refill_gpu's "today").
Each (the loop with `exact=False`, the whole pass batched) is then cut by synchronized hooks on the encoder and the
decoder: the encoder's calls (stock: one for the batch; the loop: one a row), the decoder's passes, and the rest
(the rows' sampler steps and the capture, the loop's bookkeeping).  Then `torch.profiler` over a
few passes of each prints the ops with the most self CPU and CUDA time and the count of synchronizations.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time

import torch

from backends.capture import capture_steps
from backends.refill import Job, refill_generate
from benchmarks.bench_capture_fullshape import add_shape_arguments, build, full_shape_config, sync

SECTIONS: dict[str, float] = collections.defaultdict(float)
COUNTS: dict[str, int] = collections.defaultdict(int)


def stock(model, jobs: list[Job], device: str) -> None:
    ids = torch.tensor([j.ids for j in jobs], device=device)
    torch.manual_seed(jobs[0].seed)
    with capture_steps(model, lambda s: None, lambda b: None, topk=0):
        model.generate(ids, max_new_tokens=256, max_denoising_steps=jobs[0].steps)


def loop(model, jobs: list[Job]) -> None:
    refill_generate(model, jobs, rows=len(jobs), generate_kwargs=dict(max_new_tokens=256), on_step=lambda j, s: None,
                    on_block=lambda j, b: None, exact=False)


def seconds(device: str, fn, *args) -> float:
    sync(device)
    started = time.perf_counter()
    fn(*args)
    sync(device)
    return time.perf_counter() - started


def profile(device: str, fn, *args, top: int = 18) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with torch_profile(activities=activities) as prof:
        fn(*args)
        sync(device)
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=top), flush=True)
    if device.startswith("cuda"):
        print(events.table(sort_by="self_cuda_time_total", row_limit=top), flush=True)
    syncs = sum(e.count for e in events if "Synchronize" in e.key or e.key == "aten::item" or "_local_scalar" in e.key)
    print(f"synchronizations and scalar reads: {syncs}", flush=True)


def in_sections(model, device: str, name: str, fn) -> None:
    """One run of `fn` cut by synchronized forward hooks on the encoder and the decoder: each one's time, and the
    rest (the sampler's steps and the capture, the loop's bookkeeping) as the run's time less both."""
    SECTIONS.clear()
    COUNTS.clear()
    handles, begun = [], {}
    for part, module in (("encoder", model.model.encoder), ("decoder", model.model.decoder)):
        def before(module, args, kwargs, part=part):
            sync(device)
            begun[part] = time.perf_counter()

        def after(module, args, kwargs, output, part=part):
            sync(device)
            SECTIONS[part] += time.perf_counter() - begun[part]
            COUNTS[part] += 1

        handles += [module.register_forward_pre_hook(before, with_kwargs=True),
                    module.register_forward_hook(after, with_kwargs=True)]
    try:
        total = seconds(device, fn)
    finally:
        for handle in handles:
            handle.remove()
    passes = COUNTS["decoder"]
    rest = total - SECTIONS["encoder"] - SECTIONS["decoder"]
    print(f"{name} in sections: {total:.3f} s, {passes} decoder passes, {1e3 * total / passes:.1f} ms a pass: "
          f"encoder {1e3 * SECTIONS['encoder']:.0f} ms in all ({COUNTS['encoder']} calls), "
          f"decoder {1e3 * SECTIONS['decoder'] / passes:.1f} ms a pass, the rest {1e3 * rest / passes:.1f} ms a pass",
          flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(p)
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--prompt-length", type=int, default=64)
    p.add_argument("--profile-steps", type=int, default=3, help="steps of each run under torch.profiler (0: none)")
    args = p.parse_args(argv)
    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    print(f"built {params / 1e9:.2f} B parameters on {args.device}", flush=True)
    draw = random.Random(0)
    jobs = [Job([draw.randrange(107, args.vocab) for _ in range(args.prompt_length)], seed=i, steps=args.steps)
            for i in range(args.rows)]
    stock(model, jobs[:args.rows], args.device)  # warm-up, both
    loop(model, jobs)
    for rep in range(2):
        s = seconds(args.device, stock, model, jobs, args.device)
        r = seconds(args.device, loop, model, jobs)
        print(f"rep {rep}: stock {1e3 * s / args.steps:.1f} ms a pass, loop {1e3 * r / args.steps:.1f} ms a pass "
              f"({r / s:.2f}x), {args.rows} rows", flush=True)
    for name, fn in (("stock", lambda: stock(model, jobs, args.device)), ("loop", lambda: loop(model, jobs))):
        in_sections(model, args.device, name, fn)
    if args.profile_steps:
        short = [Job(j.ids, j.seed, args.profile_steps) for j in jobs]
        print("== stock, profiled", flush=True)
        profile(args.device, stock, model, short, args.device)
        print("== loop, profiled", flush=True)
        profile(args.device, loop, model, short)
    return 0


if __name__ == "__main__":
    sys.exit(main())
