"""Commit-order metrics of a trace: in what order the model commits tokens, and how sure it is.

Computed from a `Trace` alone, the commit-order study's way (seeds/000_*): commit step = first
acceptance, content positions only (trailing EOS and pad cut), tie-aware Kendall tau_b per
block against a block-sequential control, a bin-size sweep, batch sizes, re-masks, entropy.

    from visualizer.metrics import run_metrics, live_readout, metrics_json
    metrics = run_metrics(trace)                    # end-of-run, per block and for the run
    readout = live_readout(trace, frame)            # the app's panel at one frame
    python -m visualizer metrics run.json           # the same as JSON (see `summary`)

Modules: `order` (tau_b and friends on arrays), `commits` (per-position data of one block),
`summary` (end-of-run metrics, JSON), `live` (per-frame readout, tau series, token details),
`stats` (prompt-clustered bootstrap and AUROC for the probe suite).
"""

from .commits import BlockCommits, block_commits, content_length
from .live import (
    Readout,
    SeriesPoint,
    block_position_details,
    block_steps_at,
    cursor_step,
    live_readout,
    live_readouts,
    position_details,
    tau_series,
)
from .order import BIN_SIZES, CONTROL_BLOCK, Undefined, bin_tau_b, block_sequential_tau_b, is_defined, tau_b
from .summary import BlockMetrics, RunMetrics, block_metrics, metrics_json, run_metrics, to_json

__all__ = [
    "BIN_SIZES",
    "CONTROL_BLOCK",
    "BlockCommits",
    "BlockMetrics",
    "Readout",
    "RunMetrics",
    "SeriesPoint",
    "Undefined",
    "bin_tau_b",
    "block_commits",
    "block_metrics",
    "block_position_details",
    "block_sequential_tau_b",
    "block_steps_at",
    "content_length",
    "cursor_step",
    "is_defined",
    "live_readout",
    "live_readouts",
    "metrics_json",
    "position_details",
    "run_metrics",
    "tau_b",
    "tau_series",
    "to_json",
]
