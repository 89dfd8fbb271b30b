"""The alternatives the model weighed at one position: its top-k candidates at a step and at its commit step.

Read from a trace that recorded candidates (`settings.record_topk` > 0, trace version 2):

    alt = position_alternatives(trace, block=0, position=17, step=5)   # raises AlternativesError
    alt.now            # the candidates at step 5, most probable first
    alt.at_commit      # the candidates at the step the sampler first accepted the position
    alt.almost         # "the token it almost chose" (see below)
    html = alternatives_html(trace, frame, position)    # the inspector's panel, for the app
    text = alternatives_text(alt)                       # the CLI's lines

The commit step is the commit-order study's: the first step at which the sampler accepted the
position (`metrics.commits`); a position never accepted is committed from the last step's argmax
when the block ends, and its "commit step" here is that last step. The token it took at the
commit step is the sample the sampler accepted there (the canvas token), or the argmax for a
position committed at finalization. `almost` is the most probable candidate at the commit step
other than the one it took: the runner-up when it took the favourite ("the token it almost
chose"), the favourite when it sampled a less likely token (then the sentence says that the
favourite was more likely). Steps are 0-based here and shown from 1; numbers are written as
`numbers.number` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import numpy as np

from .metrics import block_commits
from .numbers import number
from .states import frame_refs
from .trace import Trace


NO_CANDIDATES = (
    "this trace recorded no candidates (record_topk was 0, or it was saved by an older version): "
    "record it again with candidates on (--topk 5)"
)


class AlternativesError(ValueError):
    """The request cannot be answered from this trace; the message says why, in one line."""


@dataclass(frozen=True)
class Candidate:
    token_id: int
    piece: str
    probability: float  # under the processed (temperature-scaled) logits, float16 precision


@dataclass(frozen=True)
class PositionAlternatives:
    block: int
    position: int
    step: int  # the step viewed (0-based within the block)
    now: tuple[Candidate, ...]  # candidates at `step`, most probable first
    accepted_now: bool
    entropy_now: float
    commit_step: int | None  # None while the position is pending (live trace)
    at_commit: tuple[Candidate, ...]  # candidates at the commit step (empty when pending)
    taken: Candidate | None  # the token it took at the commit step
    committed_at_finalize: bool  # never accepted: committed from the last argmax
    almost: Candidate | None  # the most probable other candidate at the commit step
    entropy_at_commit: float | None

    @property
    def margin(self) -> float | None:
        """Probability of the taken token minus that of the one it almost chose."""
        if self.taken is None or self.almost is None:
            return None
        return self.taken.probability - self.almost.probability


def candidates(trace: Trace, block: int, step: int, position: int) -> tuple[Candidate, ...]:
    """The recorded candidates of one position at one step, most probable first."""
    record = _step(trace, block, step)
    if record.topk_ids is None:
        raise AlternativesError(NO_CANDIDATES)
    _check_position(trace, position)
    return tuple(
        Candidate(int(i), trace.piece(i), float(p)) for i, p in zip(record.topk_ids[position], record.topk_probs[position])
    )


def position_alternatives(trace: Trace, block: int, position: int, step: int | None = None) -> PositionAlternatives:
    """The alternatives of `position` at `step` (default: the block's last recorded step) and at its commit step."""
    steps = trace.block_steps(block)
    if not steps:
        raise AlternativesError(f"block {block + 1} has no recorded steps (the run has {_count_blocks(trace)} block(s))")
    step = len(steps) - 1 if step is None else step
    if not 0 <= step < len(steps):
        raise AlternativesError(f"block {block + 1} has steps 1 to {len(steps)}; there is no step {step + 1}")
    _check_position(trace, position)
    now = candidates(trace, block, step, position)
    commits = block_commits(trace, block)
    ever = bool(commits.ever_accepted[position])
    finalized = commits.final and not ever
    if ever:
        commit_step = int(commits.commit_step[position])
        taken_id = int(steps[commit_step].canvas[position])
    elif finalized:
        commit_step = len(steps) - 1
        taken_id = int(steps[commit_step].argmax[position])
    else:
        commit_step, taken_id = None, None
    at_commit = candidates(trace, block, commit_step, position) if commit_step is not None else ()
    taken = almost = None
    if taken_id is not None:
        by_id = {c.token_id: c for c in at_commit}
        taken = by_id.get(taken_id) or Candidate(taken_id, trace.piece(taken_id), float("nan"))  # outside the top k
        almost = next((c for c in at_commit if c.token_id != taken_id), None)
    return PositionAlternatives(
        block=block,
        position=position,
        step=step,
        now=now,
        accepted_now=bool(steps[step].accepted[position]),
        entropy_now=float(steps[step].entropy_nats[position]),
        commit_step=commit_step,
        at_commit=at_commit,
        taken=taken,
        committed_at_finalize=finalized,
        almost=almost,
        entropy_at_commit=None if commit_step is None else float(steps[commit_step].entropy_nats[position]),
    )


def frame_position(trace: Trace, frame: int) -> tuple[int, int]:
    """(block, step) that frame `frame` of `frame_refs(trace)` shows; a commit frame shows its block's last step."""
    refs = frame_refs(trace)
    if not 0 <= frame < len(refs):
        raise AlternativesError(f"frame {frame} is outside 0..{len(refs) - 1}")
    ref = refs[frame]
    if ref.kind == "step":
        return ref.block, trace.steps[ref.index].step
    return ref.block, len(trace.block_steps(ref.block)) - 1


# ---- text and HTML --------------------------------------------------------------------------------
def alternatives_text(alt: PositionAlternatives) -> str:
    """Plain lines for the CLI."""
    lines = [
        f"block {alt.block + 1}, position {alt.position}, step {alt.step + 1}: "
        f"{'accepted' if alt.accepted_now else 'not accepted'}, entropy {number(alt.entropy_now)} nats",
        *(f"  {rank}. {_show(c.piece)!r:<20} p = {number(c.probability)}" for rank, c in enumerate(alt.now, 1)),
    ]
    if alt.commit_step is None:
        lines.append("not committed yet")
        return "\n".join(lines)
    how = "never accepted: committed from the last argmax" if alt.committed_at_finalize else "first accepted"
    lines.append(f"commit step {alt.commit_step + 1} ({how}), entropy {number(alt.entropy_at_commit)} nats")
    lines += [f"  {rank}. {_show(c.piece)!r:<20} p = {number(c.probability)}" + ("   <- taken" if c == alt.taken else "")
              for rank, c in enumerate(alt.at_commit, 1)]
    lines.append(_almost_sentence(alt))
    return "\n".join(lines)


def alternatives_html(trace: Trace, frame: int, position: int) -> str:
    """The inspector's panel for one token: its candidates at the frame's step and at its commit step.

    A trace without candidates, or a request outside the trace, gives a one-line message, never an error."""
    try:
        block, step = frame_position(trace, frame)
        alt = position_alternatives(trace, block, position, step)
    except AlternativesError as exc:
        return f'<div class="dv-alternatives" style="font-size:13px;opacity:.8">{escape(str(exc))}</div>'
    now_title = f"step {alt.step + 1} · entropy {number(alt.entropy_now)} nats" + (" · accepted" if alt.accepted_now else "")
    parts = [
        '<div class="dv-alternatives" style="font-size:13px;line-height:1.35;display:flex;flex-wrap:wrap;gap:6px 24px">',
        f'<div style="flex:1 1 100%;font-weight:600">position {alt.position} of block {alt.block + 1}</div>',
        _table_html(now_title, alt.now, None),
    ]
    if alt.commit_step is None:
        parts.append('<div style="opacity:.7">not committed yet</div>')
    else:
        how = " (never accepted: last argmax)" if alt.committed_at_finalize else ""
        commit_title = f"commit step {alt.commit_step + 1}{how} · entropy {number(alt.entropy_at_commit)} nats"
        parts.append(_table_html(commit_title, alt.at_commit, alt.taken))
        parts.append(f'<div style="flex:1 1 100%">{escape(_almost_sentence(alt))}</div>')
    return "".join(parts) + "</div>"


def _table_html(title: str, cands: tuple[Candidate, ...], taken: Candidate | None) -> str:
    rows = "".join(
        f'<tr style="border:none;{"font-weight:600" if c == taken else ""}">'
        f'<td style="padding:0 8px 0 0;border:none;font-family:ui-monospace,monospace;white-space:pre">{escape(_show(c.piece))}</td>'
        f'<td style="padding:0;border:none;width:90px"><div style="background:#7c3aed;height:8px;width:{max(c.probability, 0) * 90:.0f}px"></div></td>'
        f'<td style="padding:0 0 0 6px;border:none;font-variant-numeric:tabular-nums">{number(c.probability)}</td></tr>'
        for c in cands
    )
    return (
        f'<div><div style="opacity:.7">{escape(title)}</div>'
        f'<table style="border-collapse:collapse;border:none;color:inherit;font-size:inherit;width:auto">{rows}</table></div>'
    )


def _almost_sentence(alt: PositionAlternatives) -> str:
    """What it took at the commit step, in words: the favourite and the runner-up it almost chose, or a sample
    that was not the favourite and the favourite that was more likely."""
    if alt.taken is None:
        return ""
    outside = np.isnan(alt.taken.probability)  # sampled from beyond the recorded top k
    token = f"{_show(alt.taken.piece)!r}" + (" (outside the recorded candidates)" if outside else f" (p = {number(alt.taken.probability)})")
    if alt.almost is None:
        return f"It took {token}; no other candidate was recorded."
    other = f"{_show(alt.almost.piece)!r} (p = {number(alt.almost.probability)})"
    if outside or alt.margin < 0:
        return f"It sampled {token}, not its most likely candidate: {other} was more likely."
    return f"It took {token}, its most likely candidate; the token it almost chose: {other}."


def _show(piece: str) -> str:
    return piece.replace("\n", "⏎").replace("\t", "⇥")


def _step(trace: Trace, block: int, step: int):
    steps = trace.block_steps(block)
    if not 0 <= step < len(steps):
        raise AlternativesError(f"block {block + 1} has steps 1 to {len(steps)}; there is no step {step + 1}")
    return steps[step]


def _check_position(trace: Trace, position: int) -> None:
    if not 0 <= position < trace.canvas_length:
        raise AlternativesError(f"position {position} is outside the canvas (0 to {trace.canvas_length - 1})")


def _count_blocks(trace: Trace) -> int:
    return len({s.block for s in trace.steps})
