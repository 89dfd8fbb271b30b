"""Which batch size gives the most generations a second compiled, against what `--batch-size auto` picks (issue 57).

    python -m benchmarks.bench_batch_rows --rows 8,16,12 --reps 2        # on the GPU machine, real shape, compiled
    python -m benchmarks.bench_batch_rows --device cpu --layers 2 --experts 8 --vocab 4096 --rows 2,3 --reps 1 --eager   # dry run

The model is `bench_capture_fullshape`'s (the published shape, random bf16 weights: every block runs all 48
steps). First it prints what `backends.memory.rows_that_fit` picks on this GPU with the model loaded (compiled,
with and without the shift), as the probe does before its first batch. Then for each row count, in the order
given (the first compile is the longest; a second shape recompiles once with dynamic shapes, later ones reuse
it), one 256-token block of B prompts of 64 tokens: a first captured run (compiling, and the identity with a
stock run of the same seed), then stock and captured runs alternating `--reps` times. The capture records as
the probe does by default (top-5 candidates, the shift). Generations a second = B / the captured run's seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import types

import torch

from backends.memory import rows_that_fit
from benchmarks.bench_capture_fullshape import REAL_SHAPE, build, full_shape_config
from benchmarks.bench_layers import paired_ratios, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", default="8,16,12", help="batch sizes, in the order they run")
    parser.add_argument("--reps", type=int, default=2, help="stock and captured runs of each size, alternating")
    parser.add_argument("--layers", type=int, default=REAL_SHAPE["num_hidden_layers"])
    parser.add_argument("--experts", type=int, default=REAL_SHAPE["num_experts"])
    parser.add_argument("--vocab", type=int, default=REAL_SHAPE["vocab_size"], help="smaller only for a dry run")
    parser.add_argument("--eager", action="store_true", help="no static cache or torch.compile (the CPU dry run)")
    args = parser.parse_args(argv)
    cuda = args.device.startswith("cuda")
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    loaded = types.SimpleNamespace(model=model)  # what rows_that_fit reads of a backend
    auto = {shift: rows_that_fit(loaded, shift=shift, compiled=not args.eager) for shift in (True, False)}
    print(f"{name}, {params / 1e9:.2f} B parameters; --batch-size auto picks {auto[True]} rows with the shift, "
          f"{auto[False]} without", flush=True)
    common = dict(compiled=not args.eager, device=args.device, layers=(), steps=48)
    rows = []
    for size in (int(n) for n in args.rows.split(",")):
        prompt = torch.randint(107, args.vocab, (size, 64), generator=torch.Generator().manual_seed(size)).to(args.device)
        started = time.perf_counter()
        first = run(model, prompt, seed=11, variant="captured+shift", **common)
        first_s = time.perf_counter() - started
        same = torch.equal(first["sequences"], run(model, prompt, seed=11, variant="stock", **common)["sequences"])
        print(f"{size} rows: first captured run {first_s:.1f} s, identical to stock: {same}", flush=True)
        runs = {"stock": [], "captured+shift": []}
        for rep in range(args.reps):
            for variant in runs if rep % 2 == 0 else list(runs)[::-1]:
                runs[variant].append(run(model, prompt, seed=rep, variant=variant, **common))
                last = runs[variant][-1]  # printed as it comes: a run stopped by a time limit still gives its figures
                print(f"{size} rows {variant} rep {rep}: {last['seconds']:.2f} s, {size / last['seconds']:.2f} generations/s, "
                      f"peak {last['peak']:.1f} GiB", flush=True)
        seconds = statistics.median(r["seconds"] for r in runs["captured+shift"])
        rows.append(dict(size=size, first=first_s, same=same, stock=statistics.median(r["seconds"] for r in runs["stock"]),
                         seconds=seconds, paired=paired_ratios(runs["captured+shift"], runs["stock"])[0],
                         rate=size / seconds, peak=max(r["peak"] for r in runs["captured+shift"])))
    print(f"\n{name}, {'eager' if args.eager else 'compiled'}, prompt 64, one 256-token block of 48 steps a generation, "
          f"capture with top-5 and the shift, {args.reps} alternating repetitions; auto: {auto[True]} rows\n")
    print("| rows | first run s | stock s | captured s | captured x stock (paired) | generations/s | peak GiB | identical |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: r["size"]):
        print(f"| {r['size']} | {r['first']:.1f} | {r['stock']:.2f} | {r['seconds']:.2f} | {r['paired']:.3f} | "
              f"{r['rate']:.2f} | {r['peak']:.1f} | {r['same']} |")
    best = max(rows, key=lambda r: r["rate"])
    print(f"\nmost generations a second: {best['size']} rows ({best['rate']:.2f}/s)")
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
