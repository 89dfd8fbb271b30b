"""Every step read against its end: when each position's argmax reached its final token, how often it
flipped, and how confident the commit was, from what a trace already records (issue 56).

    t = block_trajectory(trace, 0)        # BlockTrajectory of a finished block
    t.finalized_step, t.argmax_flips, t.commit_after_finalized_steps, t.finalized_by_fraction
    r = run_trajectory(trace)             # RunTrajectory: run-level means (the probe's columns)

Definitions (0-based steps, content positions: the block's positions before its first EOS, pad cut):
- final token: the block's committed token (`BlockRecord.tokens`).
- finalized step: the first step from which the argmax equals the final token at every later step.
  A position whose last argmax is not its final token (a sampler that commits samples, not the argmax)
  is finalized at `steps_used`: never within the block.  With the entropy-bound sampler a content
  position is committed from its last argmax, so its finalized step equals its settle step (`commits`);
  the two differ where the committed token is not the last argmax.
- argmax flips: steps t >= 1 whose argmax differs from step t-1's.
- commit after finalized: commit step (first acceptance) minus finalized step.  Positive: the argmax
  already held the final token that many steps before the sampler accepted it ("decided is not
  committed"); negative: accepted before the argmax settled on it.
- finalized by fraction f of the run: the share of content positions finalized within the block's first
  ceil(f * steps_used) steps, at f = 0.1, 0.2, ..., 1.0 (1.0 at f = 1 by definition).
- top-2 margin: the most probable candidate's probability minus the second's, per position and step, where
  the trace recorded at least two candidates (`record_topk` >= 2); undefined otherwise.
- commit confidence: the probability of the committed token at its commit step, read from the recorded
  candidates (NaN where the token was outside them); with no candidates recorded it is undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace import Trace
from .commits import block_commits
from .order import Undefined

FRACTIONS = tuple(round(0.1 * k, 1) for k in range(1, 11))  # fractions of a block's steps: 0.1 .. 1.0
STEP_BUCKETS = ("early", "middle", "late")  # thirds of a block's steps, by commit step


@dataclass(frozen=True, eq=False)
class BlockTrajectory:
    block: int
    steps_used: int
    content_length: int
    finalized_step: np.ndarray  # (canvas,) int: first step from which the argmax is the final token; steps_used: never
    argmax_flips: np.ndarray  # (canvas,) int
    commit_step: np.ndarray  # (canvas,) int (metrics.commits)
    commit_after_finalized_steps: np.ndarray  # (canvas,) int: commit step minus finalized step
    finalized_by_fraction: dict  # {fraction: share of content finalized by then} (FRACTIONS)
    top2_margin: np.ndarray | Undefined  # (steps_used, canvas) float32
    commit_confidence: np.ndarray | Undefined  # (canvas,) float32, NaN where the token was not a candidate
    step_bucket: np.ndarray  # (canvas,) int: commit step's third of the block (0 early, 1 middle, 2 late)


@dataclass(frozen=True)
class RunTrajectory:
    blocks: list  # BlockTrajectory of every committed block
    mean_finalized_step: float | Undefined  # over content positions of the run
    mean_argmax_flips: float | Undefined
    mean_commit_after_finalized_steps: float | Undefined
    finalized_at_half: float | Undefined  # share of content finalized by half of its block's steps
    mean_commit_confidence: float | Undefined  # over content positions whose token was a candidate
    commit_confidence_by_bucket: dict  # {"early"|"middle"|"late": mean commit confidence of content committed then}


def finalized_steps(argmax: np.ndarray, final: np.ndarray) -> np.ndarray:
    """(canvas,) first step from which `argmax` (steps, canvas) equals `final` at every later step; steps if never."""
    steps = argmax.shape[0]
    wrong = argmax != final[None, :]
    if steps == 0:
        return np.zeros(final.shape, int)
    last_wrong = np.where(wrong.any(axis=0), steps - 1 - wrong[::-1].argmax(axis=0), -1)
    return last_wrong + 1


def argmax_flips(argmax: np.ndarray) -> np.ndarray:
    """(canvas,) steps whose argmax differs from the step before."""
    return np.count_nonzero(argmax[1:] != argmax[:-1], axis=0)


def finalized_by_fraction(finalized: np.ndarray, steps: int) -> dict:
    """{fraction: share of `finalized` steps within the first ceil(fraction * steps) steps}."""
    if finalized.size == 0:
        return {f: Undefined("no content positions") for f in FRACTIONS}
    return {f: float(np.mean(finalized < int(np.ceil(f * steps - 1e-9)))) for f in FRACTIONS}


def top2_margin(topk_probs: np.ndarray | None) -> np.ndarray | Undefined:
    """(steps, canvas) top-1 minus top-2 probability, from (steps, canvas, k) candidate probabilities."""
    if topk_probs is None or topk_probs.shape[-1] < 2:
        return Undefined("needs at least 2 recorded candidates per position (record_topk >= 2)")
    p = topk_probs.astype(np.float32)
    return p[..., 0] - p[..., 1]


def token_probability(topk_ids: np.ndarray, topk_probs: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """(canvas,) probability of `tokens` among (canvas, k) candidates; NaN where a token is not one of them."""
    hit = topk_ids == tokens[:, None]
    probs = np.where(hit, topk_probs.astype(np.float32), 0.0).sum(axis=1)
    return np.where(hit.any(axis=1), probs, np.nan).astype(np.float32)


def block_trajectory(trace: Trace, block: int) -> BlockTrajectory:
    """The trajectory figures of one committed block."""
    steps = trace.block_steps(block)
    commits = block_commits(trace, block)
    record = trace.blocks[block]
    argmax = np.stack([s.argmax for s in steps])
    finalized = finalized_steps(argmax, record.tokens)
    n, used = commits.content_length, len(steps)
    recorded = steps[0].topk_ids is not None
    margin = top2_margin(np.stack([s.topk_probs for s in steps]) if recorded else None)
    if recorded:
        at = np.minimum(commits.commit_step, used - 1)  # never accepted: committed from the last step
        ids = np.stack([s.topk_ids for s in steps])[at, np.arange(at.size)]
        probs = np.stack([s.topk_probs for s in steps])[at, np.arange(at.size)]
        confidence = token_probability(ids, probs, record.tokens)
    else:
        confidence = Undefined("this trace recorded no candidates (record_topk 0): no commit probability")
    bucket = np.minimum(commits.commit_step * len(STEP_BUCKETS) // max(used, 1), len(STEP_BUCKETS) - 1)
    return BlockTrajectory(
        block=block,
        steps_used=used,
        content_length=n,
        finalized_step=finalized,
        argmax_flips=argmax_flips(argmax),
        commit_step=commits.commit_step,
        commit_after_finalized_steps=commits.commit_step - finalized,
        finalized_by_fraction=finalized_by_fraction(finalized[:n], used),
        top2_margin=margin,
        commit_confidence=confidence,
        step_bucket=bucket,
    )


def run_trajectory(trace: Trace) -> RunTrajectory:
    """Every committed block's trajectory and the run's means over content positions."""
    blocks = [block_trajectory(trace, b.block) for b in trace.blocks if b.steps_used > 0]

    def content(name):
        parts = [getattr(t, name)[: t.content_length] for t in blocks]
        return np.concatenate(parts) if parts else np.zeros(0)

    def mean(values, what="no content positions"):
        values = values[np.isfinite(values)] if values.dtype.kind == "f" else values
        return float(values.mean()) if values.size else Undefined(what)

    finalized = content("finalized_step")
    half = np.concatenate([t.finalized_step[: t.content_length] < int(np.ceil(0.5 * t.steps_used))
                           for t in blocks]) if blocks else np.zeros(0, bool)
    if all(not isinstance(t.commit_confidence, Undefined) for t in blocks) and blocks:
        confidence, bucket = content("commit_confidence"), content("step_bucket")
        by_bucket = {name: mean(confidence[bucket == k], f"no content committed in the {name} third of a block")
                     for k, name in enumerate(STEP_BUCKETS)}
        mean_confidence = mean(confidence, "no committed token was among the recorded candidates")
    else:
        reason = "this trace recorded no candidates (record_topk 0): no commit probability" if blocks else "no committed block"
        mean_confidence, by_bucket = Undefined(reason), {name: Undefined(reason) for name in STEP_BUCKETS}
    return RunTrajectory(
        blocks=blocks,
        mean_finalized_step=mean(finalized.astype(float)),
        mean_argmax_flips=mean(content("argmax_flips").astype(float)),
        mean_commit_after_finalized_steps=mean(content("commit_after_finalized_steps").astype(float)),
        finalized_at_half=mean(half.astype(float)),
        mean_commit_confidence=mean_confidence,
        commit_confidence_by_bucket=by_bucket,
    )


def trajectory_json(trace: Trace, *, positions: bool = True) -> dict:
    """What `metrics` prints under "trajectory": per block the per-position lists (content first
    `content_length`), the finalized-by-fraction curve and the mean top-2 margin per step; the run's means.
    Undefined values stay Undefined: `summary.to_json` turns them into null and a reason."""
    run = run_trajectory(trace)
    blocks = []
    for t in run.blocks:
        n = t.content_length
        block = {"block": t.block, "steps_used": t.steps_used, "content_length": n,
                 "finalized_by_fraction": {str(f): v for f, v in t.finalized_by_fraction.items()}}
        margin = t.top2_margin
        block["mean_top2_margin_per_step"] = (margin if isinstance(margin, Undefined)
                                              else [float(m) for m in margin[:, :n].mean(axis=1)] if n else Undefined("no content"))
        if positions:
            block["finalized_step"] = t.finalized_step.tolist()
            block["argmax_flips"] = t.argmax_flips.tolist()
            block["commit_after_finalized_steps"] = t.commit_after_finalized_steps.tolist()
            block["commit_confidence"] = (t.commit_confidence if isinstance(t.commit_confidence, Undefined)
                                          else [None if np.isnan(c) else float(c) for c in t.commit_confidence])
        blocks.append(block)
    summary = {k: getattr(run, k) for k in ("mean_finalized_step", "mean_argmax_flips", "mean_commit_after_finalized_steps",
                                            "finalized_at_half", "mean_commit_confidence", "commit_confidence_by_bucket")}
    return {**summary, "blocks": blocks, "definitions": DEFINITIONS}


DEFINITIONS = {
    "finalized_step": "first step (0-based) from which the argmax equals the committed token at every later step; "
    "steps_used where the last argmax is not the committed token",
    "argmax_flips": "steps whose argmax differs from the step before",
    "commit_after_finalized_steps": "commit step (first acceptance) minus finalized step: positive, the argmax held the "
    "final token before the sampler accepted it",
    "finalized_by_fraction": "share of content finalized within the block's first ceil(f * steps_used) steps",
    "finalized_at_half": "share of the run's content finalized within the first half of its block's steps",
    "top2_margin": "top-1 minus top-2 candidate probability per position and step (record_topk >= 2)",
    "commit_confidence": "probability of the committed token at its commit step, from the recorded candidates "
    "(null where it was not one of them)",
    "commit_confidence_by_bucket": "mean commit confidence of the content first accepted in each third of its block's steps",
}
