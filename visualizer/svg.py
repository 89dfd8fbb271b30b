"""Drawing primitives for the small inline-SVG charts: a plot frame, text, lines, bars, hover targets.

Text and axes use `currentColor`, so every chart follows the page's light or dark theme; hover
targets are transparent rectangles with a `<title>` tooltip (no JS).  The chart colours shared by
the charts and the readout panel live here too.
"""

from __future__ import annotations

import base64
import io
import math
from html import escape

import numpy as np
from PIL import Image

from .metrics import Undefined

TAU_COLOR = "#7c3aed"  # purple, as the kept-draft state
CONTROL_COLOR = "#9ca3af"
CURSOR_COLOR = "#f59e0b"
COMMIT_COLOR = "#16a34a"  # green, as the "new" state: a first acceptance
REMASK_COLOR = "#9ca3af"  # gray, as the re-masked state
MARK_COLOR = "#ef4444"


class Plot:
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


def or_default(value, default: float) -> float:
    return default if isinstance(value, Undefined) else value


def defined_runs(series) -> list[list]:
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


def svg_text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 10, fill: str = "currentColor") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>'


def title_text(plot: Plot, text: str) -> str:
    return svg_text(plot.x0, 13, text, size=11)


def hline(plot: Plot, y: float, *, opacity: float) -> str:
    return f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" stroke-opacity="{opacity}"/>'


def polyline(points: list, color: str, *, dash: str | None = None) -> str:
    if not points:
        return ""
    if len(points) == 1:
        (px, py), = points
        points = [(px - 3, py), (px + 3, py)]
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    coords = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    return f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="1.8"{dash_attr}/>'


def step_axis(plot: Plot, n_cols: int, x) -> str:
    every = max(1, int(math.ceil(n_cols / 8)))
    labels = [svg_text(x(t), plot.y1 + 14, str(t + 1), anchor="middle", size=9) for t in range(0, n_cols, every)]
    return "".join(labels) + svg_text(plot.x1 + 4, plot.y1 + 14, "step", anchor="start", size=9)


def cursor(plot: Plot, step: int | None, x) -> str:
    if step is None:
        return ""
    cx = x(step)
    return f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{plot.y0}" y2="{plot.y1}" stroke="{CURSOR_COLOR}" stroke-width="1.5"/>'


def bar(x: float, y: float, w: float, h: float, color: str, *, opacity: float = 1.0) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{color}" fill-opacity="{opacity}"/>'


def heatmap_key(plot: Plot, colours: str, *, pin_color: str | None = None) -> str:
    """Under a steps x positions heatmap's position ticks, at the left (its colour bar is at the right): the x axis's
    name, and the colour scale in words; `pin_color` adds the key to the pinned positions' triangles above it."""
    y = plot.y1 + 24
    parts = [svg_text(plot.x0, y, "position →", size=9), svg_text(plot.x0, y + 12, colours, size=9)]
    if pin_color:
        x = plot.x0 + 64
        parts.append(f'<path d="M{x:.1f} {y - 7:.1f}h6l-3 5z" fill="{pin_color}"/>')
        parts.append(svg_text(x + 9, y, "pinned position (record --pin)", size=9))
    return "".join(parts)


def hover_rect(x: float, y: float, w: float, h: float, tip: str) -> str:
    return (
        f'<rect x="{x:.2f}" y="{y:.1f}" width="{w:.2f}" height="{h:.1f}" fill="#000" fill-opacity="0">'
        f"<title>{escape(tip)}</title></rect>"
    )


def png(rgba: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buffer, format="PNG", optimize=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")
