"""Commit-order charts as self-contained HTML strings (inline SVG, no JS), and the panel that lays them out.

Pure functions of (trace, block, frame): the same inputs give the same string, so a replayed
trace shows exactly what the live run showed.  Hovering shows `<title>` tooltips.  Text and axes
use `currentColor`, so the charts follow the page's light or dark theme.

    html = tau_over_steps_svg(trace, block, frame=frame)     # tau_b after each step + control
    html = entropy_heatmap_svg(trace, block, frame=frame)    # positions x steps, commits marked
    html = commits_per_step_svg(trace, block, frame=frame)   # first acceptances (and re-masks) per step
    html = commit_panel_html(trace, frame)                   # the readout and the charts, laid out

The browser draws the same three charts from the live log (`static/live_view.js`: drawTau, drawCommits,
drawHeatmap); these serve the `show_frame` API, which has no JS. tests/test_browser_charts.py holds the
two drawings to the same lines, dots, bars and heatmap colours.

The readout panel and the tooltip text are in `visualizer.readout` (`token_details` is
re-exported here for the app); the drawing primitives are in `visualizer.svg`.

`frame` (an index into `visualizer.states.frame_refs(trace)`) limits the chart to what existed at
that frame and draws a cursor at its step; None shows the whole block.  `block` is 0-based, as in
the records; what is drawn counts blocks and steps from 1, as the app's captions do.
"""

from __future__ import annotations

import math

import numpy as np

from .metrics import (
    Undefined,
    block_commits,
    block_position_details,
    block_steps_at,
    cursor_step,
    live_readout,
    tau_series,
)
from .metrics.commits import step_budget
from .metrics.measured import measured_positions, pinned_row
from .palette import STANDARD
from .readout import fmt, position_tooltip, render_readout_html, token_details
from .states import frame_refs
from .svg import (
    COMMIT_COLOR,
    CONTROL_COLOR,
    CURSOR_COLOR,
    MARK_COLOR,
    REMASK_COLOR,
    TAU_COLOR,
    Plot,
    bar,
    cursor,
    defined_runs,
    heatmap_key,
    hline,
    hover_rect,
    or_default,
    png,
    polyline,
    step_axis,
    svg_text,
    title_text,
)
from .trace import Trace

__all__ = ["tau_over_steps_svg", "entropy_heatmap_svg", "commits_per_step_svg", "commit_panel_html", "token_details"]

PIN_COLOR = STANDARD.pin  # pinned positions (record --pin), an intervention rather than a sampler state: as on the canvas
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
    plot = Plot(width, height, left=36, right=92, top=22, bottom=24)
    x = lambda step: plot.x0 + (step + 0.5) * plot.w / n_cols  # noqa: E731
    y = lambda value: plot.y0 + (1 - value) / 2 * plot.h  # noqa: E731
    parts = [title_text(plot, f"Block {block + 1}: tau_b after each step")]
    for value in (-1, -0.5, 0, 0.5, 1):
        parts.append(hline(plot, y(value), opacity=0.35 if value == 0 else 0.12))
        parts.append(svg_text(plot.x0 - 4, y(value) + 4, f"{value:g}", anchor="end"))
    parts.append(step_axis(plot, n_cols, x))
    parts.append(polyline([(x(p.step), y(p.control_tau_b)) for p in series if not isinstance(p.control_tau_b, Undefined)], CONTROL_COLOR, dash="4 3"))
    for run in defined_runs(series):
        parts.append(polyline([(x(p.step), y(p.tau_b)) for p in run], TAU_COLOR))
    for p in series:
        if not isinstance(p.tau_b, Undefined):
            parts.append(f'<circle cx="{x(p.step):.1f}" cy="{y(p.tau_b):.1f}" r="2.2" fill="{TAU_COLOR}"/>')
    parts.append(cursor(plot, cursor_step(trace, block, frame=frame, refs=refs), x))
    for p in series:  # hover targets: one column per step
        tip = (
            f"step {p.step + 1}: tau_b {fmt(p.tau_b)} · control {fmt(p.control_tau_b)} · "
            f"{p.committed} of {p.measured_length} measured positions committed"
        )
        parts.append(hover_rect(x(p.step) - plot.w / n_cols / 2, plot.y0, plot.w / n_cols, plot.h, tip))
    if series:
        last = series[-1]
        parts.append(svg_text(plot.x1 + 6, y(or_default(last.tau_b, 0)) + 4, f"tau_b {fmt(last.tau_b)}", fill=TAU_COLOR, anchor="start"))
        if not isinstance(last.control_tau_b, Undefined):
            parts.append(svg_text(plot.x1 + 6, y(last.control_tau_b) - 6, f"control {fmt(last.control_tau_b)}", fill=CONTROL_COLOR, anchor="start"))
    else:
        parts.append(svg_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", anchor="middle"))
    return plot.svg(parts, label=f"tau_b over steps, block {block + 1}")


# ---- entropy heatmap --------------------------------------------------------------------------
def entropy_heatmap_svg(trace: Trace, block: int, *, frame: int | None = None, refs=None, width: int = 780, height: int = 260) -> str:
    """Entropy at every position (x) and step (y, downwards); first acceptances outlined."""
    steps = block_steps_at(trace, block, frame=frame, refs=refs)
    budget = step_budget(trace)
    n_rows = max(budget if budget <= MAX_FIXED_ROWS else len(steps), len(steps), 1)
    canvas = trace.canvas_length
    plot = Plot(width, height, left=36, right=12, top=22, bottom=40)
    cell_w, cell_h = plot.w / canvas, plot.h / n_rows
    parts = [title_text(plot, f"Block {block + 1}: entropy per position and step (outlined: first acceptance)")]
    if not steps:
        parts.append(svg_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", anchor="middle"))
        return plot.svg(parts, label=f"entropy heatmap, block {block + 1}")
    commits = block_commits(trace, block, steps=steps)
    log_max = math.log10(max(math.log(trace.model.vocab_size), 10 * ENTROPY_FLOOR_NATS))
    rgba = np.zeros((n_rows, canvas, 4), dtype=np.uint8)
    rgba[: len(steps), :, :3] = _colormap(commits.entropy_nats, log_max)
    rgba[: len(steps), :, 3] = 255
    parts.append(
        f'<image x="{plot.x0}" y="{plot.y0}" width="{plot.w}" height="{plot.h}" preserveAspectRatio="none" '
        f'style="image-rendering:pixelated" href="data:image/png;base64,{png(rgba)}"/>'
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
        parts.append(svg_text(plot.x0 + plot.w / 2, plot.y0 + (len(steps) + n_rows) / 2 * cell_h, note, anchor="middle", size=10))
    pinned = np.flatnonzero(pinned_row(trace, block))
    if pinned.size:  # record --pin: the intervention's positions, marked above their columns
        marks = "".join(f"M{plot.x0 + (p + 0.5) * cell_w - 3:.1f} {plot.y0 - 5:.1f}h6l-3 5z" for p in pinned)
        parts.append(f'<path d="{marks}" fill="{PIN_COLOR}"><title>pinned: {", ".join(map(str, pinned))}</title></path>')
    if commits.content_length < canvas:
        bx = plot.x0 + commits.content_length * cell_w
        parts.append(f'<line x1="{bx:.1f}" x2="{bx:.1f}" y1="{plot.y0 - 4}" y2="{plot.y1}" stroke="currentColor" stroke-dasharray="3 2"/>')
        parts.append(svg_text(bx + 3, plot.y0 - 2, "EOS/pad (excluded) →", anchor="start", size=9))
    for value in (0, len(steps) - 1) if len(steps) > 1 else (0,):
        parts.append(svg_text(plot.x0 - 4, plot.y0 + (value + 0.7) * cell_h, f"{value + 1}", anchor="end", size=9))
    parts.append(svg_text(plot.x0 - 24, plot.y0 + plot.h / 2, "step", anchor="middle", size=9))
    for position in range(0, canvas, 32 if canvas > 64 else 8):
        parts.append(svg_text(plot.x0 + (position + 0.5) * cell_w, plot.y1 + 11, f"{position}", anchor="middle", size=9))
    parts.append(_colorbar(plot, log_max))
    parts.append(heatmap_key(plot, "colour: dark = confident (low entropy), yellow = uncertain", pin_color=PIN_COLOR if pinned.size else None))
    step = cursor_step(trace, block, frame=frame, refs=refs)
    if step is not None:
        cy = plot.y0 + (step + 1) * cell_h
        parts.append(f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="{CURSOR_COLOR}" stroke-width="1.5"/>')
    for d in block_position_details(trace, block, frame=frame, refs=refs):
        parts.append(hover_rect(plot.x0 + d["position"] * cell_w, plot.y0, cell_w, plot.h, position_tooltip(d)))
    return plot.svg(parts, label=f"entropy heatmap, block {block + 1}")


# ---- commits per step ---------------------------------------------------------------------------
def commits_per_step_svg(trace: Trace, block: int, *, frame: int | None = None, refs=None, width: int = 480, height: int = 170) -> str:
    """Content positions first accepted at each step (up) and re-mask events (down)."""
    steps = block_steps_at(trace, block, frame=frame, refs=refs)
    n_cols = max(step_budget(trace), len(steps), 1) + 1  # the last column: committed at finalization
    plot = Plot(width, height, left=36, right=30, top=22, bottom=24)
    title = f"Block {block + 1}: commits per step (first acceptance, content only)"
    if not steps:
        parts = [title_text(plot, title), svg_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "block not started", anchor="middle")]
        return plot.svg(parts, label=f"commits per step, block {block + 1}")
    commits = block_commits(trace, block, steps=steps)
    n = commits.content_length
    measured = measured_positions(trace, block, commits.tokens, n)  # the answer, as the readout measures it
    if measured.thought_tokens:
        title = f"Block {block + 1}: commits per step (first acceptance, {measured.label})"
    parts = [title_text(plot, title)]
    ever = commits.ever_accepted[:n][measured.keep]
    up = np.bincount(commits.commit_step[:n][measured.keep][ever], minlength=len(steps))
    down = np.bincount(commits.remask_events[:, 0], minlength=len(steps)) if len(commits.remask_events) else np.zeros(len(steps), int)
    at_finalize = int(measured.count - ever.sum()) if commits.final else 0
    top = max(int(up.max()), at_finalize, 1)
    bottom = max(int(down.max()), 1) if down.any() else 0
    scale = plot.h / (top + bottom)
    zero = plot.y0 + top * scale
    bar_w = plot.w / n_cols
    x = lambda step: plot.x0 + (step + 0.5) * bar_w  # noqa: E731
    parts.append(hline(plot, zero, opacity=0.5))
    parts.append(svg_text(plot.x0 - 4, plot.y0 + 8, str(top), anchor="end", size=9))
    if bottom:
        parts.append(svg_text(plot.x0 - 4, plot.y1, f"-{bottom}", anchor="end", size=9))
    for t in range(len(steps)):
        tip = f"step {t + 1}: {up[t]} content position(s) first accepted, {down[t]} re-mask event(s)"
        if up[t]:
            parts.append(bar(x(t) - bar_w * 0.4, zero - up[t] * scale, bar_w * 0.8, up[t] * scale, COMMIT_COLOR))
        if down[t]:
            parts.append(bar(x(t) - bar_w * 0.4, zero, bar_w * 0.8, down[t] * scale, REMASK_COLOR))
        parts.append(hover_rect(x(t) - bar_w / 2, plot.y0, bar_w, plot.h, tip))
    if commits.final:
        fx = x(n_cols - 1)
        tip = f"committed at finalization (never accepted by the sampler): {at_finalize} content position(s)"
        if at_finalize:
            parts.append(bar(fx - bar_w * 0.4, zero - at_finalize * scale, bar_w * 0.8, at_finalize * scale, "currentColor", opacity=0.6))
        parts.append(svg_text(fx, plot.y1 + 14, "F", anchor="middle", size=9))
        parts.append(hover_rect(fx - bar_w / 2, plot.y0, bar_w, plot.h, tip))
    parts.append(step_axis(plot, n_cols - 1, x))
    parts.append(cursor(plot, cursor_step(trace, block, frame=frame, refs=refs), x))
    return plot.svg(parts, label=f"commits per step, block {block + 1}")


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


# ---- the entropy colour scale -------------------------------------------------------------------
def _colormap(entropy: np.ndarray, log_max: float) -> np.ndarray:
    """(rows, canvas) entropy -> (rows, canvas, 3) uint8 viridis, log scale from the floor."""
    log_min = math.log10(ENTROPY_FLOOR_NATS)
    level = (np.log10(np.maximum(entropy, ENTROPY_FLOOR_NATS)) - log_min) / (log_max - log_min)
    position = np.clip(level, 0, 1) * (len(_VIRIDIS) - 1)
    low = np.floor(position).astype(int).clip(0, len(_VIRIDIS) - 2)
    frac = (position - low)[..., None]
    return (_VIRIDIS[low] * (1 - frac) + _VIRIDIS[low + 1] * frac).round().astype(np.uint8)


def _colorbar(plot: Plot, log_max: float) -> str:
    n = 64
    ramp = np.zeros((1, n, 4), dtype=np.uint8)
    ramp[0, :, :3] = _colormap(10 ** np.linspace(math.log10(ENTROPY_FLOOR_NATS), log_max, n)[None, :], log_max)[0]
    ramp[0, :, 3] = 255
    x, y, w = plot.x1 - 180, plot.y1 + 20, 120
    parts = [
        svg_text(x - 4, y + 8, "entropy", anchor="end", size=9),
        f'<image x="{x}" y="{y}" width="{w}" height="8" preserveAspectRatio="none" href="data:image/png;base64,{png(ramp)}"/>',
        svg_text(x, y + 18, f"≤{ENTROPY_FLOOR_NATS:g}", anchor="middle", size=8),
        svg_text(x + w, y + 18, f"{10 ** log_max:.1f} nats", anchor="middle", size=8),
    ]
    return "".join(parts)
