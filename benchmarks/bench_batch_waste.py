"""The decoder passes a batched probe wastes on rows that finished early, on the built-in model.

    python -m benchmarks.bench_batch_waste                                  # batch 1, 4, 8, 16; every batch order
    python -m benchmarks.bench_batch_waste --batch-sizes 8 --orders suite length --per-regime 8

Each run is the probe command's own runner (`cli.probe_runner.run_probe`: plan, batches, writer,
Parquet) over the six-regime suite's confirmatory prompts, into a fresh folder; the useful fraction
is the one the run writes into probe.json (`visualizer.batch_cost`: row-passes needed over row-passes
run, counted from the traces' own steps).  "oracle" is not a run: the same generations' needed
passes, sorted within each seed and cut into batches of that size, as a perfect estimate of each
row's length would group them (a row's steps change with its batch, so it is a bound, not a forecast).
"refill" is a run: the refilling loop (backends/refill.py, `--batch-order refill`), each finished row taking the next
generation at once, the batch shrinking at the end (eager), its row-passes counted by the loop.  "refill bound" is
not a run: batch 1's generations (each alone: the refilling loop's reference) in plan order, each taking the first
row that falls free, every row computing until the last generation ends, as a fixed-shape (compiled) loop would.  Generations per second are this machine's, wall clock
around `run_probe`, the model loaded once before; on a shared CPU compare rows of one call only.
"""

from __future__ import annotations

import argparse
import heapq
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "models" / "diffusiongemma-tiny-demo"


def main(argv=None) -> None:
    from visualizer.plan import ORDERS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--orders", nargs="+", default=list(ORDERS), choices=ORDERS)
    parser.add_argument("--per-regime", type=int, default=8, help="prompts a regime, both splits (the confirmatory half runs)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: comparable on a shared machine)")
    args = parser.parse_args(argv)

    import torch

    from backends.transformers_backend import TransformersBackend
    from cli.probe_runner import run_probe
    from prompts.probes import check_answer, probe_suite

    torch.set_num_threads(args.threads)
    backend = TransformersBackend(str(BUILTIN), device="cpu")
    probes = [p for p in probe_suite(per_regime=args.per_regime) if p.split == "confirmatory"]
    print(f"built-in model, {len(probes)} prompts x {args.seeds} seed(s), six regimes, {args.threads} torch thread(s)\n")
    print("| batch | order | batches | passes needed | row-passes run | useful fraction | generations/s |")
    print("|---|---|---|---|---|---|---|")
    alone = None  # batch 1's generations: the passes each needs when it runs alone
    grouped = None  # the last batched run's generations in an order that groups whole rows (the oracle's)
    for rows in args.batch_sizes:
        for order in args.orders if rows > 1 else args.orders[:1]:  # a batch of one wastes nothing, in any order
            with tempfile.TemporaryDirectory(prefix="waste-") as out:
                started = time.perf_counter()
                results = run_probe(backend, probes, seeds=args.seeds, out=out, check=check_answer, batch_size=rows,
                                    batch_order=order)
                elapsed = time.perf_counter() - started
                manifest = json.loads((Path(out) / "probe.json").read_text())
            cost = manifest["decoder_passes"]
            print(f"| {rows} | {order} | {len(manifest['plan']['batches'])} | {cost['needed']:,} | {cost['ran']:,} | "
                  f"{cost['useful_fraction']:.3f} | {len(results) / elapsed:.3f} |", flush=True)
            alone = results if rows == 1 else alone
            grouped = results if order != "refill" else grouped  # refill's generations are batch 1's
        if rows > 1 and grouped is not None:
            needed, ran = oracle(grouped, rows)
            print(f"| {rows} | oracle | – | {needed:,} | {ran:,} | {needed / ran:.3f} | – |", flush=True)
        if rows > 1 and alone is not None:
            needed, ran = refill([r.decoder_passes for r in alone], rows)
            print(f"| {rows} | refill bound | – | {needed:,} | {ran:,} | {needed / ran:.3f} | – |", flush=True)


def oracle(results, rows: int) -> tuple[int, int]:
    """Row-passes needed and run if each seed's generations were batched by the passes they needed."""
    needed = ran = 0
    for seed in sorted({r.seed for r in results}):
        passes = sorted(r.decoder_passes for r in results if r.seed == seed)
        for start in range(0, len(passes), rows):
            batch = passes[start:start + rows]
            needed, ran = needed + sum(batch), ran + max(batch) * len(batch)
    return needed, ran


def refill(passes: list[int], rows: int) -> tuple[int, int]:
    """Row-passes needed and run if `rows` rows each took the next generation (in this order) as soon as theirs ended:
    the batch runs until its last row ends, every row computing all the while."""
    free_at = [0] * rows  # the pass at which each row falls free
    for needed in passes:
        heapq.heapreplace(free_at, free_at[0] + needed)
    return sum(passes), rows * max(free_at)


if __name__ == "__main__":
    main()
