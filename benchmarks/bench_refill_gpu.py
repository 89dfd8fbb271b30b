"""Refilling finished rows at the real 26B-A4B shape, with the study's step counts forced, and what a fork costs there.

    python -m benchmarks.bench_refill_gpu --out /tmp/refill.jsonl                 # on the GPU machine
    python -m benchmarks.bench_refill_gpu --device cpu --layers 2 --experts 8 --vocab 4096 --rows 4 --generations 8 \\
        --alone 2     # dry run

The model is bench_capture_fullshape's (random bf16 weights, built on the GPU without two copies). Random weights
never stop early, so each generation is given its own step count, drawn uniformly from `--steps` (the study saw
3 to 17): its `max_denoising_steps`, one 256-token block, a 64-token prompt of its own.  For each row count:
- "today": the generations in plan order, `rows` a batch, each batch one stock `generate` (captured, entropy only)
  run for its slowest row's steps, as transformers' `torch.all(finished_denoising)` makes every row compute;
- "exact": backends/refill.py, attention and experts row by row (each row's pass alone, the float32 identity), the
  decoder called on at most CUDA_EXACT_CALL_ROWS rows at a time on CUDA (the bf16 identity, bench_refill_identity);
  "exact-one-call" the same on every active row in one call;
- "batched": the same loop with the whole pass batched (`exact=False`: the experts grouped, the attention in one
  padded, masked call, one self-conditioning product) in one call; "batched-calls" in calls of CUDA_EXACT_CALL_ROWS
  rows.
Each reports row-passes needed over run (the useful fraction), seconds and generations a second.  Then the first
`--alone` generations run alone (batch 1, stock `generate`, captured, seeded as the loop seeds them), and each
refilled block is compared with its alone block token for token (bit-identical on the CPU in float32; on CUDA bf16
batched kernels round differently, benchmarks/bench_batch_invariance.py).

The fork (issue 55): a fork at step t replays steps 1..t from the seed (no state kept), then runs the steps after t,
so it costs one parent run; with state kept it would cost the steps after t.  Printed from the alone 48-step run's
seconds a step, with the bytes one row's state takes after t steps (cache, canvas, self-conditioning logits, RNG).
One JSON object a line to `--out`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import torch

from backends.capture import capture_steps
from backends.refill import CUDA_EXACT_CALL_ROWS, Job, _decoder_pass, _Generation, _register_by_row, refill_generate
from benchmarks.bench_capture_fullshape import add_shape_arguments, build, full_shape_config, sync


def emit(out, row: dict) -> None:
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


# variant: (exact, rows a decoder call): "exact" calls the decoder on CUDA_EXACT_CALL_ROWS rows at a time on CUDA
# (the loop's default), "exact-one-call" on every active row at once; "batched" runs the experts batched in one call,
# "batched-calls" in calls of CUDA_EXACT_CALL_ROWS rows
REFILL_VARIANTS = {"exact": (True, None), "exact-one-call": (True, 10**6), "batched": (False, None),
                   "batched-calls": (False, CUDA_EXACT_CALL_ROWS)}


def today(model, jobs, rows: int, device: str) -> tuple[int, list[torch.Tensor]]:
    """Stock batches in plan order, each for its slowest row's steps: the row-passes run, and each job's block."""
    ran, blocks = 0, []
    for start in range(0, len(jobs), rows):
        batch = jobs[start:start + rows]
        steps = max(j.steps for j in batch)
        ids = torch.tensor([j.ids for j in batch], device=device)
        torch.manual_seed(batch[0].seed)
        used = []  # the steps the batch ran, as captured (a block can converge before its cap)
        with capture_steps(model, lambda s: None, lambda b: used.append(b.steps_used), topk=0):
            out = model.generate(ids, max_new_tokens=256, max_denoising_steps=steps)
        ran += max(used) * len(batch)
        blocks += list(out.sequences[:, ids.shape[1]:].cpu())
    return ran, blocks


def refill(model, jobs, rows: int, exact: bool, call_rows: int | None = None) -> tuple[int, dict[int, torch.Tensor], int]:
    """The refilling loop: the row-passes it ran, each job's block, and the passes the blocks needed (their steps)."""
    blocks: dict[int, torch.Tensor] = {}
    used: list[int] = []  # each block's steps: the passes it needed (a block can converge before its cap)

    def on_block(job, block):
        blocks[job] = torch.from_numpy(block.tokens)
        used.append(block.steps_used)

    ran = refill_generate(model, jobs, rows=rows, generate_kwargs=dict(max_new_tokens=256), on_step=lambda j, s: None,
                          on_block=on_block, exact=exact, call_rows=call_rows)
    print(f"refill {rows} rows: {sum(used)} passes needed (caps {sum(j.steps for j in jobs)})", flush=True)
    return ran, blocks, sum(used)


def alone(model, job: Job, device: str) -> tuple[torch.Tensor, int]:
    """The job run alone (batch 1, stock generate): its block and the steps it ran (random weights can converge
    before the cap)."""
    torch.manual_seed(job.seed)
    ids = torch.tensor([job.ids], device=device)
    used = []
    with capture_steps(model, lambda s: None, lambda b: used.append(b.steps_used), topk=0):
        out = model.generate(ids, max_new_tokens=256, max_denoising_steps=job.steps)
    return out.sequences[0, ids.shape[1]:].cpu(), sum(used)


def timed(device: str, fn, *args):
    sync(device)
    started = time.perf_counter()
    result = fn(*args)
    sync(device)
    return time.perf_counter() - started, result


def state_bytes(generation: _Generation) -> dict[str, int]:
    """What one row must keep to resume after a step: its cache, canvases, self-conditioning logits and RNG."""
    cache = sum(t.numel() * t.element_size() for layer in generation.cache.layers
                for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if isinstance(t, torch.Tensor))
    canvas = sum(t.numel() * t.element_size() for t in (generation.canvas, generation.argmax))
    sc = generation.self_conditioning
    return dict(cache=cache, canvas=canvas, self_conditioning=0 if sc is None else sc.numel() * sc.element_size(),
                rng=generation.rng.state.numel())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(p)
    p.add_argument("--rows", default="8,16", help="row counts, comma-separated")
    p.add_argument("--generations", type=int, default=48, help="generations a row count")
    p.add_argument("--steps", default="3-17", help="uniform range of each generation's forced step count")
    p.add_argument("--prompt-length", type=int, default=64)
    p.add_argument("--alone", type=int, default=8, help="generations also run alone, for the identity check")
    p.add_argument("--fork-at", type=int, default=24)
    p.add_argument("--variants", default="today,exact,batched,batched-calls",
                   help=f"today and any of {', '.join(REFILL_VARIANTS)}")
    p.add_argument("--out")
    args = p.parse_args(argv)
    import transformers

    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    started = time.perf_counter()
    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    emit(args.out, dict(kind="build", device=name, torch=torch.__version__, transformers=transformers.__version__,
                        params=params, seconds=time.perf_counter() - started,
                        experts_implementation=getattr(model.config.get_text_config(), "_experts_implementation", None)))
    _register_by_row()
    low, high = (int(n) for n in args.steps.split("-"))
    draw = random.Random(0)
    jobs = [Job([draw.randrange(107, args.vocab) for _ in range(args.prompt_length)], seed=i, steps=draw.randint(low, high))
            for i in range(args.generations)]
    # warm-up: one batched and one refilled pass at every shape, so the first timed variant pays no start-up
    for rows in (int(r) for r in args.rows.split(",")):
        warm = [Job(j.ids, j.seed, 2) for j in jobs[:rows]]
        today(model, warm, rows, args.device)
        refill(model, warm, rows, exact=False)
    results: dict[str, dict[int, torch.Tensor]] = {}
    needed = None  # the passes the generations need: their blocks' steps, counted by the refilling loop
    for rows in (int(r) for r in args.rows.split(",")):
        runs = []
        for variant in args.variants.split(","):
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            if variant == "today":
                seconds, (ran, blocks) = timed(args.device, today, model, jobs, rows, args.device)
                blocks = dict(enumerate(blocks))
            else:
                exact, call_rows = REFILL_VARIANTS[variant]
                seconds, (ran, blocks, needed) = timed(args.device, refill, model, jobs, rows, exact, call_rows)
                results[f"{variant} {rows}"] = blocks  # today's rows run to their batch's largest cap: not compared
            peak = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else None
            runs.append(dict(kind="run", rows=rows, variant=variant, generations=len(jobs), ran=ran, seconds=seconds,
                             gen_per_s=len(jobs) / seconds, pass_ms=seconds / (ran / rows) * 1e3, peak_gib=peak))
        for run in runs:
            emit(args.out, {**run, "needed": needed, "useful": None if needed is None else needed / run["ran"]})
    # each generation alone: the refilling loop's reference, and its seconds
    alone_seconds = []
    for job in jobs[:args.alone]:
        seconds, (block, steps) = timed(args.device, alone, model, job, args.device)
        alone_seconds.append(seconds / steps)
        for key, blocks in results.items():
            same = torch.equal(blocks[jobs.index(job)], block)
            agree = (blocks[jobs.index(job)] == block).float().mean().item()
            emit(args.out, dict(kind="identity", job=jobs.index(job), steps=job.steps, variant=key, identical=same,
                                agree=agree))
    emit(args.out, dict(kind="alone", generations=args.alone, step_ms=1e3 * sorted(alone_seconds)[len(alone_seconds) // 2]))
    # the fork: a parent of 48 steps, and one row's state after `--fork-at` of them
    parent = Job(jobs[0].ids, seed=0, steps=48)
    parent_s, (_, parent_steps) = timed(args.device, alone, model, parent, args.device)
    from backends.capture import _StepRecorder

    recorder = _StepRecorder(model, lambda s: None, lambda b: None, None, topk=0, agree=None, shift=False, pins=())
    with torch.no_grad():
        generation = _Generation(model, parent, dict(max_new_tokens=256), recorder)
        for _ in range(min(args.fork_at, parent_steps)):
            generation.step(_decoder_pass(model, [generation]))
    kept = state_bytes(generation)
    at = min(args.fork_at, parent_steps)
    emit(args.out, dict(kind="fork", steps=parent_steps, at=at, parent_s=parent_s, replay_fork_s=parent_s,
                        kept_fork_s=parent_s * (parent_steps - at) / parent_steps, state_bytes=kept,
                        state_mib=sum(kept.values()) / 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
