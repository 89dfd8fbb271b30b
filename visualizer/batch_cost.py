"""What a batch cost against what its rows needed: decoder passes, counted from the traces.

    cost = batch_cost(traces)                        # every row the model ran (compiled fillers too)
    cost.passes, cost.rows                           # the passes the batch ran, the rows each computed
    useful_fraction(needed=199, ran=424)             # 0.47: the built-in model's six regimes at batch 8

transformers runs a batch's rows in lock step: a block's step loop ends only when every row has
finished denoising (`torch.all(finished_denoising)` in `generation_diffusion_gemma.py`), and
generation only when every row has finished, so a row that is done is computed until the slowest
row of its batch ends.  A row *needed* the steps its own blocks used (transformers'
`decoder_forward_passes`); its batch *ran*, in each block, as many steps as its slowest row there.
The useful fraction of a batch is the row-passes needed over the row-passes run (rows x passes).

A batch of the refilling loop (backends/refill.py) changes width at every pass: its row-passes are counted by the
loop itself as it runs them (`refilled_cost`: recorded as that many passes of one row, so rows x passes holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


# The generations.parquet columns a run's cost is summed from (visualizer.probe_schema declares the last three)
COST_COLUMNS = ("batch", "decoder_passes", "batch_decoder_passes", "batch_rows_run")


@dataclass(frozen=True)
class BatchCost:
    passes: int  # decoder passes the batch ran (every row is computed at each)
    rows: int  # rows the model ran, a compiled run's filler rows included


def passes_needed(trace) -> int:
    """The decoder passes this row needed: the steps of every block it generated."""
    return sum(block.steps_used for block in trace.blocks)


def batch_cost(traces: Sequence) -> BatchCost:
    """The cost of the batch these traces (every row the model ran, in any order) were generated in."""
    blocks = max((len(t.blocks) for t in traces), default=0)
    passes = sum(max(t.blocks[k].steps_used for t in traces if len(t.blocks) > k) for k in range(blocks))
    return BatchCost(passes, len(traces))


def refilled_cost(row_passes: int) -> BatchCost:
    """The cost of a refilled batch: the row-passes its loop ran, as passes of one row."""
    return BatchCost(row_passes, 1)


def useful_fraction(*, needed: int, ran: int) -> float | None:
    """Row-passes needed over row-passes run; None when nothing ran."""
    return needed / ran if ran else None


def cost_summary(rows: Iterable[dict]) -> dict:
    """{needed, ran, useful_fraction, batches: [...]} of a run's generations.parquet rows (the columns
    `batch`, `decoder_passes`, `batch_decoder_passes`, `batch_rows_run`; a row without them, written
    before they existed, is left out)."""
    by_batch: dict[int, dict] = {}
    for r in rows:
        if any(r.get(name) is None for name in COST_COLUMNS):
            continue
        entry = by_batch.setdefault(int(r["batch"]), {"batch": int(r["batch"]), "needed": 0,
                                                      "ran": int(r["batch_decoder_passes"]) * int(r["batch_rows_run"])})
        entry["needed"] += int(r["decoder_passes"])
    batches = [by_batch[b] | {"useful_fraction": useful_fraction(needed=by_batch[b]["needed"], ran=by_batch[b]["ran"])}
               for b in sorted(by_batch)]
    needed, ran = sum(b["needed"] for b in batches), sum(b["ran"] for b in batches)
    return {"needed": needed, "ran": ran, "useful_fraction": useful_fraction(needed=needed, ran=ran), "batches": batches}


def describe(summary: dict) -> str:
    """One line for the command's output: the useful fraction and what it counts."""
    fraction = summary["useful_fraction"]
    shown = "–" if fraction is None else f"{fraction:.2f}"
    return (f"useful fraction {shown}: the rows needed {summary['needed']:,} decoder passes, "
            f"their batches ran {summary['ran']:,} (rows x passes)")
