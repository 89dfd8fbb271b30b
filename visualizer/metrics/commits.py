"""When each position of a block was committed, settled and re-masked, read from a trace alone.

Definitions (the commit-order study's, seeds/000_*):
- commit step: the first step (0-based) at which the sampler accepted the position.  A position
  the sampler never accepted is committed when the block is finalized from the last step's
  argmax; it gets commit step = `steps_seen` (one past the last step), tied with its kind.
  During a live run the same value means "not yet, later", so the running tau_b ends exactly
  on the end-of-run value.
- settle step: the first step from which the position's argmax never changed again.
- re-mask event: accepted at step t-1, not accepted at step t (the accepted set is recomputed
  from scratch every step, so commits are not frozen).
- content: the block's positions before its first EOS, with trailing pad cut too.  For a
  finished block the committed tokens decide; mid-block, the current argmax does (the block is
  committed from the last step's argmax, so both agree at the end).
- commit entropy: the entropy at the commit step (at the last step for positions committed at
  finalization; NaN while a position is still pending in a live block).

    commits = block_commits(trace, 0)                  # the finished block
    commits = block_commits(trace, 0, steps=trace.block_steps(0)[:6])   # as it stood after step 5
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import Trace


@dataclass(frozen=True, eq=False)
class BlockCommits:
    block: int
    steps_seen: int  # step records taken into account (step indices 0..steps_seen-1)
    final: bool  # the block is committed and every one of its steps was seen
    accepted: np.ndarray  # (steps_seen, canvas) bool
    commit_step: np.ndarray  # (canvas,) int: first acceptance; steps_seen where never accepted
    ever_accepted: np.ndarray  # (canvas,) bool
    settle_step: np.ndarray  # (canvas,) int: first step from which the argmax stayed the same
    entropy_nats: np.ndarray  # (steps_seen, canvas) float32
    commit_entropy_nats: np.ndarray  # (canvas,) float32, NaN for positions still pending
    tokens: np.ndarray  # (canvas,) committed tokens (final) or the current argmax (live)
    content_length: int  # content is positions 0..content_length-1
    excluded_eos: int  # EOS tokens cut from the end
    excluded_pad: int  # pad cut from the end (live: whatever follows the first EOS, to become pad)
    remask_events: np.ndarray  # (k, 2) int: [step, position] for each re-mask

    @property
    def canvas(self) -> int:
        return self.commit_step.size

    @property
    def content(self) -> np.ndarray:
        """(canvas,) bool mask of content positions."""
        return np.arange(self.canvas) < self.content_length


def block_commits(trace: Trace, block: int, *, steps: list | None = None) -> BlockCommits:
    """Commit, settle and re-mask data of one block from its first `steps` (default: all of them).

    The block counts as final only when every one of its steps is given and it was committed.
    """
    steps = trace.block_steps(block) if steps is None else steps
    if not steps:
        raise ValueError(f"block {block} has no recorded steps")
    record = trace.blocks[block] if block < len(trace.blocks) else None
    final = record is not None and len(steps) == record.steps_used

    accepted = np.stack([s.accepted for s in steps])  # (T, canvas)
    argmax = np.stack([s.argmax for s in steps])
    entropy = np.stack([s.entropy_nats for s in steps])
    n_steps, canvas = accepted.shape

    ever = accepted.any(axis=0)
    commit = np.where(ever, accepted.argmax(axis=0), n_steps)

    changed = argmax[1:] != argmax[:-1]  # row i: argmax at step i+1 differs from step i
    settle = np.zeros(canvas, dtype=int)
    if n_steps > 1:
        settle = np.where(changed.any(axis=0), n_steps - 1 - changed[::-1].argmax(axis=0), 0)

    commit_entropy = entropy[np.minimum(commit, n_steps - 1), np.arange(canvas)]
    if not final:
        commit_entropy = np.where(ever, commit_entropy, np.float32(np.nan))

    tokens = record.tokens if final else argmax[-1]
    length, n_eos = content_length(tokens, trace.model.eos_token_ids, trace.model.pad_token_id)

    remasked = accepted[:-1] & ~accepted[1:]  # row i: re-masked at step i+1
    event_steps, event_positions = np.nonzero(remasked)
    events = np.stack([event_steps + 1, event_positions], axis=1).astype(int)

    return BlockCommits(
        block=block,
        steps_seen=n_steps,
        final=final,
        accepted=accepted,
        commit_step=commit,
        ever_accepted=ever,
        settle_step=settle,
        entropy_nats=entropy,
        commit_entropy_nats=commit_entropy.astype(np.float32),
        tokens=tokens,
        content_length=length,
        excluded_eos=n_eos,
        excluded_pad=canvas - length - n_eos,
        remask_events=events,
    )


def content_length(tokens, eos_ids, pad_id) -> tuple[int, int]:
    """(content length, EOS tokens cut): cut at the first EOS, then trailing pad."""
    tokens = np.asarray(tokens)
    is_eos = np.isin(tokens, list(eos_ids))
    end = int(is_eos.argmax()) if is_eos.any() else tokens.size
    if pad_id is not None:
        while end > 0 and tokens[end - 1] == pad_id:
            end -= 1
    return end, int(np.count_nonzero(is_eos[end:]))


def step_budget(trace: Trace) -> int:
    """max_denoising_steps of the run (the most steps any block may take)."""
    budget = trace.start.settings.get("max_denoising_steps") if trace.start else None
    return int(budget) if budget else max((s.step + 1 for s in trace.steps), default=0)
