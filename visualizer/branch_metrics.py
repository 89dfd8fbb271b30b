"""A branch's end-of-run metrics against its parent's, as the short table the compare view shows under a branch.

    rows = branch_deltas(parent, branch)   # [("mean tau_b, blocks", "0.41", "0.12", "-0.29"), ...]
"""

from __future__ import annotations

from .metrics import Undefined
from .metrics.live import live_readout
from .metrics.structure import structure_first
from .numbers import number
from .states import frame_refs
from .trace import Trace

METRICS = ("mean tau_b, blocks", "tokens per step, last block", "structure-first difference")


def run_figures(trace: Trace) -> tuple:
    """The three figures of a finished run, as the app's readout has them on its last frame."""
    refs = frame_refs(trace)
    last = live_readout(trace, len(refs) - 1, refs=refs)
    return last.run_tau_b_mean, last.tokens_per_accept_step, structure_first(trace).difference


def branch_deltas(parent: Trace, branch: Trace) -> list[tuple[str, str, str, str]]:
    """(metric, parent, branch, branch minus parent) per metric; "n/a" where a side leaves a figure undefined."""
    rows = []
    for name, a, b in zip(METRICS, run_figures(parent), run_figures(branch)):
        defined = not isinstance(a, Undefined) and not isinstance(b, Undefined)
        rows.append((name, _shown(a), _shown(b), _delta(b - a) if defined else "n/a"))
    return rows


def _shown(value) -> str:
    return "n/a" if isinstance(value, Undefined) else number(value)


def _delta(value: float) -> str:
    """A signed difference in the app's one number format: "+0.3", "-2", "0"."""
    return ("+" if value > 0 else "") + number(value)
