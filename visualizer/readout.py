"""The commit-order readout as text: the figures panel and each token's commit story for tooltips.

    html = render_readout_html(live_readout(trace, frame))   # the compact figures panel
    line = position_tooltip(details)                         # one token's tooltip line
    details = token_details(trace, frame)                    # for render_frame_html(..., details=details)

Steps and blocks are shown counted from 1, as the app's captions count them; the metrics and the
JSON keep the trace's 0-based indices.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from .alternatives import AlternativesError, frame_position
from .metrics import Readout, Undefined, block_position_details
from .metrics.trajectory import block_trajectory
from .numbers import number
from .svg import CONTROL_COLOR, TAU_COLOR
from .trace import Trace


READOUT_TAU_TIP = "Kendall tau_b (tie-aware) between commit step and position, content only: +1 left to right, 0 order-free, -1 right to left."
READOUT_CONTROL_TIP = "Block-sequential control for the same content length: commit = position // 16, tied within a block."


def readout_heading(readout: Readout) -> tuple[str, str]:
    """(where, status) above the readout: which block and step, and whether the values are final."""
    r = readout
    where = f"block {r.block + 1} · after step {r.step + 1}" if r.step is not None else f"block {r.block + 1} · committed"
    status = "final" if r.final else "live: pending positions tied at “later”"
    return where, status + (f" · {r.measured}" if r.thought_tokens or r.pinned_tokens else "")


def readout_rows(readout: Readout) -> list[tuple[str, str, str]]:
    """The readout table as (name, value, tooltip) rows; the live view sends only the values."""
    r = readout
    remasked = ", ".join(map(str, r.remasked_positions[:12])) + (" …" if len(r.remasked_positions) > 12 else "")
    rows = [
        ("content positions", f"{r.content_length} (excluded: {r.excluded_eos} EOS, {r.excluded_pad} pad"
         + (f", {r.thought_tokens} thought" if r.thought_tokens and r.measured_length < r.content_length else "")
         + (f", {r.pinned_tokens} pinned: left out of tau_b" if r.pinned_tokens else "") + ")",
         "Trailing EOS and pad are cut: they commit first and would make tau_b look right-to-left."
         + (" The thinking channel's tokens are not the answer: measured only when asked (--include-thought)."
            if r.thought_tokens and r.measured_length < r.content_length else "")
         + ("" if r.final else " Live: read from the current argmax.")),
        ("tau_b with EOS and pad", fmt(r.tau_b_raw),
         "tau_b over every position, EOS and pad included: they commit first and drag it negative. Not a finding."),
        ("committed", _committed(r),
         "Content positions accepted at least once"
         + (", and those never accepted that finalization committed from the last argmax." if r.final else "; pending: not accepted yet.")),
        ("tokens per accept step", fmt(r.tokens_per_accept_step, 1), "Content positions first accepted, per step that first-accepted any."),
        ("same-step pairs", fmt(r.same_step_fraction, 3, percent=True), "Share of content position pairs committed on the same step: their order is not observable."),
        ("denoising steps", f"{r.steps_seen} of a budget of {r.step_budget}",
         "Denoising steps this block has taken, against the sampler's budget (an upper bound: a block may stop early). "
         "The replay's frames are one per step plus one per block commit."),
        ("re-masks", f"{r.remask_events}" + (f" (+{r.remasked_now} now)" if r.remasked_now else "") + (f" · position(s) {remasked}" if remasked else ""),
         "A position accepted at one step and noise at the next (commits are not frozen)."),
        ("monotone run", "yes" if r.monotone else "no", "No re-mask event in the run so far."),
        ("entropy at commit", _nats(r.mean_commit_entropy_nats), "Mean entropy at the step each content position was first accepted."),
        ("mean tau_b, blocks", f"{fmt(r.run_tau_b_mean)} over {r.run_blocks} block(s)" if r.run_blocks else "no block committed yet",
         "Mean of the per-block values of the committed blocks: never pooled across blocks."),
    ]
    return rows


def _committed(r: Readout) -> str:
    """Accepted content positions; a final block has none pending (finalization committed the rest)."""
    if r.final:
        return f"{r.committed + r.pending}" + (f" ({r.pending} only at finalization)" if r.pending else "")
    return f"{r.committed} · {r.pending} pending" + (f" (+{r.new_commits} this step)" if r.step is not None else "")


# The sentence under tau_b, as templates: the live view fills them in the browser from each frame's numbers.
SENTENCE_TAU = "tau_b {tau}: commits {order} (+1 = strictly left to right, 0 = no order, -1 = right to left)."
SENTENCE_UNDEFINED = "tau_b undefined: {reason}."
SENTENCE_CONTROL = " The control ({control}) is what strict left-to-right decoding in 16-token blocks would score at this length."


def readout_sentence(readout: Readout) -> str:
    """tau_b and its control in words, for a reader who does not know Kendall's tau (docs/metrics.md)."""
    r = readout
    if isinstance(r.tau_b, Undefined):
        head = SENTENCE_UNDEFINED.format(reason=r.tau_b.reason)
    else:
        head = SENTENCE_TAU.format(tau=fmt(r.tau_b), order=order_words(r.tau_b))
    return head + ("" if isinstance(r.control_tau_b, Undefined) else SENTENCE_CONTROL.format(control=fmt(r.control_tau_b)))


def order_words(tau: float) -> str:
    """tau_b in words: how far the commits run in reading order."""
    for bound, words in ((0.7, "run left to right"), (0.3, "mostly run left to right"), (0.1, "lean left to right"),
                         (-0.1, "follow no clear order"), (-0.3, "lean right to left"), (-0.7, "mostly run right to left")):
        if tau >= bound:
            return words
    return "run right to left"


def render_readout_html(readout: Readout) -> str:
    """The compact commit-order panel for one frame (see `metrics.live.Readout`)."""
    r = readout
    where, status = readout_heading(r)
    rows = readout_rows(r)
    body = "".join(
        f'<tr title="{escape(tip)}" style="border:none"><td style="opacity:.7;padding:1px 10px 1px 0;border:none">{escape(name)}</td>'
        f'<td style="font-variant-numeric:tabular-nums;padding:1px 0;border:none">{escape(value)}</td></tr>'
        for name, value, tip in rows
    )
    tau_tip, control_tip = READOUT_TAU_TIP, READOUT_CONTROL_TIP
    return (
        '<div class="dv-readout" style="font-size:13px;line-height:1.35">'
        f'<div style="opacity:.7">{escape(where)} · {escape(status)}</div>'
        f'<div style="margin:4px 0 6px 0"><span title="{escape(tau_tip)}" style="font-size:26px;font-weight:600;color:{TAU_COLOR}">'
        f"tau_b {escape(fmt(r.tau_b))}</span>"
        f'<span title="{escape(control_tip)}" style="margin-left:14px;font-size:16px;color:{CONTROL_COLOR}">'
        f"control {escape(fmt(r.control_tau_b))}</span>"
        + f'<div class="dv-readout-sentence" style="font-size:12px;opacity:.85;margin-top:2px">{escape(readout_sentence(r))}</div>'
        + f'</div><table style="border-collapse:collapse;border:none;color:inherit;font-size:inherit;width:auto">{body}</table></div>'
    )


def position_tooltip(d: dict) -> str:
    """One line of text for a token's tooltip, from `metrics.position_details`."""
    if not d.get("started", True):
        return f"position {d['position']}: block not started"
    head = f"position {d['position']}" + (f" {d['piece']!r}" if d["piece"] is not None else " (noise)")
    return f"{head} · {commit_story(d)} · entropy now {number(d['entropy_nats_now'])} nats"


def commit_story(d: dict) -> str:
    """A position's commit step, settle step and re-mask history, from `metrics.position_details`.

    Steps and blocks are shown counted from 1, as the app's captions count them; the metrics and
    the JSON keep the trace's 0-based step indices.
    """
    if d["pending"]:
        commit = "not accepted yet"
    elif d["committed_at_finalize"]:
        commit = f"never accepted: committed at finalization ({number(d['commit_entropy_nats'])} nats)"
    else:
        commit = f"commit step {d['commit_step'] + 1} ({number(d['commit_entropy_nats'])} nats)"
    settle = f"{'settled' if d['settled'] else 'argmax unchanged since'} step {d['settle_step'] + 1}"
    remask = f"re-masked at step {', '.join(str(t + 1) for t in d['remask_steps'])}" if d["remask_steps"] else "never re-masked"
    excluded = f"excluded from tau_b ({d['excluded']}) · " if not d["content"] else ""
    return f"{excluded}{commit} · {settle} · {remask}"


def token_details(trace: Trace, frame: int, *, refs=None) -> Callable[[int, int], str]:
    """`details(block, position) -> str` for the canvas renderers' tooltips: each token's commit story.

    Each block's details are computed once, on first use, for the frame given.
    """
    per_block: dict[int, list[dict]] = {}

    def details(block: int, position: int) -> str:
        if block not in per_block:
            per_block[block] = block_position_details(trace, block, frame=frame, refs=refs)
        d = per_block[block][position]
        return commit_story(d) if d["started"] else ""

    return details


def _nats(value) -> str:
    return "undefined" if isinstance(value, Undefined) else f"{number(value)} nats"


def fmt(value, digits: int = 3, *, percent: bool = False, unit: str = "") -> str:
    if isinstance(value, Undefined):
        return "undefined"
    if percent:
        return f"{value * 100:.{max(digits - 2, 0)}f}%"
    return f"{value:.{digits}f}{unit}"


def trajectory_line(trace: Trace, block: int, step: int, position: int) -> str:
    """The token inspector's line on a position read against its block's end (`metrics.trajectory`): when its
    argmax reached the committed token for good, how often it flipped, the top-2 margin and the KL to the final
    step at `step` where recorded. Steps counted from 1; a block not yet committed says so."""
    if block >= len(trace.blocks):
        return "finalized step: known once the block is committed"
    t = block_trajectory(trace, block)
    finalized = int(t.finalized_step[position])
    lag = int(t.commit_after_finalized_steps[position])
    parts = [f"finalized at step {finalized + 1}" if finalized < t.steps_used else "never finalized (the last argmax is not the committed token)",
             f"{int(t.argmax_flips[position])} argmax flip(s)"]
    if finalized < t.steps_used:
        parts.append(f"accepted {lag} step(s) after it was decided" if lag >= 0 else f"accepted {-lag} step(s) before it was decided")
    steps = trace.block_steps(block)
    if not isinstance(t.top2_margin, Undefined):
        parts.append(f"top-2 margin at step {step + 1}: {number(t.top2_margin[step, position])}")
    if steps[step].kl_to_final_nats is not None:
        parts.append(f"KL to final at step {step + 1}: {number(steps[step].kl_to_final_nats[position])} nats")
    return " · ".join(parts)


def trajectory_html(trace: Trace, frame: int, position: int) -> str:
    """`trajectory_line` for the inspector's panel, at the step of frame `frame` ("" where the request is outside the trace)."""
    try:
        block, step = frame_position(trace, frame)
    except AlternativesError:
        return ""  # the alternatives above said why
    if not 0 <= position < trace.canvas_length:
        return ""
    return f'<div class="dv-trajectory" style="font-size:13px;opacity:.85;margin-top:4px">{escape(trajectory_line(trace, block, step, position))}</div>'
