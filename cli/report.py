"""`probe-report` redraws a probe run's figures from its results alone, finished or not.

    python -m visualizer probe-report runs/probe              # OUT/tau_b.svg|png, OUT/tokens_per_step.svg|png
    python -m visualizer probe-report runs/samplers           # a --samplers run: each sampler's, and side by side

It reads OUT/results/generations.parquet (or, for a run still going or stopped, every finished
batch's part), never the traces or the model, so it runs anywhere the folder is.  The `probe`
command draws the same figures when it writes its tables (`draw_figures`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from visualizer.metrics.stats import N_RESAMPLES
from visualizer.probe_tables import regime_tables
from visualizer.results import GENERATIONS, RESULTS, read_partial_results
from visualizer.study_figures import write_figures

from .common import CliError

SIDE_BY_SIDE = "samplers-"  # the prefix of a --samplers run's side-by-side figures, in OUT


def add_probe_report_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "probe-report",
        help="redraw a probe run's figures (tau_b, tokens per accept step) from its Parquet results",
        description="Draw the study's figures of a probe run, finished or partial, as SVG and PNG into its folder: "
        "tau_b per regime with its clustered CI and the block-sequential control, and tokens per accept step; "
        "for a --samplers run also the samplers side by side (samplers-*.svg).",
    )
    parser.add_argument("out", help="the --out folder of a probe run")
    parser.add_argument("--include-exploratory", action="store_true", help="also report the exploratory prompts")
    parser.add_argument("--bootstrap", type=int, default=N_RESAMPLES, help=f"bootstrap resamples (default {N_RESAMPLES})")
    parser.set_defaults(run=probe_report_command)


def probe_report_command(args) -> int:
    if args.bootstrap < 1:
        raise CliError("--bootstrap must be at least 1")
    out = Path(args.out)
    runs = probe_runs(out)
    if not runs:
        raise CliError(f"{out} holds no probe results ({RESULTS}/{GENERATIONS} or finished batches); "
                       f"a probe run writes them: python -m visualizer probe --out {out}")
    tables = {}
    for name, folder in runs.items():
        results = read_partial_results(folder)
        tables[name] = regime_tables(results, include_exploratory=args.include_exploratory, n_resamples=args.bootstrap)
        print(f"{folder}: {len(results)} generations", file=sys.stderr)
    for path in draw_figures(out, tables, include_exploratory=args.include_exploratory):
        print(path)
    return 0


def draw_figures(out: Path, tables: dict[str, list[dict]], *, include_exploratory: bool) -> list[Path]:
    """One run ({"": tables}): its figures in OUT.  Several samplers ({name: tables}): each one's
    figures in OUT/<name>/ and the side-by-side ones in OUT."""
    split = "confirmatory + exploratory" if include_exploratory else "confirmatory"
    if list(tables) == [""]:
        return write_figures(out, tables, split=split)
    written = []
    for name, rows in tables.items():
        written += write_figures(out / _safe(name), {"": rows}, split=split)
    return written + write_figures(out, tables, prefix=SIDE_BY_SIDE, split=split)


def probe_runs(out: Path) -> dict[str, Path]:
    """{"": OUT} for a run with results; {sampler: OUT/<sampler>} for a --samplers run; {} for neither."""
    if _has_results(out):
        return {"": out}
    if not out.is_dir():
        return {}
    return {folder.name: folder for folder in sorted(out.iterdir()) if folder.is_dir() and _has_results(folder)}


def _has_results(folder: Path) -> bool:
    results = folder / RESULTS
    return (results / GENERATIONS).exists() or any((results / "parts").glob(f"*-{GENERATIONS}"))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))
