"""States: what every canvas position is at every frame of a trace.

A trace is shown as a sequence of frames: one per step record (the canvas after that step) and
one per block record (the block just committed).  At a step t of block b, with A_t the accepted
mask after step t and A_-1 empty:

    noise     not accepted now, and not at t-1: the canvas holds a random token (never shown)
    new       accepted now, not at t-1 (green)
    kept      accepted now and at t-1 (purple); `changed` flags a resampled token that differs
    remasked  accepted at t-1, noise now (gray, marked)
    committed the block is finished: last-step argmax, pad after EOS (white)

Earlier blocks show committed and later blocks show empty.  For mlx-vlm's confidence-threshold
sampler the accepted mask only grows, so no position is ever remasked: the same rules apply.

    frames = frame_refs(trace)
    state = frame_state(trace, len(frames) - 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from .thinking import has_channel, thought_mask
from .trace import Trace


class State(IntEnum):
    EMPTY = 0  # a block the run has not reached (yet)
    NOISE = 1
    NEW = 2
    KEPT = 3
    REMASKED = 4
    COMMITTED = 5


@dataclass(frozen=True)
class FrameRef:
    """Which record a frame shows: step record `index` or block record `index`."""

    kind: str  # "step" or "commit"
    index: int  # index into trace.steps or trace.blocks
    block: int


@dataclass(frozen=True, eq=False)
class FrameState:
    frame: int  # index of this frame in frame_refs(trace)
    kind: str  # "step" or "commit"
    block: int  # the block being denoised (or just committed)
    step: int | None  # step index within the block; None on a commit frame
    steps_remaining: int | None
    states: np.ndarray  # (max_blocks, canvas) uint8 State codes
    token_ids: np.ndarray  # (max_blocks, canvas) int32 id to display, -1 where nothing is shown
    changed: np.ndarray  # (max_blocks, canvas) bool: kept position whose sampled token changed
    entropy_nats: np.ndarray | None  # (canvas,) float32 of the current block at this step
    argmax: np.ndarray | None  # (canvas,) int32 of the current block at this step
    thought: np.ndarray | None = None  # (max_blocks, canvas) bool: shown tokens of the thinking channel; None: no channel

    def count(self, state: State, block: int | None = None) -> int:
        rows = self.states if block is None else self.states[block]
        return int(np.count_nonzero(rows == state))

    @property
    def counts(self) -> dict:
        """Per-step counts of the current block, as the app's step counter shows them."""
        row = self.states[self.block]
        return {
            "accepted": int(np.count_nonzero((row == State.NEW) | (row == State.KEPT))),
            "new": int(np.count_nonzero(row == State.NEW)),
            "kept": int(np.count_nonzero(row == State.KEPT)),
            "changed": int(np.count_nonzero(self.changed[self.block])),
            "remasked": int(np.count_nonzero(row == State.REMASKED)),
            "noise": int(np.count_nonzero(row == State.NOISE)),
            "committed": int(np.count_nonzero(row == State.COMMITTED)),
        }


def frame_refs(trace: Trace) -> list[FrameRef]:
    """The frames of a trace in time order: each block's steps, then its commit frame."""
    refs = []
    blocks_done = {b.block: i for i, b in enumerate(trace.blocks)}
    current = None
    for i, s in enumerate(trace.steps):
        if current is not None and s.block != current and current in blocks_done:
            refs.append(FrameRef("commit", blocks_done[current], current))
        current = s.block
        refs.append(FrameRef("step", i, s.block))
    emitted = {r.block for r in refs if r.kind == "commit"}
    for block, i in blocks_done.items():
        if block not in emitted:
            refs.append(FrameRef("commit", i, block))
    return refs


def frame_state(trace: Trace, frame: int, refs: list[FrameRef] | None = None) -> FrameState:
    """Classify every position of every block at one frame (negative indexes count from the end)."""
    refs = refs if refs is not None else frame_refs(trace)
    if not refs:
        raise IndexError("the trace has no frames yet")
    frame = frame if frame >= 0 else len(refs) + frame
    ref = refs[frame]
    n_blocks, canvas = max(trace.max_blocks, ref.block + 1), trace.canvas_length
    states = np.full((n_blocks, canvas), State.EMPTY, dtype=np.uint8)
    token_ids = np.full((n_blocks, canvas), -1, dtype=np.int32)
    changed = np.zeros((n_blocks, canvas), dtype=bool)

    committed_through = ref.block if ref.kind == "commit" else ref.block - 1
    for b in trace.blocks:
        if b.block <= committed_through:
            states[b.block] = State.COMMITTED
            token_ids[b.block] = b.tokens

    if ref.kind == "commit":
        return FrameState(frame, "commit", ref.block, None, None, states, token_ids, changed, None, None, _thoughts(trace, token_ids))

    step = trace.steps[ref.index]
    previous = trace.steps[ref.index - 1] if step.step > 0 else None
    now = step.accepted
    before = previous.accepted if previous is not None else np.zeros_like(now)
    row = np.full(canvas, State.NOISE, dtype=np.uint8)
    row[now & ~before] = State.NEW
    row[now & before] = State.KEPT
    row[~now & before] = State.REMASKED
    states[ref.block] = row
    token_ids[ref.block] = np.where(now, step.canvas, -1)
    if previous is not None:
        changed[ref.block] = now & before & (step.canvas != previous.canvas)
    return FrameState(
        frame, "step", ref.block, step.step, step.steps_remaining, states, token_ids, changed,
        step.entropy_nats, step.argmax, _thoughts(trace, token_ids),
    )


def _thoughts(trace: Trace, token_ids: np.ndarray) -> np.ndarray | None:
    return thought_mask(trace, token_ids) if has_channel(trace) else None
