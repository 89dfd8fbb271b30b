"""A figure drawn once, written twice: as SVG (for pages) and as PNG (for posts), from the same shapes.

    fig = Figure(560, 260)
    fig.line(40, 200, 520, 200, INK, opacity=0.4)
    fig.text(40, 14, "Token tau_b per regime", size=11)
    fig.svg(label="tau_b per regime")          # text and axes in currentColor: the page's theme
    fig.png(scale=2).save("tau_b.png")         # white background, the same shapes at 2x

The PNG is drawn with Pillow and the DejaVu Sans Mono font the frame renderer ships
(`assets/fonts`), so it looks the same on every machine; no SVG rasterizer is needed.  Pure
functions of the shapes: the same figure gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from PIL import Image, ImageDraw

from .render_image import load_font

INK = "currentColor"  # text and axes: the page's colour in SVG, PNG_INK in the PNG
PNG_INK = "#1f2937"
PNG_BACKGROUND = "#ffffff"


@dataclass
class Figure:
    width: int
    height: int
    shapes: list = field(default_factory=list)

    # ---- drawing ------------------------------------------------------------------------------
    def line(self, x1, y1, x2, y2, color: str = INK, *, width: float = 1.0, opacity: float = 1.0, dash: bool = False):
        self.shapes.append(("line", (x1, y1, x2, y2), color, width, opacity, dash))

    def rect(self, x, y, w, h, color: str, *, opacity: float = 1.0, tip: str | None = None):
        self.shapes.append(("rect", (x, y, w, h), color, opacity, tip))

    def circle(self, cx, cy, r, color: str, *, hollow: bool = False, tip: str | None = None):
        self.shapes.append(("circle", (cx, cy, r), color, hollow, tip))

    def text(self, x, y, text: str, *, size: int = 10, anchor: str = "start", color: str = INK):
        self.shapes.append(("text", (x, y), str(text), size, anchor, color))

    # ---- output -------------------------------------------------------------------------------
    def svg(self, *, label: str) -> str:
        parts = [self._svg(shape) for shape in self.shapes]
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" role="img" '
                f'aria-label="{escape(label)}" style="width:100%;max-width:{self.width}px;height:auto;'
                f'font-family:ui-monospace,DejaVu Sans Mono,monospace;color:inherit">' + "".join(parts) + "</svg>")

    def png(self, *, scale: int = 2) -> Image.Image:
        image = Image.new("RGB", (self.width * scale, self.height * scale), PNG_BACKGROUND)
        draw = ImageDraw.Draw(image, "RGBA")
        for shape in self.shapes:
            _draw(draw, shape, scale)
        return image

    @staticmethod
    def _svg(shape) -> str:
        kind = shape[0]
        if kind == "line":
            (x1, y1, x2, y2), color, width, opacity, dash = shape[1:]
            extra = ' stroke-dasharray="4 3"' if dash else ""
            return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" '
                    f'stroke-width="{width}" stroke-opacity="{opacity}"{extra}/>')
        if kind == "rect":
            (x, y, w, h), color, opacity, tip = shape[1:]
            title = f"<title>{escape(tip)}</title>" if tip else ""
            return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{color}" '
                    f'fill-opacity="{opacity}">{title}</rect>')
        if kind == "circle":
            (cx, cy, r), color, hollow, tip = shape[1:]
            title = f"<title>{escape(tip)}</title>" if tip else ""
            paint = f'fill="none" stroke="{color}" stroke-width="1.5"' if hollow else f'fill="{color}"'
            return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" {paint}>{title}</circle>'
        (x, y), text, size, anchor, color = shape[1:]
        return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{color}">'
                f"{escape(text)}</text>")


def _rgba(color: str, opacity: float = 1.0) -> tuple[int, int, int, int]:
    color = PNG_INK if color == INK else color
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16), round(255 * opacity)


def _draw(draw: ImageDraw.ImageDraw, shape, s: int) -> None:
    kind = shape[0]
    if kind == "line":
        (x1, y1, x2, y2), color, width, opacity, dash = shape[1:]
        fill, w = _rgba(color, opacity), max(1, round(width * s))
        if not dash:
            draw.line([(x1 * s, y1 * s), (x2 * s, y2 * s)], fill=fill, width=w)
            return
        length = ((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5 or 1.0
        for start in range(0, int(length), 7):  # 4 on, 3 off, as the SVG's dash array
            a, b = start / length, min(start + 4, length) / length
            draw.line([((x1 + (x2 - x1) * a) * s, (y1 + (y2 - y1) * a) * s),
                       ((x1 + (x2 - x1) * b) * s, (y1 + (y2 - y1) * b) * s)], fill=fill, width=w)
    elif kind == "rect":
        (x, y, w, h), color, opacity, _ = shape[1:]
        draw.rectangle([x * s, y * s, (x + w) * s - 1, (y + h) * s - 1], fill=_rgba(color, opacity))
    elif kind == "circle":
        (cx, cy, r), color, hollow, _ = shape[1:]
        box = [(cx - r) * s, (cy - r) * s, (cx + r) * s, (cy + r) * s]
        if hollow:
            draw.ellipse(box, outline=_rgba(color), width=max(1, round(1.5 * s)))
        else:
            draw.ellipse(box, fill=_rgba(color))
    else:
        (x, y), text, size, anchor, color = shape[1:]
        font = load_font(round(size * s))
        width = font.getlength(text)
        left = x * s - {"start": 0, "middle": width / 2, "end": width}[anchor]
        draw.text((left, y * s), text, font=font, fill=_rgba(color), anchor="ls")  # y is the baseline, as in SVG
