"""A probe run's results as a dataset: one Parquet row per generation, one per content position.

    OUT/results/generations.parquet   regime, prompt id, split, seed, batch plan entry, accuracy, every per-run metric
    OUT/results/positions.parquet     per content position: commit step, settle step, entropy at commit, re-masks, token,
                                      finalized step, argmax flips, commit confidence, top-2 margin at commit

pandas (`pd.read_parquet`), DuckDB and `datasets.load_dataset("parquet", data_files=...)` open
them.  The per-regime tables are computed from generations.parquet (`read_results`), so the
files and the tables cannot disagree; the traces stay beside them for replay.

A run writes one part per batch (`write_part`, atomic: write then rename) as soon as the batch
is done, so a rerun knows which batches are finished; `merge_parts` joins them in plan order.

    generation, positions = result_rows(result, metrics, trace, batch=3, row=0, batch_rows=8)
    write_part(out, 3, [generation], positions)
    merge_parts(out, batches=range(n))              # -> the two files above
    results = read_results(out)                     # ProbeResult per generation, for regime_tables
    results = read_partial_results(out)             # the same for a run still going, or stopped
Undefined values are null, and the `undefined` column says why (JSON: {column: reason}).  The
generation columns are declared once, in `visualizer.probe_schema.COLUMNS`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .files import write_atomically
from .metrics import RunMetrics, Undefined, block_commits
from .metrics.measured import measured_positions
from .metrics.trajectory import block_trajectory
from .probe_schema import COLUMNS, ProbeResult
from .trace import Trace

RESULTS = "results"
GENERATIONS = "generations.parquet"
POSITIONS = "positions.parquet"
_PARTS = "parts"

# The plan entry a generation came from: written beside the declared columns (visualizer.probe_schema).
PLAN_COLUMNS = ("batch", "batch_row", "batch_rows")
_ARROW = {"str": pa.string(), "str?": pa.string(), "int": pa.int64(), "bool": pa.bool_(), "bool?": pa.bool_(),
          "float": pa.float64()}
GENERATION_SCHEMA = pa.schema([(c.name, _ARROW[c.kind]) for c in COLUMNS] + [(n, pa.int64()) for n in PLAN_COLUMNS]
                              + [("undefined", pa.string())])


def result_rows(result: ProbeResult, metrics: RunMetrics, trace: Trace, *, batch: int, row: int,
                batch_rows: int) -> tuple[dict, list[dict]]:
    """The generations.parquet row of one generation (every declared column, its plan entry and why
    each null is undefined) and its positions.parquet rows."""
    values = {c.name: getattr(result, c.name) for c in COLUMNS}
    generation = {name: None if isinstance(v, Undefined) else v for name, v in values.items()}
    generation |= dict(zip(PLAN_COLUMNS, (batch, row, batch_rows)))
    reasons = {name: v.reason for name, v in values.items() if isinstance(v, Undefined)}
    generation["undefined"] = json.dumps(reasons)  # why each null value is undefined (JSON: {column: reason})
    positions = []
    for block in metrics.blocks:
        commits = block_commits(trace, block.block)
        n = commits.content_length
        measured = measured_positions(trace, block.block, commits.tokens, n).keep
        remasks = np.bincount(commits.remask_events[:, 1], minlength=commits.canvas)
        trajectory = trajectory_positions(trace, block.block)
        for p in range(n):
            token = int(commits.tokens[p])
            positions.append({
                "regime": result.regime, "prompt_id": result.prompt_id, "seed": result.seed,
                "block": block.block, "position": p, "token_id": token, "token": trace.piece(token),
                "thought": not bool(measured[p]), "commit_step": int(commits.commit_step[p]),
                "ever_accepted": bool(commits.ever_accepted[p]), "settle_step": int(commits.settle_step[p]),
                "commit_entropy_nats": float(commits.commit_entropy_nats[p]), "remasks": int(remasks[p]),
                **{name: values[p] for name, values in trajectory.items()},
            })
    return generation, positions


# Every step read against its end (issue 56, metrics.trajectory): positions.parquet's columns of their own.
TRAJECTORY_POSITION_COLUMNS = (("finalized_step", pa.int64()), ("argmax_flips", pa.int64()),
                               ("commit_after_finalized_steps", pa.int64()), ("commit_confidence", pa.float64()),
                               ("top2_margin_at_commit", pa.float64()))


def trajectory_positions(trace: Trace, block: int) -> dict[str, list]:
    """{column: per-position values} of TRAJECTORY_POSITION_COLUMNS for one committed block (None: not recorded)."""
    t = block_trajectory(trace, block)
    at = np.minimum(t.commit_step, t.steps_used - 1)

    def floats(values):
        return [None if isinstance(values, Undefined) or np.isnan(v) else float(v) for v in
                (values if not isinstance(values, Undefined) else [np.nan] * t.commit_step.size)]

    margin = t.top2_margin if isinstance(t.top2_margin, Undefined) else t.top2_margin[at, np.arange(at.size)]
    return {"finalized_step": t.finalized_step.tolist(), "argmax_flips": t.argmax_flips.tolist(),
            "commit_after_finalized_steps": t.commit_after_finalized_steps.tolist(),
            "commit_confidence": floats(t.commit_confidence), "top2_margin_at_commit": floats(margin)}


# ---- files ---------------------------------------------------------------------------------------
def part_path(out, batch: int, kind: str = GENERATIONS) -> Path:
    return Path(out) / RESULTS / _PARTS / f"batch-{batch:06d}-{kind}"


def write_part(out, batch: int, generations: list[dict], positions: list[dict]) -> None:
    """The rows of one finished batch; its generations part is written last: it marks the batch done."""
    _write_atomic(pa.Table.from_pylist(positions, schema=_schema(positions, POSITIONS)), part_path(out, batch, POSITIONS))
    _write_atomic(pa.Table.from_pylist(generations, schema=GENERATION_SCHEMA), part_path(out, batch, GENERATIONS))


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
    return rows_to_results(pq.read_table(Path(out) / RESULTS / GENERATIONS).to_pylist())


def read_partial_results(out) -> list[ProbeResult]:
    """The generations of a run in progress or stopped: the merged file if there is one, else every
    finished batch's part, in plan order."""
    merged = Path(out) / RESULTS / GENERATIONS
    if merged.exists():
        return read_results(out)
    parts = sorted((Path(out) / RESULTS / _PARTS).glob(f"batch-*-{GENERATIONS}"))
    return rows_to_results([row for part in parts for row in pq.read_table(part).to_pylist()])


def rows_to_results(rows: list[dict]) -> list[ProbeResult]:
    """Parquet rows as ProbeResults: a null float is Undefined with the reason the row recorded."""
    def value(row, column):
        v = row.get(column.name)
        if column.kind == "float" and (v is None or (isinstance(v, float) and np.isnan(v))):
            return Undefined(json.loads(row.get("undefined") or "{}").get(column.name,
                                                                         f"{column.name} undefined in this generation"))
        return v

    return [ProbeResult(**{c.name: value(r, c) for c in COLUMNS}) for r in rows]


def _schema(rows: list[dict], kind: str):
    """An empty part still needs its columns (a batch whose answers were all empty has no positions)."""
    if rows or kind != POSITIONS:
        return None
    return pa.schema([("regime", pa.string()), ("prompt_id", pa.string()), ("seed", pa.int64()), ("block", pa.int64()),
                      ("position", pa.int64()), ("token_id", pa.int64()), ("token", pa.string()), ("thought", pa.bool_()),
                      ("commit_step", pa.int64()), ("ever_accepted", pa.bool_()), ("settle_step", pa.int64()),
                      ("commit_entropy_nats", pa.float64()), ("remasks", pa.int64()), *TRAJECTORY_POSITION_COLUMNS])


def _write_atomic(table, path: Path) -> Path:
    """A Parquet file written whole or not at all (a rerun trusts every part it finds)."""
    return write_atomically(path, lambda partial: pq.write_table(table, partial))

