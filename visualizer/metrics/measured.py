"""Which content positions the commit-order figures measure: the answer, or the answer and its thoughts.

The study's figures are about the order in which the model writes its answer.  With the thinking
channel on, blocks start with thought tokens ("<|channel>thought ... <channel|>", see
`visualizer.thinking`); they are measured only when asked (`include_thought`), and every figure
says which was measured.  Excluding them keeps the answer's positions in their order, so tau_b
and the other rank figures are those of the answer as written; bins and the block-sequential
control are taken over the measured positions.

    measured = measured_positions(trace, block, tokens, content_length)
    commit = commit_step[:content_length][measured.keep]

Pinned positions (`record --pin`, `RunStart.pins`) are never measured: the run placed them before the
first step and held them accepted, so their commit step is the intervention's, not the model's. They
are left out like thought tokens (the other positions keep their order), always, and the label says
how many ("(3 pinned tokens excluded)").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..thinking import block_thought_row
from ..trace import Trace

ANSWER_ONLY = "answer tokens only"
WITH_THOUGHTS = "answer and thought tokens"


@dataclass(frozen=True, eq=False)
class Measured:
    keep: np.ndarray  # (content_length,) bool: the content positions measured
    thought_tokens: int  # content positions in the thinking channel (measured or not)
    include_thought: bool
    pinned_tokens: int = 0  # content positions pinned by the run (never measured)

    @property
    def positions(self) -> np.ndarray:
        return np.flatnonzero(self.keep)

    @property
    def count(self) -> int:
        return int(np.count_nonzero(self.keep))

    @property
    def label(self) -> str:
        return measured_label(self.include_thought, self.thought_tokens, self.pinned_tokens)


def pinned_row(trace: Trace, block: int) -> np.ndarray:
    """(canvas,) bool: the positions of `block` the run pinned (only the first block holds pins)."""
    row = np.zeros(trace.canvas_length, dtype=bool)
    if block == 0 and trace.start is not None and trace.start.pins:
        row[[position for position, _ in trace.start.pins]] = True
    return row


def measured_positions(trace: Trace, block: int, tokens, content_length: int, *, include_thought: bool = False) -> Measured:
    """The content positions of `block` (holding `tokens`) that the figures measure."""
    thought = block_thought_row(trace, block, tokens)[:content_length]
    pinned = pinned_row(trace, block)[:content_length]
    keep = np.ones(content_length, dtype=bool) if include_thought else ~thought
    return Measured(keep & ~pinned, int(np.count_nonzero(thought)), include_thought, int(np.count_nonzero(pinned)))


def measured_label(include_thought: bool, thought_tokens: int, pinned_tokens: int = 0) -> str:
    """What was measured, in words: "answer tokens only (12 thought tokens excluded)"."""
    pins = f" ({pinned_tokens} pinned tokens excluded)" if pinned_tokens else ""
    if include_thought:
        return WITH_THOUGHTS + (f" ({thought_tokens} thought)" if thought_tokens else "") + pins
    return ANSWER_ONLY + (f" ({thought_tokens} thought tokens excluded)" if thought_tokens else "") + pins
