"""Fast Pillow frames: the pixels of `render_frame_image`, with each distinct piece drawn once.

Drawing a 256-token frame cell by cell costs 20-50 ms in Pillow, yet consecutive frames differ
in a few cells and many cells look alike (a noise cell is a noise cell).  `FrameRenderer` builds
a frame from cached pieces: the legend, each caption line, each layout row, and inside a row
each cell.  A piece it has not seen is drawn by `render_frame_image` itself (given a layout of
just those cells, no caption), so the result is the same image, pixel for pixel.

    renderer = FrameRenderer(trace, layout, palette, caption_lines=2)
    image = renderer.render(frame_state(trace, i), ["prompt", "model · step 3"])

    colors = IndexedColors(palette)          # one small shared palette, for GIFs
    renderer = FrameRenderer(trace, layout, palette, caption_lines=1, colors=colors)
    indexed = renderer.render(frame_state(trace, i), ["model · step 3"])   # mode "P"

With `colors`, frames come out as palette images equal to `colors.to_indexed(rgb_frame)`: the
mapping is per pixel, so each new line is mapped once and a whole animation is quantized for
the price of its distinct lines.

Why it is exact: a piece is drawn by the same calls at the same x and an integer-shifted y, and
Pillow rasterizes text from the fractional part of its coordinates only; pieces cover disjoint
pixels, so drawing order does not matter.  That last point holds only when a piece inks inside
its own box, which most glyphs do but not all ('…', 'w' and '\\ufffd' can spill a pixel into the
neighbour).  So every new cell is checked: drawn without its neighbours (a row's unseen cells
in two batches, every other one, so no two drawn together touch), it must leave everything
outside its box untouched.  A cell that spills is drawn together with its neighbours as one
piece, checked the same way; if that spills too, the row is drawn as one piece; a row, caption
line or legend that spills out of its line makes the frame be drawn whole by
`render_frame_image`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import numpy as np
from PIL import Image, ImageChops, ImageColor

from .layout import Cell, Layout, PaintedCell, paint, pinned_positions
from .palette import Palette
from .render_image import LEGEND_LINES, MARGIN, text_metrics, frame_size, render_frame_image
from .states import FrameState, State
from .thinking import has_channel
from .trace import Trace

CACHE_ROWS = 1024  # ~60 KB each at the default size: bounded so long runs stay in memory
CACHE_CELLS = 8192  # ~1 KB each
BLEND_LEVELS = 8  # anti-aliasing shades kept between each text colour and the colour under it


class IndexedColors:
    """One small palette for every frame of a `Palette`, and an exact nearest-colour mapping to it.

    The palette holds the colours the renderer paints with plus `BLEND_LEVELS` shades between each
    text colour and the colour it is drawn on: anti-aliased glyph edges map to the nearest shade,
    without dithering, so text stays crisp.  Colours of the palette map to themselves.
    """

    def __init__(self, palette: Palette, *, levels: int = BLEND_LEVELS):
        pairs = [palette.colors(state) for state in State]  # (text, cell) colours of every state
        pairs += [(palette.special, palette.committed[1])]  # EOS / pad glyphs
        pairs += [(c, palette.background) for c in (palette.foreground, palette.muted, palette.rule, palette.special)]
        pairs += [(palette.mark, palette.background), (palette.pin, palette.background)]
        colors = [ImageColor.getrgb(palette.background)]
        for fg, bg in pairs:
            a, b = np.array(ImageColor.getrgb(fg)), np.array(ImageColor.getrgb(bg))
            for t in np.linspace(0.0, 1.0, levels):
                colors.append(tuple(int(v) for v in np.round(b + (a - b) * t)))
        self.colors = np.array(list(dict.fromkeys(colors)), dtype=np.int32)  # (n, 3), background first
        if len(self.colors) > 255:  # one index stays free: Pillow's GIF writer uses it for transparency
            raise ValueError(f"{len(self.colors)} colours do not fit one GIF palette; use fewer levels")
        self.palette_bytes = bytes(self.colors.astype(np.uint8).reshape(-1).tolist())
        # Colours seen so far (packed 0xRRGGBB, sorted) and their palette index: a frame's few
        # hundred distinct colours are matched once, then looked up.
        self._seen = np.zeros(0, dtype=np.int32)
        self._seen_index = np.zeros(0, dtype=np.uint8)

    def to_indexed(self, image: Image.Image) -> Image.Image:
        """An RGB image as a palette ("P") image: every pixel becomes its nearest palette colour."""
        rgb = np.asarray(image.convert("RGB"), dtype=np.int32)
        packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
        where = self._lookup(packed)
        if where is None:
            self._learn(np.unique(packed))
            where = self._lookup(packed)
        out = Image.fromarray(self._seen_index[where], "P")
        out.putpalette(self.palette_bytes)
        return out

    def blank(self, size: tuple[int, int]) -> Image.Image:
        """A palette image of `size` filled with the background colour."""
        out = Image.new("P", size, 0)
        out.putpalette(self.palette_bytes)
        return out

    def _lookup(self, packed: np.ndarray) -> np.ndarray | None:
        """Positions of `packed` colours in `_seen`, or None when some were never seen."""
        if not self._seen.size:
            return None
        where = np.minimum(np.searchsorted(self._seen, packed), self._seen.size - 1)
        return where if np.array_equal(self._seen[where], packed) else None

    def _learn(self, values: np.ndarray) -> None:
        rgb = np.stack([values >> 16, (values >> 8) & 255, values & 255], axis=1)
        nearest = ((rgb[:, None, :] - self.colors[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        seen = np.concatenate([self._seen, values])
        index = np.concatenate([self._seen_index, nearest.astype(np.uint8)])
        seen, first = np.unique(seen, return_index=True)
        self._seen, self._seen_index = seen, index[first]


class FrameRenderer:
    """Renders frames of one trace in one layout, palette and size, reusing identical pieces."""

    def __init__(
        self,
        trace: Trace,
        layout: Layout,
        palette: Palette,
        *,
        font_size: int = 13,
        caption_lines: int = 1,
        legend: bool = True,
        antialias: bool = True,
        colors: IndexedColors | None = None,
    ):
        self.trace, self.layout, self.palette, self.colors = trace, layout, palette, colors
        self.font_size, self.caption_lines, self.legend, self.antialias = font_size, caption_lines, legend, antialias
        self.size = frame_size(layout, font_size=font_size, caption_lines=caption_lines, legend=legend)
        self.char_width, self.line_height = text_metrics(font_size)
        header = (caption_lines + (LEGEND_LINES if legend else 0)) * self.line_height
        self.top = MARGIN + header + (self.line_height // 2 if caption_lines or legend else 0)
        self.headers = {row: block for block, row in layout.headers}
        self._row_index = _row_index(layout)
        self._lines: OrderedDict = OrderedDict()  # key -> line image, or None if it spills
        self._cells: OrderedDict = OrderedDict()  # looks -> RGB image of those cells, or None if it spills
        self._painted: dict = {}  # (block, position, state, token, changed) -> PaintedCell
        self._empty = replace(layout, cells=(), headers=(), rows=0)
        # pinned positions are drawn with a bar, so a row's key holds them (rows of one geometry share lines);
        # a pin is the first block's, so its flat index is its position
        self._pinned = np.array(sorted(pinned_positions(trace)), dtype=np.int64)
        self._build_base()

    def _build_base(self) -> None:
        """The blank frame with the legend, which names the thinking channel once the trace has one."""
        self._legend_thought = has_channel(self.trace)
        self._base = self.colors.blank(self.size) if self.colors else Image.new("RGB", self.size, self.palette.background)
        legend_line = (
            self._line(("legend", self._legend_thought), lambda: self._crop_line(self._draw(None, self._empty, [], legend=True), LEGEND_LINES))
            if self.legend
            else None
        )
        self._exact = legend_line is not None or not self.legend  # else every frame is drawn whole
        if legend_line is not None:
            self._base.paste(legend_line, (0, MARGIN + self.caption_lines * self.line_height))

    def render(self, frame: FrameState, caption: list[str]) -> Image.Image:
        """The frame, identical to `render_frame_image(..., caption=caption)` (or its indexed form)."""
        if len(caption) != self.caption_lines:
            raise ValueError(f"this renderer draws {self.caption_lines} caption line(s), got {len(caption)}")
        if self.legend and has_channel(self.trace) != self._legend_thought:
            self._build_base()
        if not self._exact:
            return self._whole(frame, caption)
        image = self._base.copy()
        for i, text in enumerate(caption):
            line = self._line(("caption", text), lambda: self._crop_line(self._draw(frame, self._empty, [text])))
            if line is None:
                return self._whole(frame, caption)
            image.paste(line, (0, MARGIN + i * self.line_height))
        # `paint` draws a cell from its state, token, changed and thought flags alone (its tooltip
        # is not drawn), so those four arrays are the row's key; the tests hold this against the
        # reference renderer.
        states, tokens, changed = (a.reshape(-1) for a in (frame.states, frame.token_ids, frame.changed))
        thought = frame.thought.reshape(-1) if frame.thought is not None else np.zeros(states.size, dtype=bool)
        for row, (geometry, cells, flat) in self._row_index.items():
            if flat.size and flat.max() >= states.size:  # blocks this frame does not have are not drawn
                keep = flat < states.size
                cells, flat = [c for c, k in zip(cells, keep) if k], flat[keep]
            key = ("row", self.headers.get(row), geometry, states[flat].tobytes(), tokens[flat].tobytes(), changed[flat].tobytes(),
                   thought[flat].tobytes(), np.isin(flat, self._pinned).tobytes())
            line = self._line(key, lambda: self._draw_row(frame, row, cells))
            if line is None:
                return self._whole(frame, caption)
            image.paste(line, (0, self.top + row * self.line_height))
        return image

    # ---- pieces ------------------------------------------------------------------------------
    def _draw_row(self, frame: FrameState, row: int, cells: list[Cell]) -> Image.Image | None:
        """A layout row as a line: from cached cell pieces when they stay in their boxes."""
        header = self.headers.get(row)
        one_row = replace(
            self.layout,
            cells=tuple(replace(c, row=0) for c in cells),
            headers=((header, 0),) if header is not None else (),
            rows=1,
        )
        if header is None:
            pieces = self._pieces(frame, list(one_row.cells), self._paint(frame, one_row.cells))
            if pieces is not None:
                line = Image.new("RGB", (self.size[0], self.line_height), self.palette.background)
                for left, image in pieces:
                    line.paste(image, (left, 0))
                return self.colors.to_indexed(line) if self.colors else line  # the mapping is per pixel
        return self._crop_line(self._draw(frame, one_row, []))

    def _paint(self, frame: FrameState, cells) -> list[PaintedCell]:
        """`paint` for some cells of one row, remembered per cell and (state, token, changed): the
        same key is always painted the same (see `render`)."""
        keys = [
            (c.block, c.position, int(frame.states[c.block, c.position]), int(frame.token_ids[c.block, c.position]),
             bool(frame.changed[c.block, c.position]), frame.thought is not None and bool(frame.thought[c.block, c.position]))
            for c in cells
        ]
        found = {k: self._painted[k] for k in keys if k in self._painted}
        missing = [(c, k) for c, k in zip(cells, keys) if k not in found]
        if missing:
            layout = replace(self.layout, cells=tuple(c for c, _ in missing), headers=(), rows=1)
            for (_, key), painted in zip(missing, paint(frame, layout, self.trace, self.palette)):
                found[key] = painted
            if len(self._painted) > CACHE_CELLS:
                self._painted.clear()
            self._painted.update((k, found[k]) for _, k in missing)
        return [found[k] for k in keys]

    def _pieces(self, frame: FrameState, cells: list[Cell], painted: list[PaintedCell]):
        """A row as (left, image) pieces with disjoint boxes: single cells, and around a cell that
        spills, the run of it and its neighbours drawn together; None if even such a run spills."""
        self._draw_new_cells(frame, cells, painted)
        singles = [self._piece(frame, cells[i : i + 1], painted[i : i + 1]) for i in range(len(cells))]
        spills = [image is None for image in singles]
        grouped = [any(spills[max(0, i - 1) : i + 2]) for i in range(len(cells))]
        pieces, i = [], 0
        while i < len(cells):
            j = i + 1
            if grouped[i]:
                while j < len(cells) and grouped[j]:
                    j += 1
            image = self._piece(frame, cells[i:j], painted[i:j]) if grouped[i] else singles[i]
            if image is None:
                return None
            pieces.append((self._box(painted[i])[0], image))
            i = j
        return pieces

    def _draw_new_cells(self, frame: FrameState, cells: list[Cell], painted: list[PaintedCell]) -> None:
        """Draw the row's unseen cells in two calls instead of one each: every other cell of each
        run of unseen neighbours, so no two drawn together touch.  A batch whose ink stays in its
        boxes is cut into the cache; otherwise its cells are left to `_piece`, one by one."""
        unseen = [i for i, p in enumerate(painted) if (_look(p),) not in self._cells]
        batches, parity = ([], []), 0
        for n, i in enumerate(unseen):
            parity = 0 if n == 0 or unseen[n - 1] != i - 1 else 1 - parity
            batches[parity].append(i)
        for batch in batches:
            if len(batch) < 2:
                continue
            layout = replace(self.layout, cells=tuple(cells[i] for i in batch), headers=(), rows=1)
            boxes = [self._cell_box(painted[i], painted[i]) for i in batch]
            drawn = self._draw(frame, layout, [])
            if self._contained(frame, layout, drawn, boxes, [painted[i] for i in batch]):
                for i, box in zip(batch, boxes):
                    self._remember((_look(painted[i]),), drawn.crop(box))

    def _piece(self, frame: FrameState, cells: list[Cell], painted: list[PaintedCell]) -> Image.Image | None:
        """Neighbouring cells of one row drawn together, cropped to their boxes; None when their
        ink leaves that box."""
        key = tuple(_look(p) for p in painted)
        if key in self._cells:
            self._cells.move_to_end(key)
            return self._cells[key]
        layout = replace(self.layout, cells=tuple(cells), headers=(), rows=1)
        box = self._cell_box(painted[0], painted[-1])
        drawn = self._draw(frame, layout, [])
        return self._remember(key, drawn.crop(box) if self._contained(frame, layout, drawn, [box], painted) else None)

    def _contained(self, frame: FrameState, layout: Layout, drawn: Image.Image, boxes, painted) -> bool:
        """Whether cells drawn alone (`drawn`) ink only inside their boxes.

        Pixel text (no anti-aliasing) is opaque: ink outside the boxes shows on the frame's own
        background unless the ink has that very colour.  Anti-aliased edges can be too faint to
        change the background yet change a neighbour, so those are also drawn on black and/or
        white, whichever contrasts with the text, and checked there."""
        if not _only_inside(drawn, boxes, self.palette.background):
            return False
        if not self.antialias and all(p.fg != self.palette.background for p in painted):
            return True
        return all(
            _only_inside(self._draw(frame, layout, [], palette=replace(self.palette, background=c)), boxes, c)
            for c in sorted({_contrast(p.fg) for p in painted})
        )

    def _remember(self, key, image: Image.Image | None) -> Image.Image | None:
        self._cells[key] = image
        if len(self._cells) > CACHE_CELLS:
            self._cells.popitem(last=False)
        return image

    def _cell_box(self, first: PaintedCell, last: PaintedCell) -> tuple[int, int, int, int]:
        """The pixels from `first`'s box to `last`'s (one cell: first is last), at y = MARGIN."""
        return self._box(first)[0], MARGIN, self._box(last)[1], MARGIN + self.line_height

    def _line(self, key, draw) -> Image.Image | None:
        """The cached line for `key`; on a miss `draw()` makes it (None: it spills out of its line)."""
        if key in self._lines:
            self._lines.move_to_end(key)
            return self._lines[key]
        line = self._lines[key] = draw()
        if len(self._lines) > CACHE_ROWS:
            self._lines.popitem(last=False)
        return line

    def _crop_line(self, drawn: Image.Image, lines: int = 1) -> Image.Image | None:
        """The line (or `lines` lines) at y = MARGIN of a frame drawn by `render_frame_image` (in the output
        mode), or None when any ink lies outside it."""
        box = (0, MARGIN, drawn.width, MARGIN + lines * self.line_height)
        if not _only_inside(drawn, box, self.palette.background):
            return None
        line = drawn.crop(box)
        return self.colors.to_indexed(line) if self.colors else line

    def _box(self, painted: PaintedCell) -> tuple[int, int]:
        """Pixel columns [left, right) of a cell: the rectangle `render_frame_image` fills."""
        x = MARGIN + painted.col * self.char_width
        return round(x), round(x + painted.width * self.char_width)

    def _draw(self, frame, layout: Layout, caption: list[str], *, legend: bool = False, palette=None) -> Image.Image:
        return render_frame_image(
            self.trace, frame, layout, palette or self.palette,
            font_size=self.font_size, caption=caption, legend=legend, antialias=self.antialias,
        )

    def _whole(self, frame: FrameState, caption: list[str]) -> Image.Image:
        image = self._draw(frame, self.layout, caption, legend=self.legend)
        return self.colors.to_indexed(image) if self.colors else image


def _row_index(layout: Layout) -> dict:
    """row -> (geometry, cells, flat indexes into a frame's (blocks, canvas) arrays), rows in order."""
    rows: dict[int, list[Cell]] = {row: [] for _, row in layout.headers}
    for cell in layout.cells:
        rows.setdefault(cell.row, []).append(cell)
    index, geometries = {}, {}
    for row in sorted(rows):
        cells = rows[row]
        flat = np.array([c.block * layout.canvas_length + c.position for c in cells], dtype=np.int64)
        geometry = geometries.setdefault(tuple((c.col, c.width) for c in cells), len(geometries))
        index[row] = (geometry, cells, flat)  # rows of one geometry (the grid's) share cached lines
    return index


def _look(cell: PaintedCell) -> tuple:
    """Everything `render_frame_image` draws for a painted cell (the tooltip is HTML-only)."""
    return (cell.col, cell.width, cell.text, cell.fg, cell.bg, cell.remasked_mark, cell.changed_mark, cell.thought, cell.pinned)


def _contrast(color: str) -> str:
    """Black or white, whichever is farther from `color`: faint ink of that colour shows on it."""
    r, g, b = ImageColor.getrgb(color)[:3]
    return "#000000" if r + g + b > 3 * 127 else "#ffffff"


def _only_inside(image: Image.Image, boxes, background: str) -> bool:
    """True when every pixel of `image` outside `boxes` (a box or a list of them) is the background."""
    outside = ImageChops.difference(image, Image.new("RGB", image.size, background))
    for box in boxes if isinstance(boxes, list) else [boxes]:
        outside.paste((0, 0, 0), box)
    return outside.getbbox() is None
