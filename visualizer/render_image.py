"""Pillow renderer: one frame of a trace as an image, for still frames and animations.

    image = render_frame_image(trace, frame_state(trace, -1), grid_layout(...), STANDARD)
    image.save("frame.png")

It draws exactly what `layout.paint` decided (the same cells, texts, colours and marks as the
HTML renderer) with the DejaVu Sans Mono font shipped in `assets/fonts`, so frames look the same
on every machine.  Every frame of one trace and layout has the same size: animations never jump.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from .layout import PAD_GLYPH, Layout, paint
from .palette import LEGEND, PAD_LABEL, PIN_BAR_PX, PIN_LABEL, RESAMPLED_LABEL, THOUGHT_BAND_PX, THOUGHT_LABEL, Palette
from .render_html import frame_caption
from .states import FrameState, State
from .thinking import has_channel
from .trace import Trace

FONT_DIR = Path(__file__).resolve().parent.parent / "assets" / "fonts"
MARGIN = 12
LEGEND_LINES = 2  # the states, then the marks (resampled, padding, thought, pinned): one line would overflow 96 columns


@lru_cache(maxsize=8)
def load_font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    name = "DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf"
    return ImageFont.truetype(str(FONT_DIR / name), size)


def text_metrics(font_size: int) -> tuple[float, int]:
    """(character advance, line height) in pixels."""
    font = load_font(font_size)
    return font.getlength("M"), round(font_size * 1.5)


def frame_size(layout: Layout, *, font_size: int = 13, caption_lines: int = 1, legend: bool = True) -> tuple[int, int]:
    cw, lh = text_metrics(font_size)
    header = (caption_lines + (LEGEND_LINES if legend else 0)) * lh + (lh // 2 if caption_lines or legend else 0)
    return int(2 * MARGIN + layout.columns * cw), int(2 * MARGIN + header + layout.rows * lh)


def render_frame_image(
    trace: Trace,
    frame: FrameState,
    layout: Layout,
    palette: Palette,
    *,
    font_size: int = 13,
    caption: str | list[str] | None = None,
    legend: bool = True,
    antialias: bool = True,
) -> Image.Image:
    """The frame as an RGB image; `caption` lines go above the legend (default: `frame_caption`)."""
    lines = [caption] if isinstance(caption, str) else list(caption) if caption is not None else [frame_caption(trace, frame)]
    width, height = frame_size(layout, font_size=font_size, caption_lines=len(lines), legend=legend)
    image = Image.new("RGB", (width, height), palette.background)
    draw = ImageDraw.Draw(image)
    draw.fontmode = "L" if antialias else "1"
    font = load_font(font_size)
    cw, lh = text_metrics(font_size)
    y = MARGIN
    for line in lines:
        draw.text((MARGIN, y), _clip(line, layout.columns), font=font, fill=palette.muted)
        y += lh
    if legend:
        _draw_legend(draw, palette, font, MARGIN, y, cw, lh, thought=has_channel(trace), pins=bool(trace.start and trace.start.pins))
        y += LEGEND_LINES * lh
    if lines or legend:
        y += lh // 2
    top = y
    for block, row in layout.headers:
        label = f"── block {block + 1} "
        ry = top + row * lh
        draw.text((MARGIN, ry), label, font=font, fill=palette.rule)
        x0 = MARGIN + len(label) * cw
        draw.line((x0, ry + lh // 2, width - MARGIN, ry + lh // 2), fill=palette.rule, width=1)
    for cell in paint(frame, layout, trace, palette):
        x, yy = MARGIN + cell.col * cw, top + cell.row * lh
        box = (round(x), yy, round(x + cell.width * cw) - 1, yy + lh - 2)
        if cell.bg != palette.background:
            draw.rectangle(box, fill=cell.bg)
        if cell.thought:
            draw.rectangle((box[0], box[3] - THOUGHT_BAND_PX + 1, box[2], box[3]), fill=palette.thought[1])
        draw.text((x, yy + (lh - font_size) // 2 - 1), cell.text, font=font, fill=cell.fg)
        if cell.remasked_mark:
            draw.rectangle((box[0], box[1], box[2], box[1] + 2), fill=palette.mark)
        if cell.changed_mark:
            draw.rectangle((box[0], box[3] - 1, box[2], box[3]), fill=palette.mark)
        if cell.pinned:
            draw.rectangle((box[0], box[1], box[0] + PIN_BAR_PX - 1, box[3]), fill=palette.pin)
    return image


def _draw_legend(draw, palette: Palette, font, x: float, y: int, cw: float, lh: int, *, thought: bool = False,
                 pins: bool = False) -> None:
    """The states on one line; under them the marks, as the app's legend names them (legend_html)."""
    left = x
    for state, label in LEGEND:
        fg, bg = palette.colors(state)
        glyph = "░░" if label in ("noise", "remasked") else "ab"
        draw.rectangle((round(x), y, round(x + 2 * cw), y + lh - 2), fill=bg)
        draw.text((x, y + 1), glyph, font=font, fill=fg)
        if label == "remasked":
            draw.rectangle((round(x), y, round(x + 2 * cw), y + 2), fill=palette.mark)
        draw.text((x + 3 * cw, y + 1), label, font=font, fill=palette.foreground)
        x += (len(label) + 6) * cw
    x, y = left, y + lh

    def mark(glyph: str, label: str, fg: str) -> float:
        draw.text((x, y + 1), glyph, font=font, fill=fg)
        draw.text((x + 3 * cw, y + 1), label, font=font, fill=palette.foreground)
        return x + (len(label) + 6) * cw

    kfg, kbg = palette.colors(State.KEPT)
    box = (round(x), y, round(x + 2 * cw), y + lh - 2)
    draw.rectangle(box, fill=kbg)
    draw.rectangle((box[0], box[3] - 1, box[2], box[3]), fill=palette.mark)  # the mark under a cell, as on the canvas
    x = mark("ab", RESAMPLED_LABEL, kfg)
    x = mark(PAD_GLYPH, PAD_LABEL, palette.special)
    if thought:
        draw.text((x, y + 1), "ab", font=font, fill=palette.thought[0])
        draw.rectangle((round(x), y + lh - 1 - THOUGHT_BAND_PX, round(x + 2 * cw), y + lh - 2), fill=palette.thought[1])
        draw.text((x + 3 * cw, y + 1), THOUGHT_LABEL, font=font, fill=palette.foreground)
        x += (len(THOUGHT_LABEL) + 6) * cw
    if pins:
        fg, bg = palette.colors(State.COMMITTED)
        draw.text((x, y + 1), "ab", font=font, fill=fg)
        draw.rectangle((round(x), y, round(x) + PIN_BAR_PX - 1, y + lh - 2), fill=palette.pin)
        draw.text((x + 3 * cw, y + 1), PIN_LABEL, font=font, fill=palette.foreground)


def _clip(text: str, columns: int) -> str:
    text = " ".join(text.split())  # captions are one line: a multi-line prompt is folded
    return text if len(text) <= columns else text[: columns - 1] + "…"
