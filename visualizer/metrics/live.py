"""The live readout: commit-order figures of the current block at any frame of a trace.

Pure functions of (trace, frame), cheap enough for every step of a live run: the app calls

    readout = live_readout(trace, frame)                 # Readout dataclass, what the panel shows
    series = tau_series(trace, readout.block, frame=frame)                # tau_b after each step
    details = position_details(trace, block, position, frame=frame)        # a token's tooltip
    details = block_position_details(trace, block, frame=frame)           # one dict per position

While a block is being denoised, positions the sampler has not accepted yet count as tied at
"later" (commit step = steps seen so far), and content is read from the current argmax (cut at
its first EOS).  The block is committed from its last step's argmax, so on the block's last step
and on its commit frame every value equals the end-of-run metric (`summary.block_metrics`).
Committed blocks never change: their values are kept on the trace (`trace.derived`), so a long run stays cheap.
Like the end-of-run metrics, the figures measure the answer; thinking-channel tokens only with
`include_thought` (`measured` says which; see `measured.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..states import FrameRef, frame_refs
from ..trace import Trace
from .commits import BlockCommits, block_commits, content_length, step_budget
from .measured import measured_positions
from .order import Undefined, block_sequential_tau_b, mean_defined, same_step_fraction, tau_b

Value = float | Undefined


@dataclass(frozen=True)
class Readout:
    frame: int
    kind: str  # "step" or "commit"
    block: int
    step: int | None  # step shown (0-based); None on a commit frame
    steps_seen: int  # steps of this block so far
    step_budget: int  # max_denoising_steps
    final: bool  # the block is committed: every value below is its end-of-run value
    content_length: int  # content positions (predicted from the argmax while live)
    excluded_eos: int
    excluded_pad: int
    thought_tokens: int  # content positions in the thinking channel
    pinned_tokens: int  # content positions the run pinned (record --pin): never measured
    measured: str  # which content positions the figures below use: the answer only, or with thoughts
    measured_length: int  # how many
    tau_b: Value  # tau_b of this block's measured positions, pending positions tied at "later"
    control_tau_b: Value  # block-sequential control for the same content length
    tau_b_raw: Value  # every position, EOS and pad included: the trailing-EOS trap
    accepted_now: int  # positions the sampler holds accepted at this step (all positions)
    committed: int  # measured positions accepted at least once so far
    pending: int  # measured positions never accepted (so far; at finalization when final)
    new_commits: int  # measured positions first accepted at this step
    tokens_per_accept_step: Value
    same_step_fraction: Value  # among content positions accepted so far (all content when final)
    remask_events: int  # in this block so far
    remasked_now: int  # re-mask events at this step
    remasked_positions: tuple  # positions re-masked at least once in this block so far
    monotone: bool  # no re-mask event anywhere in the run so far
    mean_commit_entropy_nats: Value  # over content positions accepted so far (all content when final)
    run_tau_b_mean: Value  # mean tau_b over the blocks committed by this frame
    run_blocks: int  # blocks committed by this frame


@dataclass(frozen=True)
class SeriesPoint:
    step: int
    tau_b: Value
    control_tau_b: Value
    committed: int  # measured positions accepted at least once by this step
    measured_length: int  # measured positions (the answer only, unless thoughts were included)


def live_readout(trace: Trace, frame: int, *, refs: list[FrameRef] | None = None, include_thought: bool = False) -> Readout:
    """Everything the commit-order panel shows at one frame (negative frames count from the end)."""
    return _readout(_frame_data(trace, frame, refs), include_thought)


def live_readouts(trace: Trace, frame: int, *, refs: list[FrameRef] | None = None) -> tuple[Readout, Readout | None]:
    """The answer's readout at one frame and, where its block holds thought tokens, the same with
    them counted (else None); the block's commits and what does not depend on it are computed once."""
    data = _frame_data(trace, frame, refs)
    answer = _readout(data, include_thought=False)
    return answer, (_readout(data, include_thought=True) if answer.thought_tokens else None)


@dataclass(frozen=True, eq=False)
class _FrameData:
    """What a frame's readouts share, whatever they measure."""

    trace: Trace
    frame: int
    ref: FrameRef
    steps: list
    commits: BlockCommits
    tau_b_raw: Value
    earlier_monotone: bool  # no re-mask in the blocks before this one


def _frame_data(trace: Trace, frame: int, refs) -> _FrameData:
    refs = refs if refs is not None else frame_refs(trace)
    ref, frame = _ref(refs, frame)
    steps = _frame_steps(trace, ref)
    commits = block_commits(trace, ref.block, steps=steps)
    earlier_monotone = all(_final_block_value(trace, b.block)["remask_events"] == 0 for b in trace.blocks[: ref.block])
    return _FrameData(trace, frame, ref, steps, commits, tau_b(commits.commit_step), earlier_monotone)


def _readout(data: _FrameData, include_thought: bool) -> Readout:
    trace, ref, commits = data.trace, data.ref, data.commits
    n = commits.content_length
    measured = measured_positions(trace, ref.block, commits.tokens, n, include_thought=include_thought)
    keep = measured.keep
    commit = commits.commit_step[:n][keep]
    ever = commits.ever_accepted[:n][keep]
    last = commits.steps_seen - 1
    first_accepted = commit[ever]
    accept_steps = np.unique(first_accepted).size
    events = commits.remask_events
    entropy = commits.commit_entropy_nats[:n][keep]
    entropy = entropy if commits.final else entropy[ever]
    finished = trace.blocks[: ref.block + (ref.kind == "commit")]  # committed by this frame

    return Readout(
        frame=data.frame,
        kind=ref.kind,
        block=ref.block,
        step=data.steps[-1].step if ref.kind == "step" else None,
        steps_seen=commits.steps_seen,
        step_budget=step_budget(trace),
        final=commits.final,
        content_length=n,
        excluded_eos=commits.excluded_eos,
        excluded_pad=commits.excluded_pad,
        thought_tokens=measured.thought_tokens,
        pinned_tokens=measured.pinned_tokens,
        measured=measured.label,
        measured_length=measured.count,
        tau_b=tau_b(commit),  # the measured positions keep their order: ranks as written
        control_tau_b=block_sequential_tau_b(measured.count),
        tau_b_raw=data.tau_b_raw,
        accepted_now=int(np.count_nonzero(commits.accepted[-1])),
        committed=int(np.count_nonzero(ever)),
        pending=int(measured.count - np.count_nonzero(ever)),
        new_commits=int(np.count_nonzero(first_accepted == last)),
        tokens_per_accept_step=first_accepted.size / accept_steps
        if accept_steps
        else Undefined("no content position accepted yet"),
        same_step_fraction=same_step_fraction(commit if commits.final else first_accepted),
        remask_events=len(events),
        remasked_now=int(np.count_nonzero(events[:, 0] == last)) if len(events) else 0,
        remasked_positions=tuple(sorted(set(events[:, 1].tolist()))),
        monotone=data.earlier_monotone and len(events) == 0,
        mean_commit_entropy_nats=float(entropy.mean()) if entropy.size else Undefined("no content position accepted yet"),
        run_tau_b_mean=mean_defined([_final_block_value(trace, b.block, include_thought)["tau_b"] for b in finished], what="tau_b"),
        run_blocks=len(finished),
    )


def tau_series(trace: Trace, block: int, *, frame: int | None = None, refs=None, include_thought: bool = False) -> list[SeriesPoint]:
    """The live tau_b of `block` after each of its steps that exist at `frame` (default: all), over
    the measured positions (as `live_readout`).

    A point depends only on the steps up to it, so each is computed once per step record.
    """
    steps = block_steps_at(trace, block, frame=frame, refs=refs)
    record = trace.blocks[block] if block < len(trace.blocks) else None
    points = []
    first = np.full(trace.canvas_length, -1)
    for i, step in enumerate(steps):
        first[step.accepted & (first < 0)] = i
        final = record is not None and i == record.steps_used - 1
        commit = np.where(first >= 0, first, i + 1)  # pending positions tie at "later"
        tokens = record.tokens if final else step.argmax
        key = ("series", block, i, final, include_thought)
        points.append(trace.derived.get(key, lambda: _series_point(trace, block, i, commit, tokens, include_thought)))
    return points


def _series_point(trace: Trace, block: int, i: int, commit: np.ndarray, tokens: np.ndarray, include_thought: bool) -> SeriesPoint:
    n = content_length(tokens, trace.model.eos_token_ids, trace.model.pad_token_id)[0]
    measured = measured_positions(trace, block, tokens, n, include_thought=include_thought)
    commit = commit[:n][measured.keep]
    committed = int(np.count_nonzero(commit <= i))
    return SeriesPoint(i, tau_b(commit), block_sequential_tau_b(measured.count), committed, measured.count)


def block_steps_at(trace: Trace, block: int, *, frame: int | None = None, refs=None) -> list:
    """The step records of `block` that exist at `frame` (all of them when frame is None)."""
    if frame is None:
        return trace.block_steps(block)
    refs = refs if refs is not None else frame_refs(trace)
    ref, _ = _ref(refs, frame)
    if ref.block < block:
        return []
    if ref.block == block and ref.kind == "step":
        return _frame_steps(trace, ref)
    return trace.block_steps(block)


def cursor_step(trace: Trace, block: int, *, frame: int | None = None, refs=None) -> int | None:
    """The step of `block` shown at `frame`; None when the frame shows no step of this block."""
    if frame is None:
        return None
    refs = refs if refs is not None else frame_refs(trace)
    ref, _ = _ref(refs, frame)
    return trace.steps[ref.index].step if ref.kind == "step" and ref.block == block else None


def block_position_details(trace: Trace, block: int, *, frame: int | None = None, refs=None) -> list[dict]:
    """`position_details` of every position of a block, computed once (for token tooltips)."""
    steps = block_steps_at(trace, block, frame=frame, refs=refs)
    if not steps:
        return [{"block": block, "position": p, "started": False} for p in range(trace.canvas_length)]
    commits = block_commits(trace, block, steps=steps)
    canvas, n, last = commits.canvas, commits.content_length, commits.steps_seen - 1
    remasks = [[] for _ in range(canvas)]
    for step, position in commits.remask_events.tolist():
        remasks[position].append(step)
    spans = [[] for _ in range(canvas)]
    edges = np.diff(np.pad(commits.accepted.astype(np.int8), ((1, 1), (0, 0))), axis=0)  # +1 starts, -1 ends
    starts, ends = np.nonzero(edges.T == 1), np.nonzero(edges.T == -1)  # both sorted by position, then step
    for position, start, end in zip(starts[0].tolist(), starts[1].tolist(), ends[1].tolist()):
        spans[position].append([start, end - 1])
    accepted_now = commits.accepted[-1]
    if commits.final:
        shown = commits.tokens
    else:
        shown = np.where(accepted_now, steps[-1].canvas, -1)  # noise is never shown as text
    eos_ids = trace.model.eos_token_ids
    out = []
    for p in range(canvas):
        ever, token = bool(commits.ever_accepted[p]), int(shown[p])
        entropy = float(commits.commit_entropy_nats[p])
        out.append(
            {
                "block": block,
                "position": p,
                "started": True,
                "token_id": token if token >= 0 else None,
                "piece": trace.piece(token) if token >= 0 else None,
                "content": p < n,
                "excluded": None if p < n else ("eos" if int(commits.tokens[p]) in eos_ids else "pad"),
                "commit_step": int(commits.commit_step[p]) if ever or commits.final else None,
                "pending": not ever and not commits.final,
                "committed_at_finalize": not ever and commits.final,
                "commit_entropy_nats": None if math.isnan(entropy) else entropy,
                "settle_step": int(commits.settle_step[p]),
                "settled": commits.final,
                "entropy_nats_now": float(commits.entropy_nats[last, p]),
                "accepted_now": bool(accepted_now[p]),
                "remask_steps": remasks[p],
                "accepted_spans": spans[p],
            }
        )
    return out


def position_details(trace: Trace, block: int, position: int, *, frame: int | None = None, refs=None) -> dict:
    """One position's commit story up to a frame (default: everything recorded).

    Keys: block, position, started, token_id/piece (what is displayed: None while it is noise),
    content, excluded ("eos"/"pad"/None), commit_step (None while pending), pending,
    committed_at_finalize, commit_entropy_nats, settle_step, settled (True once the block is
    committed), entropy_nats_now, accepted_now, remask_steps, accepted_spans ([first, last] steps).
    """
    if not 0 <= position < trace.canvas_length:
        raise ValueError(f"position {position} is outside the canvas 0..{trace.canvas_length - 1}")
    return block_position_details(trace, block, frame=frame, refs=refs)[position]


# ---- helpers ---------------------------------------------------------------------------------
def _ref(refs: list[FrameRef], frame: int) -> tuple[FrameRef, int]:
    if not refs:
        raise IndexError("the trace has no frames yet")
    index = frame if frame >= 0 else len(refs) + frame
    if not 0 <= index < len(refs):
        raise IndexError(f"frame {frame} is outside 0..{len(refs) - 1}")
    return refs[index], index


def _frame_steps(trace: Trace, ref: FrameRef) -> list:
    """The block's step records up to the frame (all of them on a commit frame)."""
    if ref.kind == "commit":
        return trace.block_steps(ref.block)
    step = trace.steps[ref.index]
    return trace.steps[ref.index - step.step : ref.index + 1]


def _final_block_value(trace: Trace, block: int, include_thought: bool = False) -> dict:
    """{"tau_b", "remask_events"} of a committed block (computed once per BlockRecord)."""

    def compute():
        commits = block_commits(trace, block)
        n = commits.content_length
        measured = measured_positions(trace, block, commits.tokens, n, include_thought=include_thought)
        return {"tau_b": tau_b(commits.commit_step[:n][measured.keep]), "remask_events": len(commits.remask_events)}

    return trace.derived.get(("final", block, include_thought), compute)
