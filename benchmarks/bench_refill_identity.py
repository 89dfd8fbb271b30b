"""Where a refilled generation first differs from the same generation alone, on this device: what the loop's identity
with stock `generate` rests on.

    python -m benchmarks.bench_refill_identity --out $OUT/identity.jsonl          # on the GPU machine (real 26B shape)
    python -m benchmarks.bench_refill_identity --device cpu --layers 2 --experts 8 --vocab 4096   # dry run

bench_refill_gpu found refilled blocks agreeing with their generations alone on only 71-77% of tokens on an H200
(bit-identical on the CPU). Three things could cause it: the loop's mechanics (its per-row random generator, its
stock-step calls), the attention kernel the loop's row-by-row attention gets, or the batch (rows of other
generations beside it, `bench_batch_invariance`). Separated here, on the bench's model (random bf16 weights):

1. stock alone twice: is one generation deterministic on this device at all?
2. the first decoder pass alone (stock `generate`'s own call, caught at `model.forward`) against the loop's
   `_decoder_pass` of the same generation at 1 row: the same canvas in? the same logits out? under each SDPA
   kernel forced for both (math, efficient, flash, cuDNN) and with the experts batched or row by row;
3. whole generations: the loop at 1 row and at `--rows` rows (exact and experts batched) against alone: the first
   step whose canvas differs, the first step whose entropies differ, and the block tokens that agree.

One JSON object a line (printed and appended to `--out`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys

import torch

from backends.capture import _StepRecorder, capture_steps
from backends.refill import (CUDA_EXACT_CALL_ROWS, Job, _call_rows, _decoder_pass, _Generation, _register_by_row,
                             refill_generate)
from benchmarks.bench_capture_fullshape import add_shape_arguments, build, full_shape_config


def emit(out, row: dict) -> None:
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")


def alone(model, job: Job) -> tuple[list, torch.Tensor]:
    """Stock `generate` on the job alone, captured: its step records and its block."""
    steps = []
    torch.manual_seed(job.seed)
    ids = torch.tensor([job.ids], device=model.device)
    with capture_steps(model, steps.append, lambda b: None, topk=0):
        out = model.generate(ids, max_new_tokens=256, max_denoising_steps=job.steps)
    return steps, out.sequences[0, ids.shape[1]:].cpu()


def looped(model, jobs: list[Job], rows: int, exact: bool, call_rows: int | None) -> tuple[dict[int, list], dict]:
    steps: dict[int, list] = {i: [] for i in range(len(jobs))}
    blocks: dict[int, torch.Tensor] = {}
    refill_generate(model, jobs, rows=rows, generate_kwargs=dict(max_new_tokens=256),
                    on_step=lambda j, s: steps[j].append(s),
                    on_block=lambda j, b: blocks.__setitem__(j, torch.from_numpy(b.tokens)), exact=exact,
                    call_rows=call_rows)
    return steps, blocks


def first_difference(a: list, b: list, field: str) -> int | None:
    """The first step (from 0) whose `field` differs between two step lists, None when all agree."""
    for i, (x, y) in enumerate(zip(a, b)):
        if not (getattr(x, field) == getattr(y, field)).all():
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def first_pass_alone(model, job: Job) -> dict:
    """The keyword arguments and logits of stock `generate`'s first decoder call (`decoder_forward = self.forward`,
    so an instance attribute catches it)."""
    caught: dict = {}
    stock = model.forward

    def catch(**kwargs):
        out = stock(**kwargs)
        if "decoder_input_ids" in kwargs and kwargs["decoder_input_ids"] is not None and "logits" not in caught:
            caught.update(kwargs=kwargs, logits=out.logits.detach().clone())
        return out

    model.forward = catch
    try:
        torch.manual_seed(job.seed)
        model.generate(torch.tensor([job.ids], device=model.device), max_new_tokens=256, max_denoising_steps=2)
    finally:
        del model.forward
    return caught


def kernels():
    """(name, context) for the default dispatch and each SDPA kernel this build knows."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    yield "default", contextlib.nullcontext
    for name in ("MATH", "EFFICIENT_ATTENTION", "FLASH_ATTENTION", "CUDNN_ATTENTION"):
        if hasattr(SDPBackend, name):
            yield name.lower(), lambda name=name: sdpa_kernel([getattr(SDPBackend, name)])


def compare(a: torch.Tensor, b: torch.Tensor) -> dict:
    a, b = a.float(), b.float()
    return dict(equal=bool(torch.equal(a, b)), max_abs=(a - b).abs().max().item(),
                relative=((a - b).norm() / a.norm()).item())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(p)
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--steps", default="8", help="each generation's max_denoising_steps, or a range (3-17) drawn "
                   "from, so rows end at different steps and are refilled inside a block")
    p.add_argument("--warm-up", action="store_true", help="first a stock batch and a refill of two steps each, as "
                   "bench_refill_gpu warms up")
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--call-rows", type=int, help="the experts-batched loop's rows a decoder call (default: the "
                   "loop's CUDA_EXACT_CALL_ROWS)")
    p.add_argument("--out")
    args = p.parse_args(argv)

    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    config = model.config.get_text_config()
    emit(args.out, dict(kind="build", params=params, torch=torch.__version__, device=str(model.device),
                        attention=config._attn_implementation, experts=getattr(config, "_experts_implementation", None),
                        dtype=str(model.dtype)))
    _register_by_row()
    draw = random.Random(0)
    low, _, high = args.steps.partition("-")
    jobs = [Job([draw.randrange(107, args.vocab) for _ in range(64)], seed=i,
                steps=draw.randint(int(low), int(high or low))) for i in range(args.generations)]
    if args.warm_up:
        from benchmarks.bench_refill_gpu import refill, today

        warm = [Job(j.ids, j.seed, 2) for j in jobs[:args.rows]]
        today(model, warm, args.rows, args.device)
        refill(model, warm, args.rows, exact=False)

    # 1. determinism of stock alone
    references = [alone(model, job) for job in jobs]
    again = alone(model, jobs[0])
    emit(args.out, dict(kind="alone twice", same_block=bool(torch.equal(again[1], references[0][1])),
                        first_canvas_difference=first_difference(references[0][0], again[0], "canvas"),
                        first_entropy_difference=first_difference(references[0][0], again[0], "entropy_nats")))

    # 2. the first decoder pass
    caught = first_pass_alone(model, jobs[0])
    recorder = _StepRecorder(model, lambda s: None, lambda b: None, None, topk=0, agree=None, shift=False, pins=())
    with torch.no_grad():
        generation = _Generation(model, jobs[0], dict(max_new_tokens=256, max_denoising_steps=2), recorder)
        emit(args.out, dict(kind="first pass inputs",
                            same_canvas=bool(torch.equal(generation.canvas, caught["kwargs"]["decoder_input_ids"])),
                            self_conditioning_alone=caught["kwargs"].get("self_conditioning_logits") is None,
                            mask_alone=repr(caught["kwargs"].get("decoder_attention_mask"))[:120],
                            kwargs=sorted(caught["kwargs"])))
        for name, context in kernels():
            for exact in (True, False):
                try:
                    with context():
                        stock = model.forward(**caught["kwargs"]).logits
                        mine = _decoder_pass(model, [generation], exact=exact)
                    emit(args.out, dict(kind="first pass", kernel=name, experts_by_row=exact,
                                        stock_vs_caught=compare(caught["logits"], stock), loop_vs_stock=compare(stock, mine)))
                except RuntimeError as error:  # a kernel this device or shape cannot run
                    emit(args.out, dict(kind="first pass", kernel=name, experts_by_row=exact,
                                        error=str(error).splitlines()[0][:200]))

    # 3. whole generations through the loop
    # the loop's default calls (exact on CUDA: CUDA_EXACT_CALL_ROWS rows a call), one call for all rows, and the
    # experts batched in calls of that many rows
    calls = args.call_rows or CUDA_EXACT_CALL_ROWS
    for rows, exact, call_rows in ((1, True, None), (1, False, None), (args.rows, True, None),
                                   (args.rows, True, args.rows), (args.rows, False, None), (args.rows, False, calls)):
        steps, blocks = looped(model, jobs, rows, exact, call_rows)
        for i, (reference_steps, reference_block) in enumerate(references):
            emit(args.out, dict(kind="generation", rows=rows, experts_by_row=exact, job=i,
                                call_rows=_call_rows(model, exact, call_rows) or rows,
                                same_block=bool(torch.equal(blocks[i], reference_block)),
                                agree=(blocks[i] == reference_block).float().mean().item(),
                                first_canvas_difference=first_difference(reference_steps, steps[i], "canvas"),
                                first_entropy_difference=first_difference(reference_steps, steps[i], "entropy_nats")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
