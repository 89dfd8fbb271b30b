"""A probe run's results as a dataset: one Parquet row per generation, one per content position.

    OUT/results/generations.parquet   regime, prompt id, split, seed, batch plan entry, accuracy, every per-run metric
    OUT/results/positions.parquet     per content position: commit step, settle step, entropy at commit, re-masks, token

pandas (`pd.read_parquet`), DuckDB and `datasets.load_dataset("parquet", data_files=...)` open
them.  The per-regime tables are computed from generations.parquet (`read_results`), so the
files and the tables cannot disagree; the traces stay beside them for replay.

A run writes one part per batch (`write_part`, atomic: write then rename) as soon as the batch
is done, so a rerun knows which batches are finished; `merge_parts` joins them in plan order.

    generation, positions = result_rows(result, metrics, trace, batch=3, row=0, batch_rows=8)
    write_part(out, 3, [generation], positions)
    merge_parts(out, batches=range(n))              # -> the two files above
    results = read_results(out)                     # ProbeResult per generation, for regime_tables
Undefined values are null, and the `undefined` column says why (JSON: {column: reason}).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .metrics import BIN_SIZES, RunMetrics, Undefined, block_commits
from .metrics.measured import measured_positions
from .probe import ProbeResult
from .trace import Trace

RESULTS = "results"
GENERATIONS = "generations.parquet"
POSITIONS = "positions.parquet"
_PARTS = "parts"

# Per-run metrics copied from RunMetrics as they are (ints, floats or Undefined -> null).
_RESULT_VALUES = ("tau_b", "control_tau_b", "mean_commit_entropy_nats", "structure_difference", "structure_auroc")
RUN_METRICS = (
    "content_tokens", "thought_tokens", "measured_tokens", "excluded_eos", "excluded_pad", "tau_b_blocks",
    "tau_b_raw_mean", "tokens_per_accept_step", "committed_at_finalize", "same_step_fraction", "steps_used",
    "step_budget", "remask_events", "unfinished_blocks",
)


def result_rows(result: ProbeResult, metrics: RunMetrics, trace: Trace, *, batch: int, row: int,
                batch_rows: int) -> tuple[dict, list[dict]]:
    """The generations.parquet row of one generation and its positions.parquet rows."""
    generation = {
        "regime": result.regime, "prompt_id": result.prompt_id, "split": result.split, "seed": result.seed,
        "batch": batch, "batch_row": row, "batch_rows": batch_rows,  # the plan entry this came from
        "trace_file": result.trace_file, "finish_reason": result.finish_reason, "correct": result.correct,
        "tau_b": _value(result.tau_b), "control_tau_b": _value(result.control_tau_b),
        "mean_commit_entropy_nats": _value(result.mean_commit_entropy_nats), "monotone": result.monotone,
        "structure_difference": _value(result.structure_difference),
        "structure_auroc": _value(result.structure_auroc),
        **{f"bin_tau_b_{size}": _value(result.bin_tau_b[size]) for size in BIN_SIZES},
        **{name: _value(getattr(metrics, name)) for name in RUN_METRICS},
    }
    reasons = {name: value.reason for name, value in
               [*((n, getattr(result, n)) for n in _RESULT_VALUES), *((n, getattr(metrics, n)) for n in RUN_METRICS),
                *((f"bin_tau_b_{size}", result.bin_tau_b[size]) for size in BIN_SIZES)] if isinstance(value, Undefined)}
    generation["undefined"] = json.dumps(reasons)  # why each null value is undefined (JSON: {column: reason})
    positions = []
    for block in metrics.blocks:
        commits = block_commits(trace, block.block)
        n = commits.content_length
        measured = measured_positions(trace, block.block, commits.tokens, n).keep
        remasks = np.bincount(commits.remask_events[:, 1], minlength=commits.canvas)
        for p in range(n):
            token = int(commits.tokens[p])
            positions.append({
                "regime": result.regime, "prompt_id": result.prompt_id, "seed": result.seed,
                "block": block.block, "position": p, "token_id": token, "token": trace.piece(token),
                "thought": not bool(measured[p]), "commit_step": int(commits.commit_step[p]),
                "ever_accepted": bool(commits.ever_accepted[p]), "settle_step": int(commits.settle_step[p]),
                "commit_entropy_nats": float(commits.commit_entropy_nats[p]), "remasks": int(remasks[p]),
            })
    return generation, positions


def _value(value):
    return None if isinstance(value, Undefined) else value


# ---- files ---------------------------------------------------------------------------------------
def part_path(out, batch: int, kind: str = GENERATIONS) -> Path:
    return Path(out) / RESULTS / _PARTS / f"batch-{batch:06d}-{kind}"


def write_part(out, batch: int, generations: list[dict], positions: list[dict]) -> None:
    """The rows of one finished batch; its generations part is written last: it marks the batch done."""
    _write_atomic(pa.Table.from_pylist(positions, schema=_schema(positions, POSITIONS)), part_path(out, batch, POSITIONS))
    _write_atomic(pa.Table.from_pylist(generations), part_path(out, batch, GENERATIONS))


def part_done(out, batch: int) -> bool:
    return part_path(out, batch, GENERATIONS).exists()


def merge_parts(out, batches) -> tuple[Path, Path]:
    """OUT/results/generations.parquet and positions.parquet from the parts of `batches`, in that order."""
    folder = Path(out) / RESULTS
    paths = []
    for kind in (GENERATIONS, POSITIONS):
        tables = [pq.read_table(part_path(out, b, kind)) for b in batches]
        tables = [t for t in tables if t.num_rows] or tables[:1]
        merged = pa.concat_tables(tables, promote_options="default")
        paths.append(_write_atomic(merged, folder / kind))
    return paths[0], paths[1]


def read_results(out) -> list[ProbeResult]:
    """Every generation of OUT/results/generations.parquet as a ProbeResult (null -> Undefined)."""
    rows = pq.read_table(Path(out) / RESULTS / GENERATIONS).to_pylist()

    def value(row, name):
        v = row[name]
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return Undefined(json.loads(row.get("undefined") or "{}").get(name, f"{name} undefined in this generation"))
        return v

    return [
        ProbeResult(
            regime=r["regime"], prompt_id=r["prompt_id"], split=r["split"], seed=r["seed"],
            trace_file=r["trace_file"], finish_reason=r["finish_reason"], content_tokens=r["content_tokens"],
            tau_b=value(r, "tau_b"), control_tau_b=value(r, "control_tau_b"),
            bin_tau_b={size: value(r, f"bin_tau_b_{size}") for size in BIN_SIZES},
            tokens_per_accept_step=value(r, "tokens_per_accept_step"),
            same_step_fraction=value(r, "same_step_fraction"),
            mean_commit_entropy_nats=value(r, "mean_commit_entropy_nats"), steps_used=r["steps_used"],
            monotone=r["monotone"], correct=r["correct"], structure_difference=value(r, "structure_difference"),
            structure_auroc=value(r, "structure_auroc"),
        )
        for r in rows
    ]


def _schema(rows: list[dict], kind: str):
    """An empty part still needs its columns (a batch whose answers were all empty has no positions)."""
    if rows or kind != POSITIONS:
        return None
    return pa.schema([("regime", pa.string()), ("prompt_id", pa.string()), ("seed", pa.int64()), ("block", pa.int64()),
                      ("position", pa.int64()), ("token_id", pa.int64()), ("token", pa.string()), ("thought", pa.bool_()),
                      ("commit_step", pa.int64()), ("ever_accepted", pa.bool_()), ("settle_step", pa.int64()),
                      ("commit_entropy_nats", pa.float64()), ("remasks", pa.int64())])


def _write_atomic(table, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    pq.write_table(table, partial)
    os.replace(partial, path)
    return path

