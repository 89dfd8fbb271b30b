"""Inside the network, as self-contained inline SVG: per-layer RMS, the lens rank grid, the step-to-step shift.

    svg = layer_rms_svg(trace, block)              # one steps x positions heatmap per recorded layer, one scale
    svg = lens_rank_svg(trace, block, position)    # layers x steps: rank of the committed token under each lens
    svg = kl_heatmap_svg(trace, block)             # steps x positions: KL of each distribution from the step before
    svg = kl_to_final_heatmap_svg(trace, block)    # steps x positions: KL of the final distribution from each step's

Pure functions of the trace, like `charts` and `insight_charts`: the same trace gives the same SVG,
live or replayed. Text and axes follow the page's theme (`currentColor`), steps and blocks are drawn
from 1, pinned positions (`record --pin`) are marked with a triangle above their column, and a trace
that did not record what a chart needs (no `--layers`, the shift off, an older trace) gives a small
chart with a one-line reason instead of an error.
"""

from __future__ import annotations

import math

import numpy as np

from .charts import _VIRIDIS, PIN_COLOR
from .metrics.commits import step_budget
from .metrics.measured import pinned_row
from .numbers import number
from .svg import MARK_COLOR, Plot, heatmap_key, hover_rect, png, svg_text, title_text
from .trace import Trace

KL_FLOOR_NATS = 1e-4  # the shift's colour scale is logarithmic from here up
RANK_CAP = 1000  # the lens grid's colour saturates at this rank


def recorded_layers(trace: Trace) -> tuple[int, ...]:
    """The decoder layers each step recorded (settings.layers), () when none."""
    layers = trace.settings.layers
    return tuple(layers) if isinstance(layers, tuple) else ()


def viridis(level: np.ndarray) -> np.ndarray:
    """(...) levels in [0, 1] -> (..., 3) uint8 viridis (dark = low)."""
    position = np.clip(np.nan_to_num(level, nan=0.0), 0, 1) * (len(_VIRIDIS) - 1)
    low = np.floor(position).astype(int).clip(0, len(_VIRIDIS) - 2)
    frac = (position - low)[..., None]
    return (_VIRIDIS[low] * (1 - frac) + _VIRIDIS[low + 1] * frac).round().astype(np.uint8)


def _image(x: float, y: float, w: float, h: float, rgb: np.ndarray, filled: np.ndarray | None = None) -> str:
    rgba = np.zeros((*rgb.shape[:2], 4), dtype=np.uint8)
    rgba[..., :3] = rgb
    rgba[..., 3] = 255 if filled is None else np.where(filled, 255, 0)
    return (
        f'<image x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" preserveAspectRatio="none" '
        f'style="image-rendering:pixelated" href="data:image/png;base64,{png(rgba)}"/>'
    )


def _legend(x: float, y: float, label: str, low: str, high: str, *, reverse: bool = False) -> str:
    ramp = viridis(np.linspace(1, 0, 64) if reverse else np.linspace(0, 1, 64))[None]
    w = 120
    return "".join([
        svg_text(x - 4, y + 8, label, anchor="end", size=9),
        _image(x, y, w, 8, ramp),
        svg_text(x, y + 18, low, anchor="middle", size=8),
        svg_text(x + w, y + 18, high, anchor="middle", size=8),
    ])


def _pin_marks(trace: Trace, block: int, x0: float, y: float, cell_w: float) -> str:
    pinned = np.flatnonzero(pinned_row(trace, block))
    marks = "".join(
        f'<path d="M{x0 + (p + 0.5) * cell_w - 3:.1f} {y - 5:.1f}h6l-3 5z" fill="{PIN_COLOR}"><title>pinned position {p}</title></path>'
        for p in pinned
    )
    return marks


def _message(plot: Plot, title: str, text: str, label: str) -> str:
    return plot.svg([title_text(plot, title), svg_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, text, anchor="middle")], label=label)


def _rows(trace: Trace, block: int) -> int:
    budget = step_budget(trace)
    return max(len(trace.block_steps(block)), budget if budget <= 128 else 0, 1)


# ---- per-layer RMS ---------------------------------------------------------------------------------
def layer_rms_svg(trace: Trace, block: int, *, width: int = 780, panel_height: int = 110) -> str:
    """One heatmap per recorded layer (steps down, positions across), all on one log colour scale."""
    layers = recorded_layers(trace)
    steps = [s for s in trace.block_steps(block) if s.layer_rms is not None]
    label = f"per-layer RMS, block {block + 1}"
    if not layers or not steps:
        plot = Plot(width, 120, left=36, right=12, top=22, bottom=20)
        why = "this trace recorded no layers (record --layers 0,9,19,29)" if not layers else "block not started"
        return _message(plot, f"Block {block + 1}: RMS of each layer's output", why, label)
    rms = np.stack([s.layer_rms for s in steps])  # (steps, layers, canvas)
    positive = rms[rms > 0]
    lo = float(np.log10(positive.min())) if positive.size else 0.0
    hi = max(float(np.log10(max(rms.max(), 1e-30))), lo + 1e-6)
    # a committed block's steps fill the panel; one still denoising (a live run's panel, asked about once a
    # second) gets a row for each step of its budget and fills downwards, the steps to come left empty
    committed = block < len(trace.blocks)
    n_rows, canvas = len(steps) if committed else _rows(trace, block), trace.canvas_length
    filled = np.zeros((n_rows, canvas), dtype=bool)
    filled[: len(steps)] = True
    top, gap, bottom = 22, 16, 44
    height = top + len(layers) * (panel_height + gap) + bottom
    plot = Plot(width, height, left=48, right=12, top=top, bottom=bottom)
    cell_w = plot.w / canvas
    parts = [title_text(plot, f"Block {block + 1}: RMS of each recorded layer's output per position and step (one scale)")]
    for i, layer in enumerate(layers):
        y0 = top + gap + i * (panel_height + gap)
        level = np.zeros((n_rows, canvas))
        level[: len(steps)] = (np.log10(np.maximum(rms[:, i], 10**lo)) - lo) / (hi - lo)
        parts.append(_image(plot.x0, y0, plot.w, panel_height, viridis(level), filled))
        parts.append(svg_text(plot.x0 - 4, y0 + 10, f"L{layer}", anchor="end", size=9))
        if not committed:  # the panel's extent, while its lower rows are still empty
            parts.append(f'<rect x="{plot.x0:.1f}" y="{y0:.1f}" width="{plot.w:.1f}" height="{panel_height}" '
                         f'fill="none" stroke="#9ca3af" stroke-width="0.5"/>')
        last_y = y0 + len(steps) / n_rows * panel_height  # the bottom of the last step recorded, below the layer's name
        parts.append(svg_text(plot.x0 - 4, max(last_y, y0 + 22), f"step {len(steps)}", anchor="end", size=8))
        parts.append(_pin_marks(trace, block, plot.x0, y0, cell_w))
        tip = (
            f"layer {layer}: RMS from {number(rms[:, i].min())} to {number(rms[:, i].max())} "
            f"(mean {number(rms[:, i].mean())}) over {len(steps)} steps"
        )
        parts.append(hover_rect(plot.x0, y0, plot.w, panel_height, tip))
    for position in range(0, canvas, 32 if canvas > 64 else 8):
        parts.append(svg_text(plot.x0 + (position + 0.5) * cell_w, plot.y1 + 11, f"{position}", anchor="middle", size=9))
    parts.append(_legend(plot.x1 - 180, plot.y1 + 20, "RMS", f"{10**lo:.3g}", f"{10**hi:.3g} (log)"))
    parts.append(heatmap_key(plot, "colour: dark = small output, yellow = large (each layer a panel, steps down)",
                             pin_color=PIN_COLOR if pinned_row(trace, block).any() else None))
    return plot.svg(parts, label=label)


# ---- the lens rank grid ----------------------------------------------------------------------------
def lens_rank_svg(trace: Trace, block: int, position: int, *, width: int = 560, height: int = 220) -> str:
    """For one position: each recorded layer (rows, the first on top as in `layer_rms_svg`) at each step
    (columns), the rank of the token the block committed there under that layer's logit lens (0: the lens
    already puts it first), log colour scale."""
    layers = recorded_layers(trace)
    label = f"lens rank, block {block + 1}, position {position}"
    plot = Plot(width, height, left=48, right=12, top=22, bottom=44)
    title = f"Block {block + 1}, position {position}: rank of the committed token under each layer's lens"
    record = trace.blocks[block] if 0 <= block < len(trace.blocks) else None
    if not layers:
        return _message(plot, title, "this trace recorded no layers (record --layers 0,9,19,29)", label)
    if record is None or record.lens_ranks is None:
        return _message(plot, title, "the block is not committed yet: its tokens decide the ranks", label)
    if not 0 <= position < trace.canvas_length:
        return _message(plot, title, f"position must be from 0 to {trace.canvas_length - 1}", label)
    ranks = record.lens_ranks[:, :, position].T  # (layers, steps)
    n_layers, n_steps = ranks.shape
    cell_w, cell_h = plot.w / n_steps, plot.h / n_layers
    level = 1 - np.log10(1 + np.minimum(ranks, RANK_CAP)) / math.log10(1 + RANK_CAP)  # rank 0: bright
    parts = [title_text(plot, title), _image(plot.x0, plot.y0, plot.w, plot.h, viridis(level))]
    token = int(record.tokens[position])
    for i, layer in enumerate(layers):
        row = i  # the first recorded layer on top, as in the RMS panel (layer_rms_svg)
        parts.append(svg_text(plot.x0 - 4, plot.y0 + (row + 0.7) * cell_h, f"L{layer}", anchor="end", size=9))
        for t in range(n_steps):
            top_id, top_prob = int(record.lens_top_ids[t, i, position]), float(record.lens_top_probs[t, i, position])
            tip = (f"layer {layer}, step {t + 1}: committed {trace.piece(token)!r} at rank {int(ranks[i, t])}; "
                   f"lens top {trace.piece(top_id)!r} ({top_prob:.2f})")
            parts.append(hover_rect(plot.x0 + t * cell_w, plot.y0 + row * cell_h, cell_w, cell_h, tip))
    every = max(1, math.ceil(n_steps / 8))
    for t in range(0, n_steps, every):
        parts.append(svg_text(plot.x0 + (t + 0.5) * cell_w, plot.y1 + 12, str(t + 1), anchor="middle", size=9))
    parts.append(svg_text(plot.x0 - 4, plot.y1 + 12, "step", anchor="end", size=9))
    if position in {p for p, _ in (trace.start.pins if block == 0 and trace.start else ())}:
        parts.append(svg_text(plot.x0, plot.y1 + 24, "pinned position: the sampler was given this token", size=9, fill=PIN_COLOR))
    parts.append(_legend(plot.x1 - 180, plot.y1 + 22, "rank", "0", f"≥{RANK_CAP}", reverse=True))
    return plot.svg(parts, label=label)


# ---- the step-to-step shift ------------------------------------------------------------------------
def kl_heatmap_svg(trace: Trace, block: int, *, width: int = 780, height: int = 260) -> str:
    """KL(p_t || p_t-1) of every position (x) at every step (y, downwards), log colour scale; the first step
    of a block has no step before it (blank row)."""
    return _kl_svg(trace, block, "kl_nats", f"Block {block + 1}: KL of each position's distribution from the previous step's",
                   f"shift heatmap, block {block + 1}", "this trace recorded no shift (record_shift off, or an older trace)",
                   "colour: dark = settled (the same as the step before), yellow = moving", width=width, height=height)


def kl_to_final_heatmap_svg(trace: Trace, block: int, *, width: int = 780, height: int = 260) -> str:
    """KL(p_final || p_t) of every position (x) at every step (y, downwards), log colour scale: how far each step's
    distribution still is from the block's final one (0 at the last step; `record --kl-to-final`)."""
    return _kl_svg(trace, block, "kl_to_final_nats", f"Block {block + 1}: KL of each position's final distribution from each step's",
                   f"KL to final heatmap, block {block + 1}", "this trace recorded no KL to the final step (record --kl-to-final)",
                   "colour: dark = already final, yellow = far from it", width=width, height=height)


def _kl_svg(trace: Trace, block: int, field: str, title: str, label: str, missing: str, colours: str, *, width: int,
            height: int) -> str:
    steps = trace.block_steps(block)
    plot = Plot(width, height, left=36, right=12, top=22, bottom=40)
    if not steps:
        return _message(plot, title, "block not started", label)
    if not any(getattr(s, field) is not None for s in steps):
        return _message(plot, title, missing, label)
    n_rows, canvas = _rows(trace, block), trace.canvas_length
    kl = np.full((n_rows, canvas), np.nan, dtype=np.float64)
    for t, s in enumerate(steps):
        if getattr(s, field) is not None:
            kl[t] = getattr(s, field)
    hi = max(float(np.nanmax(kl)), KL_FLOOR_NATS * 10)
    lo_log, hi_log = math.log10(KL_FLOOR_NATS), math.log10(hi)
    level = (np.log10(np.maximum(np.nan_to_num(kl, nan=KL_FLOOR_NATS), KL_FLOOR_NATS)) - lo_log) / (hi_log - lo_log)
    parts = [title_text(plot, title), _image(plot.x0, plot.y0, plot.w, plot.h, viridis(level), ~np.isnan(kl))]
    cell_w, cell_h = plot.w / canvas, plot.h / n_rows
    parts.append(_pin_marks(trace, block, plot.x0, plot.y0, cell_w))
    for value in (0, len(steps) - 1) if len(steps) > 1 else (0,):
        parts.append(svg_text(plot.x0 - 4, plot.y0 + (value + 0.7) * cell_h, f"{value + 1}", anchor="end", size=9))
    parts.append(svg_text(plot.x0 - 24, plot.y0 + plot.h / 2, "step", anchor="middle", size=9))
    for position in range(0, canvas, 32 if canvas > 64 else 8):
        parts.append(svg_text(plot.x0 + (position + 0.5) * cell_w, plot.y1 + 11, f"{position}", anchor="middle", size=9))
    total = np.nansum(kl, axis=0)
    for p in range(canvas):
        parts.append(hover_rect(plot.x0 + p * cell_w, plot.y0, cell_w, plot.h, f"position {p}: KL summed over steps {number(total[p])} nats"))
    parts.append(_legend(plot.x1 - 180, plot.y1 + 20, "KL", f"≤{KL_FLOOR_NATS:g}", f"{number(hi)} nats"))
    parts.append(heatmap_key(plot, colours, pin_color=PIN_COLOR if pinned_row(trace, block).any() else None))
    if np.isnan(kl[0]).all():
        parts.append(svg_text(plot.x1, plot.y0 - 2, "step 1: no step before it", anchor="end", size=8, fill=MARK_COLOR))
    return plot.svg(parts, label=label)
