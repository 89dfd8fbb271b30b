"""--kl-to-final at the real 26B-A4B shape (random weights): its cost per step and its memory per row.

    python -m benchmarks.bench_kl_to_final                           # on the GPU machine: eager, batch 1 and 2
    python -m benchmarks.bench_kl_to_final --device cpu --layers 2 --experts 8 --vocab 4096 --reps 1   # dry run

The model is `bench_capture_fullshape.build` (the published shape, random bf16 weights).  For each batch size,
"record" is the capture as a run records by default (top-5 candidates, the shift) and "kl-to-final" the same
run as the transformers backend makes it with `--kl-to-final` (backends/kl_to_final.py): a first pass that
keeps each block's final distribution, then the recorded pass with the KL.  Both are seeded alike, alternate
`--reps` times, and the table prints the median seconds of each, their paired ratio (kl-to-final / record,
each repetition's pair), ms per recorded step, and the peak GPU memory of each; the extra peak per row is
(peak with - peak without) / rows.  Checked first: the second pass commits exactly the first pass's tokens,
the run's sequences equal the plain record's, and every block's last step has a KL of exactly 0.
Random weights never converge early, so one block runs all its 48 steps.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from backends.capture import capture_steps
from backends.kl_to_final import KlToFinal
from benchmarks.bench_capture_fullshape import REAL_SHAPE, build, full_shape_config, sync

TOPK = 5


def record(model, prompt, *, seed: int, device: str, kl: bool) -> dict:
    """One run as the backend makes it: seconds, the recorded steps, sequences and peak memory."""
    steps = []
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    sync(device)
    started = time.perf_counter()
    to_final, blocks = None, []
    if kl:  # pass 1: nothing recorded but each block's final distribution (TransformersBackend._final_distributions)
        to_final = KlToFinal()
        torch.manual_seed(seed)
        with capture_steps(model, lambda s: None, blocks.append, to_final=to_final):
            model.generate(prompt, max_new_tokens=256)
        to_final = to_final.second_pass()
    torch.manual_seed(seed)
    seen = []
    with capture_steps(model, steps.append, seen.append, topk=TOPK, shift=True, to_final=to_final):
        out = model.generate(prompt, max_new_tokens=256)
    sync(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    same = all(np.array_equal(a.tokens, b.tokens) for a, b in zip(blocks, seen)) if kl else True
    return dict(seconds=seconds, steps=steps, sequences=out.sequences.cpu(), peak_gib=peak, passes_agree=same)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", default="1,2", help="rows per generate call")
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=REAL_SHAPE["num_hidden_layers"])
    parser.add_argument("--experts", type=int, default=REAL_SHAPE["num_experts"])
    parser.add_argument("--vocab", type=int, default=REAL_SHAPE["vocab_size"], help="smaller only for a dry run")
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    started = time.perf_counter()
    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    print(f"device: {name}; built {params / 1e9:.2f} B parameters in {time.perf_counter() - started:.0f} s", flush=True)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        prompt = torch.randint(107, args.vocab, (batch, args.prompt_length), generator=torch.Generator().manual_seed(batch))
        prompt = prompt.to(args.device)
        plain, with_kl = record(model, prompt, seed=11, device=args.device, kl=False), record(model, prompt, seed=11, device=args.device, kl=True)
        last = [s for s in with_kl["steps"] if s.step == max(t.step for t in with_kl["steps"] if t.row == s.row and t.block == s.block)]
        print(f"batch {batch}: passes agree {with_kl['passes_agree']}; sequences equal the plain record's "
              f"{torch.equal(plain['sequences'], with_kl['sequences'])}; KL at each block's last step exactly 0 "
              f"{all(np.all(s.kl_to_final_nats == 0) for s in last)}; KL at step 1 up to "
              f"{max(float(s.kl_to_final_nats.max()) for s in with_kl['steps'] if s.step == 0):.3g} nats", flush=True)
        runs = {"record": [], "kl-to-final": []}
        for rep in range(args.reps):
            order = ("record", "kl-to-final") if rep % 2 == 0 else ("kl-to-final", "record")
            for variant in order:
                runs[variant].append(record(model, prompt, seed=11, device=args.device, kl=variant == "kl-to-final"))
        ratios = [k["seconds"] / r["seconds"] for r, k in zip(runs["record"], runs["kl-to-final"])]
        for variant, done in runs.items():
            seconds = statistics.median(r["seconds"] for r in done)
            steps = len(done[0]["steps"]) // batch
            rows.append((batch, variant, seconds, seconds / steps * 1000, done[0]["peak_gib"]))
        rows.append((batch, "ratio", statistics.median(ratios), min(ratios), max(ratios)))
    print("| rows | variant | median s | ms per recorded step | peak GiB |\n|---|---|---|---|---|")
    for batch, variant, a, b, c in rows:
        if variant == "ratio":
            print(f"| {batch} | kl-to-final / record (paired) | {a:.3f}x | min {b:.3f}x, max {c:.3f}x | |")
        else:
            print(f"| {batch} | {variant} | {a:.2f} | {b:.1f} | {c:.2f} |")
    peaks = {(b, v): c for b, v, a, _, c in rows if v != "ratio"}
    for batch in sorted({b for b, _ in peaks}):
        print(f"rows {batch}: extra peak {peaks[(batch, 'kl-to-final')] - peaks[(batch, 'record')]:.2f} GiB "
              f"({(peaks[(batch, 'kl-to-final')] - peaks[(batch, 'record')]) / batch:.2f} GiB a row)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
