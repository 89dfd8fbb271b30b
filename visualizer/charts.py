"""Commit-order charts and the readout panel as self-contained HTML strings (inline SVG, no JS).

Pure functions of (trace, block, frame): the same inputs give the same string, so a replayed
trace shows exactly what the live run showed.  Hovering shows `<title>` tooltips.  Text and axes
use `currentColor`, so the charts follow the page's light or dark theme.

    html = tau_over_steps_svg(trace, block, frame=frame)     # tau_b after each step + control
    html = entropy_heatmap_svg(trace, block, frame=frame)    # positions x steps, commits marked
    html = commits_per_step_svg(trace, block, frame=frame)   # first acceptances (and re-masks) per step
    html = render_readout_html(live_readout(trace, frame))   # the compact figures panel
    html = commit_panel_html(trace, frame)                   # all of the above, laid out
    details = token_details(trace, frame)                    # for render_frame_html(..., details=details)

`frame` (an index into `visualizer.states.frame_refs(trace)`) limits the chart to what existed at
that frame and draws a cursor at its step; None shows the whole block.  `block` is 0-based, as in
the records; what is drawn counts blocks and steps from 1, as the app's captions do.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Callable
from html import escape

import numpy as np
from PIL import Image

from .metrics import (
    Readout,
    Undefined,
    block_commits,
    block_position_details,
    block_steps_at,
    cursor_step,
    live_readout,
    tau_series,
)
from .metrics.commits import step_budget
from .states import frame_refs
from .trace import Trace

TAU_COLOR = "#7c3aed"  # purple, as the kept-draft state
CONTROL_COLOR = "#9ca3af"
CURSOR_COLOR = "#f59e0b"
COMMIT_COLOR = "#16a34a"  # green, as the "new" state: a first acceptance
REMASK_COLOR = "#9ca3af"  # gray, as the re-masked state
MARK_COLOR = "#ef4444"
MAX_FIXED_ROWS = 128  # heatmaps keep one row per budgeted step up to this budget, so they never jump
ENTROPY_FLOOR_NATS = 1e-3  # the colour scale is logarithmic from here to ln(vocab)

# viridis at 9 stops: dark = confident (low entropy), yellow = uncertain.
_VIRIDIS = np.array(
    [
        [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
        [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
    ],
    dtype=float,
)


# ---- tau_b over steps --------------------------------------------------------------------------
def tau_over_steps_svg(trace: Trace, block: int, *, frame: int | None = None, refs=None, width: int = 480, height: int = 200) -> str:
    """tau_b of the block after each step (pending positions tied at "later"), with its control."""
    series = tau_series(trace, block, frame=frame, refs=refs)
    n_cols = max(step_budget(trace), len(series), 1)
    plot = _Plot(width, height, left=36, right=92, top=22, bottom=24)
    x = lambda step: plot.x0 + (step + 0.5) * plot.w / n_cols  # noqa: E731
    y = lambda value: plot.y0 + (1 - value) / 2 * plot.h  # noqa: E731
    parts = [_title_text(plot, f"Block {block + 1}: tau_b after each step")]
    for value in (-1, -0.5, 0, 0.5, 1):
        parts.append(_hline(plot, y(value), opacity=0.35 if value == 0 else 0.12))
        parts.append(_text(plot.x0 - 4, y(value) + 4, f"{value:g}", anchor="end"))
    parts.append(_step_axis(plot, n_cols, x))
    parts.append(_polyline([(x(p.step), y(p.control_tau_b)) for p in series if not isinstance(p.control_tau_b, Undefined)], CONTROL_COLOR, dash="4 3"))
    for run in _defined_runs(series):
        parts.append(_polyline([(x(p.step), y(p.tau_b)) for p in run], TAU_COLOR))
    for p in series:
        if not isinstance(p.tau_b, Undefined):
            parts.append(f'<circle cx="{x(p.step):.1f}" cy="{y(p.tau_b):.1f}" r="2.2" fill="{TAU_COLOR}"/>')
    parts.append(_cursor(plot, cursor_step(trace, block, frame=frame, refs=refs), x))
    for p in series:  # hover targets: one column per step
        tip = (
            f"step {p.step + 1}: tau_b {_fmt(p.tau_b)} · control {_fmt(p.control_tau_b)} · "
            f"{p.committed} of {p.content_length} content positions committed"
        )
        parts.append(_hover_rect(x(p.step) - plot.w / n_cols / 2, plot.y0, plot.w / n_cols, plot.h, tip))
    if series:
        last = series[-1]
        parts.append(_text(plot.x1 + 6, y(_or(last.tau_b, 0)) + 4, f"tau_b {_fmt(last.tau_b)}", fill=TAU_COLOR, anchor="start"))
        if not isinstance(last.control_tau_b, Undefined):
            parts.append(_text(plot.x1 + 6, y(last.control_tau_b) - 6, f"control {_fmt(last.control_tau_b)}", fill=CONTROL_COLOR, anchor="start"))
    else:
        parts.append(_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", anchor="middle"))
    return plot.svg(parts, label=f"tau_b over steps, block {block + 1}")


# ---- entropy heatmap --------------------------------------------------------------------------
def entropy_heatmap_svg(trace: Trace, block: int, *, frame: int | None = None, refs=None, width: int = 780, height: int = 260) -> str:
    """Entropy at every position (x) and step (y, downwards); first acceptances outlined."""
    steps = block_steps_at(trace, block, frame=frame, refs=refs)
    budget = step_budget(trace)
    n_rows = max(budget if budget <= MAX_FIXED_ROWS else len(steps), len(steps), 1)
    canvas = trace.canvas_length
    plot = _Plot(width, height, left=36, right=12, top=22, bottom=40)
    cell_w, cell_h = plot.w / canvas, plot.h / n_rows
    parts = [_title_text(plot, f"Block {block + 1}: entropy per position and step (outlined: first acceptance)")]
    if not steps:
        parts.append(_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", anchor="middle"))
        return plot.svg(parts, label=f"entropy heatmap, block {block + 1}")
    commits = block_commits(trace, block, steps=steps)
    log_max = math.log10(max(math.log(trace.model.vocab_size), 10 * ENTROPY_FLOOR_NATS))
    rgba = np.zeros((n_rows, canvas, 4), dtype=np.uint8)
    rgba[: len(steps), :, :3] = _colormap(commits.entropy_nats, log_max)
    rgba[: len(steps), :, 3] = 255
    parts.append(
        f'<image x="{plot.x0}" y="{plot.y0}" width="{plot.w}" height="{plot.h}" preserveAspectRatio="none" '
        f'style="image-rendering:pixelated" href="data:image/png;base64,{_png(rgba)}"/>'
    )
    marks = [
        f"M{plot.x0 + p * cell_w:.2f} {plot.y0 + commits.commit_step[p] * cell_h:.2f}h{cell_w:.2f}v{cell_h:.2f}h{-cell_w:.2f}z"
        for p in np.flatnonzero(commits.ever_accepted)
    ]
    if marks:
        parts.append(f'<path d="{"".join(marks)}" fill="none" stroke="{MARK_COLOR}" stroke-width="{min(1.2, cell_w / 2):.2f}"/>')
    if commits.final and len(steps) < n_rows:
        record = trace.blocks[block]
        note = f"stopped after {len(steps)} of {n_rows} steps ({record.stop_reason.replace('_', ' ')})"
        parts.append(_text(plot.x0 + plot.w / 2, plot.y0 + (len(steps) + n_rows) / 2 * cell_h, note, anchor="middle", size=10))
    if commits.content_length < canvas:
        bx = plot.x0 + commits.content_length * cell_w
        parts.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{plot.y0 - 4}" y2="{plot.y1}" stroke="currentColor" stroke-dasharray="3 2"/>')
        parts.append(_text(bx + 3, plot.y0 - 2, "EOS/pad (excluded) →", anchor="start", size=9))
    for value in (0, len(steps) - 1) if len(steps) > 1 else (0,):
        parts.append(_text(plot.x0 - 4, plot.y0 + (value + 0.7) * cell_h, f"{value + 1}", anchor="end", size=9))
    parts.append(_text(plot.x0 - 24, plot.y0 + plot.h / 2, "step", anchor="middle", size=9))
    for position in range(0, canvas, 32 if canvas > 64 else 8):
        parts.append(_text(plot.x0 + (position + 0.5) * cell_w, plot.y1 + 11, f"{position}", anchor="middle", size=9))
    parts.append(_colorbar(plot, log_max))
    step = cursor_step(trace, block, frame=frame, refs=refs)
    if step is not None:
        cy = plot.y0 + (step + 1) * cell_h
        parts.append(f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="{CURSOR_COLOR}" stroke-width="1.5"/>')
    for d in block_position_details(trace, block, frame=frame, refs=refs):
        parts.append(_hover_rect(plot.x0 + d["position"] * cell_w, plot.y0, cell_w, plot.h, position_tooltip(d)))
    return plot.svg(parts, label=f"entropy heatmap, block {block + 1}")


# ---- commits per step ---------------------------------------------------------------------------
def commits_per_step_svg(trace: Trace, block: int, *, frame: int | None = None, refs=None, width: int = 480, height: int = 170) -> str:
    """Content positions first accepted at each step (up) and re-mask events (down)."""
    steps = block_steps_at(trace, block, frame=frame, refs=refs)
    n_cols = max(step_budget(trace), len(steps), 1) + 1  # the last column: committed at finalization
    plot = _Plot(width, height, left=36, right=30, top=22, bottom=24)
    parts = [_title_text(plot, f"Block {block + 1}: commits per step (first acceptance, content only)")]
    if not steps:
        parts.append(_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", anchor="middle"))
        return plot.svg(parts, label=f"commits per step, block {block + 1}")
    commits = block_commits(trace, block, steps=steps)
    n = commits.content_length
    ever = commits.ever_accepted[:n]
    up = np.bincount(commits.commit_step[:n][ever], minlength=len(steps))
    down = np.bincount(commits.remask_events[:, 0], minlength=len(steps)) if len(commits.remask_events) else np.zeros(len(steps), int)
    at_finalize = int(n - ever.sum()) if commits.final else 0
    top = max(int(up.max()), at_finalize, 1)
    bottom = max(int(down.max()), 1) if down.any() else 0
    scale = plot.h / (top + bottom)
    zero = plot.y0 + top * scale
    bar_w = plot.w / n_cols
    x = lambda step: plot.x0 + (step + 0.5) * bar_w  # noqa: E731
    parts.append(_hline(plot, zero, opacity=0.5))
    parts.append(_text(plot.x0 - 4, plot.y0 + 8, str(top), anchor="end", size=9))
    if bottom:
        parts.append(_text(plot.x0 - 4, plot.y1, f"-{bottom}", anchor="end", size=9))
    for t in range(len(steps)):
        tip = f"step {t + 1}: {up[t]} content position(s) first accepted, {down[t]} re-mask event(s)"
        if up[t]:
            parts.append(_bar(x(t) - bar_w * 0.4, zero - up[t] * scale, bar_w * 0.8, up[t] * scale, COMMIT_COLOR))
        if down[t]:
            parts.append(_bar(x(t) - bar_w * 0.4, zero, bar_w * 0.8, down[t] * scale, REMASK_COLOR))
        parts.append(_hover_rect(x(t) - bar_w / 2, plot.y0, bar_w, plot.h, tip))
    if commits.final:
        fx = x(n_cols - 1)
        tip = f"committed at finalization (never accepted by the sampler): {at_finalize} content position(s)"
        if at_finalize:
            parts.append(_bar(fx - bar_w * 0.4, zero - at_finalize * scale, bar_w * 0.8, at_finalize * scale, "currentColor", opacity=0.6))
        parts.append(_text(fx, plot.y1 + 14, "F", anchor="middle", size=9))
        parts.append(_hover_rect(fx - bar_w / 2, plot.y0, bar_w, plot.h, tip))
    parts.append(_step_axis(plot, n_cols - 1, x))
    parts.append(_cursor(plot, cursor_step(trace, block, frame=frame, refs=refs), x))
    return plot.svg(parts, label=f"commits per step, block {block + 1}")


# ---- readout panel ----------------------------------------------------------------------------
READOUT_TAU_TIP = "Kendall tau_b (tie-aware) between commit step and position, content only: +1 left to right, 0 order-free, -1 right to left."
READOUT_CONTROL_TIP = "Block-sequential control for the same content length: commit = position // 16, tied within a block."


def readout_heading(readout: Readout) -> tuple[str, str]:
    """(where, status) above the readout: which block and step, and whether the values are final."""
    r = readout
    where = f"block {r.block + 1} · after step {r.step + 1}" if r.step is not None else f"block {r.block + 1} · committed"
    return where, "final" if r.final else "live: pending positions tied at “later”"


def readout_rows(readout: Readout) -> list[tuple[str, str, str]]:
    """The readout table as (name, value, tooltip) rows; the live view sends only the values."""
    r = readout
    remasked = ", ".join(map(str, r.remasked_positions[:12])) + (" …" if len(r.remasked_positions) > 12 else "")
    rows = [
        ("content positions", f"{r.content_length} (excluded: {r.excluded_eos} EOS, {r.excluded_pad} pad)",
         "Trailing EOS and pad are cut: they commit first and would make tau_b look right-to-left."
         + ("" if r.final else " Live: read from the current argmax.")),
        ("raw tau_b (uncut)", _fmt(r.tau_b_raw),
         "tau_b over every position, EOS and pad included: they commit first and drag it negative. Not a finding."),
        ("committed / pending", f"{r.committed} / {r.pending}" + (f" (+{r.new_commits} this step)" if r.step is not None else ""),
         "Content positions accepted at least once / never accepted"
         + (" (committed at finalization from the last argmax)." if r.final else " yet.")),
        ("tokens per accept step", _fmt(r.tokens_per_accept_step, 1), "Content positions first accepted, per step that first-accepted any."),
        ("same-step pairs", _fmt(r.same_step_fraction, 3, percent=True), "Share of content position pairs committed on the same step: their order is not observable."),
        ("steps used", f"{r.steps_seen} / {r.step_budget}", "Denoising steps of this block against the budget."),
        ("re-masks", f"{r.remask_events}" + (f" (+{r.remasked_now} now)" if r.remasked_now else "") + (f" · position(s) {remasked}" if remasked else ""),
         "A position accepted at one step and noise at the next (commits are not frozen)."),
        ("monotone run", "yes" if r.monotone else "no", "No re-mask event in the run so far."),
        ("entropy at commit", _fmt(r.mean_commit_entropy_nats, 4, unit=" nats"), "Mean entropy at the step each content position was first accepted."),
        ("mean tau_b, blocks", f"{_fmt(r.run_tau_b_mean)} over {r.run_blocks} block(s)" if r.run_blocks else "no block committed yet",
         "Mean of the per-block values of the committed blocks: never pooled across blocks."),
    ]
    return rows


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
        f"tau_b {escape(_fmt(r.tau_b))}</span>"
        f'<span title="{escape(control_tip)}" style="margin-left:14px;font-size:16px;color:{CONTROL_COLOR}">'
        f"control {escape(_fmt(r.control_tau_b))}</span>"
        + (f'<div style="font-size:11px;opacity:.7">{escape(r.tau_b.reason)}</div>' if isinstance(r.tau_b, Undefined) else "")
        + f'</div><table style="border-collapse:collapse;border:none;color:inherit;font-size:inherit;width:auto">{body}</table></div>'
    )


def position_tooltip(d: dict) -> str:
    """One line of text for a token's tooltip, from `metrics.position_details`."""
    if not d.get("started", True):
        return f"position {d['position']}: block not started"
    head = f"position {d['position']}" + (f" {d['piece']!r}" if d["piece"] is not None else " (noise)")
    return f"{head} · {commit_story(d)} · entropy now {d['entropy_nats_now']:.3g} nats"


def commit_story(d: dict) -> str:
    """A position's commit step, settle step and re-mask history, from `metrics.position_details`.

    Steps and blocks are shown counted from 1, as the app's captions count them; the metrics and
    the JSON keep the trace's 0-based step indices.
    """
    if d["pending"]:
        commit = "not accepted yet"
    elif d["committed_at_finalize"]:
        commit = f"never accepted: committed at finalization ({d['commit_entropy_nats']:.3g} nats)"
    else:
        commit = f"commit step {d['commit_step'] + 1} ({d['commit_entropy_nats']:.3g} nats)"
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


def commit_panel_html(trace: Trace, frame: int, *, refs=None) -> str:
    """The whole commit-order panel at one frame: readout, tau_b over steps, commits per step, heatmap."""
    refs = refs if refs is not None else frame_refs(trace)
    if not refs:
        return ""
    block = refs[frame].block
    readout = render_readout_html(live_readout(trace, frame, refs=refs))
    return (
        '<div class="dv-commit-panel" style="display:flex;flex-wrap:wrap;gap:12px 20px;align-items:flex-start">'
        f'<div style="flex:1 1 300px">{readout}</div>'
        f'<div style="flex:1 1 420px">{tau_over_steps_svg(trace, block, frame=frame, refs=refs)}'
        f"{commits_per_step_svg(trace, block, frame=frame, refs=refs)}</div>"
        f'<div style="flex:1 1 100%">{entropy_heatmap_svg(trace, block, frame=frame, refs=refs)}</div></div>'
    )


# ---- drawing helpers ----------------------------------------------------------------------------
class _Plot:
    def __init__(self, width: int, height: int, *, left: int, right: int, top: int, bottom: int):
        self.width, self.height = width, height
        self.x0, self.y0 = left, top
        self.x1, self.y1 = width - right, height - bottom
        self.w, self.h = self.x1 - self.x0, self.y1 - self.y0

    def svg(self, parts: list[str], *, label: str) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" role="img" '
            f'aria-label="{escape(label)}" style="width:100%;max-width:{self.width}px;height:auto;'
            f'font-family:ui-sans-serif,system-ui,sans-serif;color:inherit">' + "".join(parts) + "</svg>"
        )


def _fmt(value, digits: int = 3, *, percent: bool = False, unit: str = "") -> str:
    if isinstance(value, Undefined):
        return "undefined"
    if percent:
        return f"{value * 100:.{max(digits - 2, 0)}f}%"
    return f"{value:.{digits}f}{unit}"


def _or(value, default: float) -> float:
    return default if isinstance(value, Undefined) else value


def _defined_runs(series) -> list[list]:
    """Consecutive points with a defined tau_b: the line breaks where it is undefined."""
    runs, current = [], []
    for p in series:
        if isinstance(p.tau_b, Undefined):
            if current:
                runs.append(current)
            current = []
        else:
            current.append(p)
    return runs + ([current] if current else [])


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 10, fill: str = "currentColor") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>'


def _title_text(plot: _Plot, text: str) -> str:
    return _text(plot.x0, 13, text, size=11)


def _hline(plot: _Plot, y: float, *, opacity: float) -> str:
    return f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" stroke-opacity="{opacity}"/>'


def _polyline(points: list, color: str, *, dash: str | None = None) -> str:
    if not points:
        return ""
    if len(points) == 1:
        (px, py), = points
        points = [(px - 3, py), (px + 3, py)]
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    return f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.8"{dash_attr}/>'


def _step_axis(plot: _Plot, n_cols: int, x) -> str:
    every = max(1, int(math.ceil(n_cols / 8)))
    labels = [_text(x(t), plot.y1 + 14, str(t + 1), anchor="middle", size=9) for t in range(0, n_cols, every)]
    return "".join(labels) + _text(plot.x1 + 4, plot.y1 + 14, "step", anchor="start", size=9)


def _cursor(plot: _Plot, step: int | None, x) -> str:
    if step is None:
        return ""
    cx = x(step)
    return f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{plot.y0}" y2="{plot.y1}" stroke="{CURSOR_COLOR}" stroke-width="1.5"/>'


def _bar(x: float, y: float, w: float, h: float, color: str, *, opacity: float = 1.0) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{color}" fill-opacity="{opacity}"/>'


def _hover_rect(x: float, y: float, w: float, h: float, tip: str) -> str:
    return (
        f'<rect x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{h:.1f}" fill="#000" fill-opacity="0">'
        f"<title>{escape(tip)}</title></rect>"
    )


def _colormap(entropy: np.ndarray, log_max: float) -> np.ndarray:
    """(rows, canvas) entropy -> (rows, canvas, 3) uint8 viridis, log scale from the floor."""
    log_min = math.log10(ENTROPY_FLOOR_NATS)
    level = (np.log10(np.maximum(entropy, ENTROPY_FLOOR_NATS)) - log_min) / (log_max - log_min)
    position = np.clip(level, 0, 1) * (len(_VIRIDIS) - 1)
    low = np.floor(position).astype(int).clip(0, len(_VIRIDIS) - 2)
    frac = (position - low)[..., None]
    return (_VIRIDIS[low] * (1 - frac) + _VIRIDIS[low + 1] * frac).round().astype(np.uint8)


def _colorbar(plot: _Plot, log_max: float) -> str:
    n = 64
    ramp = np.zeros((1, n, 4), dtype=np.uint8)
    ramp[0, :, :3] = _colormap(10 ** np.linspace(math.log10(ENTROPY_FLOOR_NATS), log_max, n)[None, :], log_max)[0]
    ramp[0, :, 3] = 255
    x, y, w = plot.x1 - 180, plot.y1 + 20, 120
    parts = [
        _text(x - 4, y + 8, "entropy", anchor="end", size=9),
        f'<image x="{x}" y="{y}" width="{w}" height="8" preserveAspectRatio="none" href="data:image/png;base64,{_png(ramp)}"/>',
        _text(x, y + 18, f"≤{ENTROPY_FLOOR_NATS:g}", anchor="middle", size=8),
        _text(x + w, y + 18, f"{10 ** log_max:.1f} nats", anchor="middle", size=8),
    ]
    return "".join(parts)


def _png(rgba: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buffer, format="PNG", optimize=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
