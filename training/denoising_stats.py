"""Commit-order numbers of one generation, from the backend's records (numpy + scipy only).

Per block (canvas): the first-acceptance step of every content position (positions before the
block's first EOS; the trailing EOS run is cut, since it commits first and would swamp the
order, seeds/000_*), Kendall tau_b of that step against the position (scipy, variant "b"),
tokens per step, the largest number of positions first accepted at one step, and how often an
accepted position went back to noise.  A position never accepted is committed from the argmax
at the end: it counts as accepted after the last step.

    run = collect_run(backend.generate(prompt, settings))
    stats = block_stats(run.blocks[0])        # {"tau_b": 0.41, "tokens_per_step": 9.5, ...}
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau

from visualizer.records import BlockRecord, RunEnd, StepRecord


@dataclass(frozen=True)
class BlockSteps:
    accepted: np.ndarray  # (steps, canvas) bool: the accepted mask after each step
    tokens: np.ndarray  # (canvas,) int32: committed ids
    eos_position: int | None
    steps_used: int
    stop_reason: str


@dataclass(frozen=True)
class Run:
    text: str
    finish_reason: str
    blocks: list[BlockSteps]
    wall_time_s: float


def collect_run(records) -> Run:
    """Drain a backend's record stream into per-block accepted masks and the final text."""
    steps: list[np.ndarray] = []
    blocks: list[BlockSteps] = []
    for record in records:
        if isinstance(record, StepRecord):
            steps.append(np.asarray(record.accepted, bool))
        elif isinstance(record, BlockRecord):
            accepted = np.stack(steps) if steps else np.zeros((0, len(record.tokens)), bool)
            blocks.append(BlockSteps(accepted, np.asarray(record.tokens), record.eos_position, record.steps_used,
                                     record.stop_reason))
            steps = []
        elif isinstance(record, RunEnd):
            return Run(record.text, record.finish_reason, blocks, record.wall_time_s)
    raise RuntimeError("the record stream ended without a RunEnd")


def first_acceptance(accepted: np.ndarray) -> np.ndarray:
    """(canvas,) int: the first step each position was accepted; steps_used when it never was."""
    ever = accepted.any(axis=0)
    return np.where(ever, accepted.argmax(axis=0), accepted.shape[0])


def block_stats(block: BlockSteps) -> dict:
    steps_used = block.accepted.shape[0]
    content = block.eos_position if block.eos_position is not None else block.accepted.shape[1]
    first = first_acceptance(block.accepted)[:content]
    if content >= 2 and len(np.unique(first)) > 1:
        tau_b = float(kendalltau(first, np.arange(content), variant="b").statistic)
    else:
        tau_b = float("nan")  # tau is undefined for a constant ranking (everything at one step)
    new_per_step = np.bincount(first, minlength=steps_used + 1)
    accepted = block.accepted[:, :content]
    return {
        "steps_used": steps_used,
        "content_tokens": int(content),
        "tokens_per_step": content / steps_used if steps_used else float("nan"),
        "max_new_per_step": int(new_per_step.max()) if content else 0,
        "steps_with_new": int((new_per_step[:steps_used] > 0).sum()),
        "tau_b": tau_b,
        "remasked": int((accepted[:-1] & ~accepted[1:]).sum()),
        "never_accepted": int(new_per_step[steps_used]),
        "stop_reason": block.stop_reason,
    }
