"""Every step read against its end, as self-contained inline SVG: when a block's answer was decided, and when committed.

    svg = finalized_svg(trace)     # per block: share of content finalized / first accepted by each fraction of its steps

A pure function of the trace, like `insight_charts`: text and axes follow the page's theme (`currentColor`),
hover targets carry `<title>` tooltips. The gap between the two curves is "decided is not committed": the
argmax already held the final token (finalized, `metrics.trajectory`) before the sampler accepted it.
"""

from __future__ import annotations

from html import escape

import numpy as np

from .metrics import Undefined
from .metrics.trajectory import FRACTIONS, run_trajectory
from .svg import COMMIT_COLOR, TAU_COLOR, Plot, hline, polyline, svg_text, title_text
from .trace import Trace

FINALIZED_COLOR = TAU_COLOR
COMMITTED_COLOR = COMMIT_COLOR


def finalized_svg(trace: Trace, *, width: int = 560, height: int = 230) -> str:
    """Share of each block's content finalized (solid) and first accepted (dashed) by each fraction of its steps."""
    plot = Plot(width, height, left=40, right=120, top=22, bottom=36)
    run = run_trajectory(trace)
    title = "Decided before committed: share of the answer finalized (solid) and accepted (dashed)"
    blocks = [t for t in run.blocks if t.content_length]
    if not blocks:
        return plot.svg([title_text(plot, title), svg_text(plot.x0, plot.y0 + plot.h / 2, "no committed block with content", size=10)],
                        label="finalized by fraction of the run")
    x = lambda f: plot.x0 + f * plot.w  # noqa: E731
    y = lambda v: plot.y1 - v * plot.h  # noqa: E731
    parts = [title_text(plot, title)]
    for value in (0, 0.5, 1):
        parts.append(hline(plot, y(value), opacity=0.12))
        parts.append(svg_text(plot.x0 - 4, y(value) + 3, f"{value:g}", anchor="end", size=9))
    for f in (0.0, 0.5, 1.0):
        parts.append(svg_text(x(f), plot.y1 + 13, f"{f:g}", anchor="middle", size=9))
    parts.append(svg_text(plot.x0 + plot.w / 2, plot.y1 + 28, "fraction of the block's steps", anchor="middle", size=9))
    for i, t in enumerate(blocks):
        n = t.content_length
        committed = [float(np.mean(t.commit_step[:n] < int(np.ceil(f * t.steps_used - 1e-9)))) for f in FRACTIONS]
        finalized = [t.finalized_by_fraction[f] for f in FRACTIONS]
        for values, color, dash in ((finalized, FINALIZED_COLOR, None), (committed, COMMITTED_COLOR, "4 3")):
            points = [(x(0.0), y(0.0))] + [(x(f), y(v)) for f, v in zip(FRACTIONS, values) if not isinstance(v, Undefined)]
            parts.append(polyline(points, color, dash=dash))
        tip = (f"block {t.block + 1}: {n} content tokens, {t.steps_used} steps; finalized by half the steps "
               f"{t.finalized_by_fraction[0.5]:.2f}, accepted by then {committed[4]:.2f}")
        parts.append(f'<circle cx="{x(0.5):.1f}" cy="{y(finalized[4]):.1f}" r="3" fill="{FINALIZED_COLOR}"><title>{escape(tip)}</title></circle>')
        if i < 8:
            parts.append(svg_text(plot.x1 + 8, plot.y0 + 12 + i * 13, f"block {t.block + 1} ({t.steps_used} steps)", size=9))
    parts.append(svg_text(plot.x1 + 8, plot.y1 - 16, "— finalized", size=9, fill=FINALIZED_COLOR))
    parts.append(svg_text(plot.x1 + 8, plot.y1 - 3, "- - accepted", size=9, fill=COMMITTED_COLOR))
    return plot.svg(parts, label="finalized by fraction of the run")
