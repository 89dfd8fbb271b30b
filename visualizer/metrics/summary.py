"""End-of-run commit-order metrics of a trace, per block and for the run, as JSON-ready values.

    metrics = run_metrics(trace)            # RunMetrics: .blocks is a list of BlockMetrics
    print(metrics.tau_b_mean, metrics.control_tau_b_mean)
    json.dumps(to_json(metrics))            # undefined values: null + a "<name>_undefined" reason

Every order statistic is computed per block (position within the block vs commit step) and
then averaged over blocks: pooling blocks would rank positions of different canvases against
each other and inflate tau_b.  Content positions only; the raw (uncut) tau_b is kept to show
the trailing-EOS trap: EOS and pad are committed first, and the raw value goes negative.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..trace import Trace
from .structure import structure_first
from .trajectory import trajectory_json
from .commits import block_commits, step_budget
from .measured import measured_label, measured_positions
from .order import (
    BIN_SIZES,
    Undefined,
    bin_tau_b,
    block_sequential_tau_b,
    is_defined,
    mean_defined,
    same_step_fraction,
    same_step_pairs,
    tau_b,
)

Value = float | Undefined

DEFINITIONS = {
    "indices": "blocks, steps and positions are 0-based, as in the trace (the app shows blocks and steps from 1)",
    "commit_step": "first step (0-based) at which the sampler accepted the position; steps_used for a position "
    "never accepted (committed from the last step's argmax when the block was finalized)",
    "settle_step": "first step from which the position's argmax never changed again",
    "content": "positions before the block's first EOS, trailing pad cut; EOS and pad are excluded",
    "measured": "the content positions the order figures use: the answer only by default; thinking-channel tokens "
    "(<|channel>thought ... <channel|>) only with include_thought (CLI: --include-thought); answer positions keep their "
    "order, bins and the control are taken over the measured positions; pinned positions (record --pin) are never "
    "measured, their commit being the intervention's (pinned_tokens counts them)",
    "tau_b": "scipy kendalltau variant b between commit step and position within the block, measured content "
    "positions only; "
    "per block, then the mean over blocks (never pooled across blocks)",
    "tau_b_raw": "the same on every position of the block, EOS and pad included (the trailing-EOS trap)",
    "control_tau_b": "tau_b of a block-sequential process with the same content length: commit = position // 16",
    "bin_tau_b": "bin index vs mean commit step of the bin, content in bins of 4..64 positions",
    "tokens_per_accept_step": "content positions first accepted / steps that first-accepted at least one",
    "same_step_fraction": "content position pairs with the same commit step / all content position pairs",
    "remask_events": "a position accepted at step t-1 and not at step t (all positions of the block)",
    "monotone": "no re-mask event in the run",
    "commit_entropy_nats": "entropy of the processed logits at the commit step, content positions",
    "structure_first": "each content token is structural or free by its family's rules (visualizer/metrics/structure.py); "
    "difference = free minus structural mean commit step, per block then averaged; auroc = P(a structural token commits "
    "strictly earlier than a free one), ties half; the answer only unless thought tokens are included ('measured')",
}


@dataclass(frozen=True)
class BlockMetrics:
    block: int
    steps_used: int
    step_budget: int  # max_denoising_steps the run allowed
    stop_reason: str
    content_length: int
    excluded_eos: int
    excluded_pad: int
    thought_tokens: int  # content positions in the thinking channel
    measured: str  # which content positions the figures below use (see DEFINITIONS["measured"])
    measured_positions: list  # those positions, ascending
    tau_b: Value
    tau_b_raw: Value
    control_tau_b: Value
    bin_tau_b: dict  # {bin size: Value}
    accept_steps: int  # steps that first-accepted at least one content position
    tokens_per_accept_step: Value
    committed_at_finalize: int  # content positions the sampler never accepted
    commits_per_step: list  # content positions first accepted at each step
    same_step_fraction: Value
    remask_events: int
    remasked_positions: list  # positions with at least one re-mask event, ascending
    mean_commit_entropy_nats: Value
    commit_step: list  # per position of the canvas (content_length tells which are content)
    settle_step: list
    commit_entropy_nats: list
    pinned_tokens: int = 0  # content positions the run pinned (record --pin): never measured


@dataclass(frozen=True)
class RunMetrics:
    blocks: list  # BlockMetrics of every committed block
    unfinished_blocks: int  # blocks started but not committed (a cancelled or failed run)
    measured: str  # answer tokens only, or with the thought tokens (every figure below)
    content_tokens: int
    thought_tokens: int
    measured_tokens: int
    excluded_eos: int
    excluded_pad: int
    tau_b_mean: Value  # mean of the per-block values (never pooled)
    tau_b_blocks: int  # blocks with a defined tau_b
    tau_b_raw_mean: Value
    control_tau_b_mean: Value
    bin_tau_b_mean: dict  # {bin size: Value}
    tokens_per_accept_step: Value
    committed_at_finalize: int
    same_step_fraction: Value  # over all within-block content pairs of the run
    steps_used: int
    step_budget: int  # steps allowed over the committed blocks
    remask_events: int
    monotone: bool
    mean_commit_entropy_nats: Value  # over every content position of the run
    pinned_tokens: int = 0  # content positions the run pinned (record --pin): never measured


def block_metrics(trace: Trace, block: int, *, include_thought: bool = False) -> BlockMetrics:
    """Metrics of one committed block: of its answer, or of its answer and thoughts (`include_thought`)."""
    commits = block_commits(trace, block)
    record = trace.blocks[block]
    n = commits.content_length
    measured = measured_positions(trace, block, commits.tokens, n, include_thought=include_thought)
    keep, m = measured.keep, measured.count
    commit = commits.commit_step[:n][keep]
    first_accepted = commit[commits.ever_accepted[:n][keep]]
    per_step = np.bincount(first_accepted, minlength=commits.steps_seen)
    accept_steps = int(np.count_nonzero(per_step))
    entropy = commits.commit_entropy_nats[:n][keep]
    return BlockMetrics(
        block=block,
        steps_used=record.steps_used,
        step_budget=step_budget(trace),
        stop_reason=record.stop_reason,
        content_length=n,
        excluded_eos=commits.excluded_eos,
        excluded_pad=commits.excluded_pad,
        thought_tokens=measured.thought_tokens,
        measured=measured.label,
        measured_positions=measured.positions.tolist(),
        tau_b=tau_b(commit),  # the answer's positions keep their order: ranks as written
        tau_b_raw=tau_b(commits.commit_step),
        control_tau_b=block_sequential_tau_b(m),
        bin_tau_b={size: bin_tau_b(commit, bin_size=size) for size in BIN_SIZES},
        accept_steps=accept_steps,
        tokens_per_accept_step=first_accepted.size / accept_steps
        if accept_steps
        else Undefined("no content position was accepted by the sampler"),
        committed_at_finalize=int(m - first_accepted.size),
        commits_per_step=per_step.tolist(),
        same_step_fraction=same_step_fraction(commit),
        remask_events=len(commits.remask_events),
        remasked_positions=sorted(set(commits.remask_events[:, 1].tolist())),
        mean_commit_entropy_nats=float(entropy.mean()) if m else Undefined("no content positions measured"),
        commit_step=commits.commit_step.tolist(),
        settle_step=commits.settle_step.tolist(),
        commit_entropy_nats=[float(str(e)) for e in commits.commit_entropy_nats],  # shortest exact float32
        pinned_tokens=measured.pinned_tokens,
    )


def run_metrics(trace: Trace, *, include_thought: bool = False) -> RunMetrics:
    """Metrics of every committed block of a trace, and their run-level summary: of the answer, or
    of the answer and the thinking channel's tokens (`include_thought`)."""
    blocks = [block_metrics(trace, b.block, include_thought=include_thought) for b in trace.blocks if b.steps_used > 0]
    started = len({s.block for s in trace.steps})
    pairs_same = pairs_all = 0
    entropies = []
    for m in blocks:
        same, total = same_step_pairs([m.commit_step[p] for p in m.measured_positions])
        pairs_same, pairs_all = pairs_same + same, pairs_all + total
        entropies.extend(m.commit_entropy_nats[p] for p in m.measured_positions)
    measured_tokens = sum(len(m.measured_positions) for m in blocks)
    thought_tokens = sum(m.thought_tokens for m in blocks)
    pinned_tokens = sum(m.pinned_tokens for m in blocks)
    accepted = measured_tokens - sum(m.committed_at_finalize for m in blocks)
    accept_steps = sum(m.accept_steps for m in blocks)
    return RunMetrics(
        blocks=blocks,
        unfinished_blocks=max(0, started - len(trace.blocks)),
        measured=measured_label(include_thought, thought_tokens, pinned_tokens),
        content_tokens=sum(m.content_length for m in blocks),
        thought_tokens=thought_tokens,
        measured_tokens=measured_tokens,
        excluded_eos=sum(m.excluded_eos for m in blocks),
        excluded_pad=sum(m.excluded_pad for m in blocks),
        tau_b_mean=mean_defined([m.tau_b for m in blocks], what="tau_b"),
        tau_b_blocks=sum(is_defined(m.tau_b) for m in blocks),
        tau_b_raw_mean=mean_defined([m.tau_b_raw for m in blocks], what="raw tau_b"),
        control_tau_b_mean=mean_defined([m.control_tau_b for m in blocks], what="control tau_b"),
        bin_tau_b_mean={
            size: mean_defined([m.bin_tau_b[size] for m in blocks], what=f"tau_b at bin size {size}")
            for size in BIN_SIZES
        },
        tokens_per_accept_step=accepted / accept_steps
        if accept_steps
        else Undefined("no content position was accepted by the sampler"),
        committed_at_finalize=sum(m.committed_at_finalize for m in blocks),
        same_step_fraction=pairs_same / pairs_all if pairs_all else Undefined("no block has 2 content positions"),
        steps_used=sum(m.steps_used for m in blocks),
        step_budget=sum(m.step_budget for m in blocks),
        remask_events=sum(m.remask_events for m in blocks),
        monotone=all(m.remask_events == 0 for m in blocks),
        mean_commit_entropy_nats=float(np.mean(entropies)) if entropies else Undefined("no content positions"),
        pinned_tokens=pinned_tokens,
    )


def to_json(value):
    """Plain JSON data: dataclasses become dicts; an Undefined field becomes null next to a
    "<name>_undefined" field holding the reason (inside dicts too)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            _put(out, f.name, getattr(value, f.name))
        return out
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            _put(out, str(key), item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def _put(out: dict, name: str, value) -> None:
    if isinstance(value, Undefined):
        out[name], out[f"{name}_undefined"] = None, value.reason
        return
    out[name] = to_json(value)
    if isinstance(value, dict) and any(isinstance(v, Undefined) for v in value.values()):
        out[f"{name}_undefined"] = {str(k): v.reason for k, v in value.items() if isinstance(v, Undefined)}


def metrics_json(trace: Trace, *, include_thought: bool = False, family: str | None = None) -> dict:
    """What `python -m visualizer metrics run.json` prints: the commit-order metrics and structure first.

    Both measure the answer only unless `include_thought`; their "measured" fields say which."""
    structure = structure_first(trace, family=family, include_thought=include_thought)
    return {
        "model": trace.model.name,
        "prompt": trace.prompt,
        "finish_reason": trace.end.finish_reason if trace.end else None,
        **to_json(run_metrics(trace, include_thought=include_thought)),
        "structure_first": {"measured": structure.measured, **to_json(structure)},
        "trajectory": to_json(trajectory_json(trace)),  # every step read against its end (metrics.trajectory)
        "definitions": DEFINITIONS,
    }
