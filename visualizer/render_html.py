"""HTML renderer for the live view: one frame of a trace as a self-contained HTML fragment.

    html = render_frame_html(trace, frame_state(trace, -1), grid_layout(...), STANDARD)

A pure function of its inputs: the same frame gives the same HTML, live or replayed.  Cells are
spans in a `white-space: pre` block of a monospace font, padded to fixed widths by `layout.paint`,
so nothing reflows; every cell has a tooltip (position, state, token, entropy).
"""

from __future__ import annotations

from html import escape

from .layout import PAD_GLYPH, Layout, PaintedCell, paint
from .palette import LEGEND, PAD_LABEL, PIN_BAR_PX, PIN_LABEL, RESAMPLED_LABEL, THOUGHT_BAND_PX, THOUGHT_LABEL, Palette
from .states import FrameState
from .thinking import has_channel
from .trace import Trace

FONT_STACK = "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', monospace"


def frame_caption(trace: Trace, frame: FrameState) -> str:
    """One line saying where the frame is and what the step did."""
    blocks = max(trace.max_blocks, frame.block + 1)
    where = f"Block {frame.block + 1}/{blocks}"
    if frame.kind == "commit":
        committed = frame.counts["committed"]
        # a block's commit is a frame of its own, not a step: say after how many steps, so "Frame 25/25" beside
        # "denoising steps 24" reads as two counts (issue 58)
        steps = sum(1 for s in trace.steps if s.block == frame.block)
        return f"{where} · committed after {steps} step{'' if steps == 1 else 's'} ({committed} positions)"
    c = frame.counts
    return (
        f"{where} · step {frame.step + 1} · {_budget(frame)} · accepted {c['accepted']} "
        f"(new {c['new']}, kept {c['kept']}) · remasked {c['remasked']}"
    )


def _budget(frame: FrameState) -> str:
    """The sampler's step budget after this step: an upper bound, not a forecast (a block may stop early)."""
    left = frame.steps_remaining - 1
    return f"budget: {left} more step{'' if left == 1 else 's'} at most"


def _cell_span(cell: PaintedCell, palette: Palette, marked: bool = False) -> str:
    shadows = []
    if marked:  # a position a branch changed (`render_frame_html(marked=)`): an outline inside the cell, over its marks
        shadows.append(f"inset 0 0 0 1.5px {palette.foreground}")
    if cell.remasked_mark:
        shadows.append(f"inset 0 3px 0 0 {palette.mark}")
    if cell.changed_mark:
        shadows.append(f"inset 0 -2px 0 0 {palette.mark}")
    if cell.thought:  # under the resampled mark, which is drawn on top of it
        shadows.append(f"inset 0 -{THOUGHT_BAND_PX}px 0 0 {palette.thought[1]}")
    if cell.pinned:
        shadows.append(f"inset {PIN_BAR_PX}px 0 0 0 {palette.pin}")
    style = f"color:{cell.fg};background:{cell.bg}"
    if shadows:
        style += ";box-shadow:" + ",".join(shadows)
    return f'<span class="dv-cell dv-{cell.state.name.lower()}" style="{style}" title="{escape(cell.tooltip)}">{escape(cell.text)}</span>'


def legend_html(palette: Palette, *, thought: bool = False, pins: bool = False) -> str:
    """The states' legend; `thought` adds the thinking channel's tint and band, `pins` the pinned positions' bar."""
    items = []
    for state, label in LEGEND:
        fg, bg = palette.colors(state)
        glyph = "░░" if label in ("noise", "remasked") else "ab"
        mark = f";box-shadow:inset 0 3px 0 0 {palette.mark}" if label == "remasked" else ""
        items.append(
            f'<span class="dv-legend-item" style="color:{palette.foreground}"><span style="color:{fg};background:{bg};padding:0 4px{mark}">{glyph}</span> {label}</span>'
        )
    items.append(
        f'<span class="dv-legend-item" style="color:{palette.foreground}"><span style="color:{palette.kept[0]};background:{palette.kept[1]};'
        f'padding:0 4px;box-shadow:inset 0 -2px 0 0 {palette.mark}">ab</span> {RESAMPLED_LABEL}</span>'
    )
    items.append(
        f'<span class="dv-legend-item" style="color:{palette.foreground}"><span style="color:{palette.special};'
        f'padding:0 4px">{PAD_GLYPH}</span> {PAD_LABEL}</span>'
    )
    if thought:
        items.append(
            f'<span class="dv-legend-item" style="color:{palette.foreground}"><span style="color:{palette.thought[0]};'
            f'padding:0 4px;box-shadow:inset 0 -{THOUGHT_BAND_PX}px 0 0 {palette.thought[1]}">ab</span> {THOUGHT_LABEL}</span>'
        )
    if pins:
        items.append(
            f'<span class="dv-legend-item" style="color:{palette.foreground}"><span style="color:{palette.committed[0]};'
            f'padding:0 4px;box-shadow:inset {PIN_BAR_PX}px 0 0 0 {palette.pin}">ab</span> {PIN_LABEL}</span>'
        )
    return f'<div class="dv-legend" style="display:flex;flex-wrap:wrap;gap:14px;margin:0 0 8px 0">{"".join(items)}</div>'


def render_frame_html(
    trace: Trace,
    frame: FrameState,
    layout: Layout,
    palette: Palette,
    *,
    details=None,
    caption: str | None = None,
    legend: bool = True,
    marked=frozenset(),
) -> str:
    """The frame as an HTML fragment; `details(block, position)` adds tooltip lines; the (block, position)s in
    `marked` are outlined (a branch's changed positions, `visualizer.compare.branch_changes`).

    `caption` defaults to `frame_caption`; pass "" to leave it out (the app shows it beside the frame).
    """
    outlined = {(cell.row, cell.col) for cell in layout.cells if (cell.block, cell.position) in marked}
    rows: dict[int, list[PaintedCell]] = {}
    for cell in paint(frame, layout, trace, palette, details):
        rows.setdefault(cell.row, []).append(cell)
    headers = dict((row, block) for block, row in layout.headers)
    lines = []
    for row in range(layout.rows):
        if row in headers:
            label = f" block {headers[row] + 1} "
            rule = ("──" + label).ljust(layout.columns, "─")
            lines.append(f'<span class="dv-rule" style="color:{palette.rule}">{escape(rule)}</span>')
            continue
        out, col = [], 0
        for cell in sorted(rows.get(row, []), key=lambda c: c.col):
            out.append(" " * (cell.col - col))
            out.append(_cell_span(cell, palette, (cell.row, cell.col) in outlined))
            col = cell.col + cell.width
        lines.append("".join(out))
    caption = caption if caption is not None else frame_caption(trace, frame)
    caption_html = f'<div class="dv-caption" style="color:{palette.muted};margin-bottom:6px">{escape(caption)}</div>'
    return (
        f'<div class="dv-frame" style="background:{palette.background};color:{palette.foreground};'
        f'font-family:{FONT_STACK};font-size:12.5px;padding:12px;border-radius:8px;overflow-x:auto">'
        + (caption_html if caption else "")
        + (legend_html(palette, thought=has_channel(trace), pins=bool(trace.start and trace.start.pins)) if legend else "")
        + f'<pre class="dv-canvas" data-layout="{layout.kind}" style="margin:0;line-height:1.45;font-family:inherit;white-space:pre">'
        + "\n".join(lines)
        + "</pre></div>"
    )
