"""A 15,000-generation study's projected GPU time on one H200, today's batching against refilling finished rows.

    python -m benchmarks.project_study_time                 # steps drawn uniformly from 3 to 17, as the study saw
    python -m benchmarks.project_study_time --measured refill.jsonl   # from bench_refill_gpu's measured runs

With `--measured`, the projection is each variant's generations a second as bench_refill_gpu measured them on the
GPU (eager, the study's step counts forced, the refilling loop itself run), scaled to `--generations`; without,
it is the arithmetic below.

Arithmetic, not a run: the seconds a compiled decoder pass takes at each row count were measured on one H200 at
the real shape (benchmarks/bench_batch_rows.py, capture with top-5 and the shift: one 256-token block of 48 passes,
BENCHMARKS.md "`--batch-size auto` on an H200: 8, 12 and 16 rows"); each generation's steps are drawn, since random
weights never stop. Today a batch runs until its slowest row ends (transformers' `torch.all(finished_denoising)`);
refilling, each row takes the next generation as soon as its own ends (benchmarks.bench_batch_waste.refill). The
probe's runner adds about 1.2x over these passes at 8 rows (1.38 against 1.70 generations a second, issue 57).
"""

from __future__ import annotations

import argparse
import random

from benchmarks.bench_batch_waste import refill

PASS_SECONDS = {8: 4.69 / 48, 12: 6.31 / 48, 16: 8.35 / 48}  # H200, compiled, captured, median of 2 (2026-12-02)


def project_measured(path: str, generations: int) -> None:
    """One table row per measured run: its generations a second, the study's minutes at that rate, and its ratio
    to today's stock batches at the same row count."""
    import json

    with open(path) as f:
        runs = [row for row in map(json.loads, f) if row.get("kind") == "run"]
    today = {run["rows"]: run["gen_per_s"] for run in runs if run["variant"] == "today"}
    print(f"{generations:,} generations at the rates measured in {path}\n")
    print("| rows | variant | useful | generations/s | minutes | against today |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        ratio = run["gen_per_s"] / today[run["rows"]] if run["rows"] in today else float("nan")
        print(f"| {run['rows']} | {run['variant']} | {run['useful']:.3f} | {run['gen_per_s']:.2f} | "
              f"{generations / run['gen_per_s'] / 60:.0f} | {ratio:.2f}x |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=15_000)
    parser.add_argument("--steps", default="3-17", help="uniform range of the steps a generation needs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measured", help="bench_refill_gpu's JSON lines: project from its measured runs")
    args = parser.parse_args(argv)
    if args.measured:
        return project_measured(args.measured, args.generations)
    low, high = (int(n) for n in args.steps.split("-"))
    draw = random.Random(args.seed)
    steps = [draw.randint(low, high) for _ in range(args.generations)]
    print(f"{args.generations:,} generations, steps uniform {low}-{high} (mean {sum(steps) / len(steps):.2f}), "
          f"one H200's measured compiled pass times\n")
    print("| rows | s a pass | today: useful | today: minutes | refill: useful | refill: minutes | today / refill |")
    print("|---|---|---|---|---|---|---|")
    for rows, seconds in PASS_SECONDS.items():
        batches = [steps[i:i + rows] for i in range(0, len(steps), rows)]
        today = sum(max(b) * rows for b in batches)  # row-passes: every row runs its batch's slowest steps
        needed, refilled = refill(steps, rows)
        today_min, refill_min = today / rows * seconds / 60, refilled / rows * seconds / 60
        print(f"| {rows} | {seconds:.4f} | {needed / today:.3f} | {today_min:.1f} | {needed / refilled:.3f} | "
              f"{refill_min:.1f} | {today_min / refill_min:.2f} |")


if __name__ == "__main__":
    main()
