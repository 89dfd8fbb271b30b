"""Where each canvas position sits in a frame, and what its cell shows.

Frames never reflow as tokens arrive: a layout is fixed before the first frame is drawn.

- `grid_layout` is fixed from the canvas size alone: every block is a header line plus rows of
  `per_row` cells of `cell_chars` characters.  Used for the live view, where nothing about the
  final text is known yet.
- `text_layout` is fixed from the run's final tokens: each position gets the slot its committed
  token occupies in the real text, with real newlines and indentation, so an acrostic's letters
  land at the starts of the lines.  Used to replay and export finished runs.

`paint` turns a `FrameState` into `PaintedCell`s (text already padded to the cell width, colours,
marks, tooltip); the HTML and Pillow renderers only draw what `paint` decided, so both show the
same thing.  Noise cells show block glyphs, never the random token underneath.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .numbers import number
from .palette import Palette
from .states import FrameState, State
from .trace import Trace

NOISE_GLYPH = "░"
NEWLINE_GLYPH = "↵"
TAB_GLYPH = "→"
SPACE_GLYPH = "·"
ELLIPSIS = "…"
EOS_GLYPH = "∎"  # one-character EOS for the text layout, where trailing EOS fill the canvas
PAD_GLYPH = "▫"  # a pad token: an empty box, never taken for a space's dot (SPACE_GLYPH)
EMPTY_GLYPH = "∙"  # a cell of a block the run has not reached (grid layout)
# The text layout in a frame too narrow for its 96 columns (a phone): 44 characters of 13px DejaVu Sans Mono
# (0.602em each) fill a 390 px phone's frame, so its lines end where the layout ends them, never where the browser
# wraps them (issue 58).
NARROW_TEXT_COLUMNS = 44


@dataclass(frozen=True)
class Cell:
    block: int
    position: int  # index within the block
    row: int  # line of the frame, 0-based
    col: int  # column in character units
    width: int  # in characters, at least 1


@dataclass(frozen=True)
class Layout:
    kind: str  # "grid" or "text"
    cells: tuple[Cell, ...]  # block-major: cells[block * canvas_length + position]
    headers: tuple[tuple[int, int], ...]  # (block, row) of each block's header line
    rows: int
    columns: int  # frame width in characters
    canvas_length: int

    def cell(self, block: int, position: int) -> Cell:
        return self.cells[block * self.canvas_length + position]


@dataclass(frozen=True)
class PaintedCell:
    row: int
    col: int
    width: int
    text: str  # exactly `width` characters
    fg: str
    bg: str
    state: State
    remasked_mark: bool  # remasked: was accepted at the previous step, noise now
    changed_mark: bool  # kept, but the resampled token differs from the previous step's
    special: bool  # EOS / pad / other special token: drawn in the muted colour
    tooltip: str
    thought: bool = False  # a token of the thinking channel: tinted text when committed, a band under the cell
    pinned: bool = False  # a pinned position (record --pin): a bar on its left, whatever its state


def grid_layout(max_blocks: int, canvas_length: int, *, per_row: int = 16, cell_chars: int = 6) -> Layout:
    rows_per_block = -(-canvas_length // per_row)
    cells, headers = [], []
    for block in range(max_blocks):
        header = block * (rows_per_block + 1)
        headers.append((block, header))
        for position in range(canvas_length):
            row, slot = divmod(position, per_row)
            cells.append(Cell(block, position, header + 1 + row, slot * (cell_chars + 1), cell_chars))
    return Layout("grid", tuple(cells), tuple(headers), max_blocks * (rows_per_block + 1), per_row * (cell_chars + 1) - 1, canvas_length)


def final_tokens(trace: Trace) -> list[np.ndarray]:
    """Each block's final ids: committed tokens, or the last step's argmax for an unfinished block."""
    out = [b.tokens for b in trace.blocks]
    started = {s.block for s in trace.steps}
    for block in sorted(started - {b.block for b in trace.blocks}):
        out.append(trace.block_steps(block)[-1].argmax)
    return out


def text_layout(trace: Trace, *, columns: int = 96) -> Layout:
    """Slots from the final text: real newlines and indentation, wrapped at `columns` between words (a word cut
    into tokens moves to the next line whole, unless it alone is longer than a line)."""
    canvas = trace.canvas_length
    blocks = final_tokens(trace)
    n_blocks = max(trace.max_blocks, len(blocks))
    cells, headers, row = [], [], 0
    for block in range(n_blocks):
        headers.append((block, row))
        row, col, word = row + 1, 0, None
        tokens = blocks[block] if block < len(blocks) else np.full(canvas, -1)
        for position, token in enumerate(tokens):
            piece = "" if token < 0 else trace.piece(token)
            special = token < 0 or _is_special(int(token), trace)
            breaks = 0 if special else piece.count("\n")
            shown = " " if special else text_slot_text(piece)
            trailing = piece.rpartition("\n")[2] if breaks else ""
            width = max(1, min(len(shown), columns))
            if word is None or special or piece[:1].isspace():
                word = len(cells)  # a word starts here: a line too long wraps before it, not inside it
            if col + width > columns and col > 0:
                start = cells[word] if word < len(cells) else None  # the word's first cell, when it began before this token
                if start is not None and start.row == row and start.col > 0 and col - start.col + width <= columns:
                    cells[word:] = [replace(c, row=row + 1, col=c.col - start.col) for c in cells[word:]]  # it moves down whole
                    row, col = row + 1, col - start.col
                else:
                    row, col = row + 1, 0
            cells.append(Cell(block, position, row, col, width))
            col += width
            if special or piece[-1:].isspace():
                word = None  # a space or newline ends the word
            if breaks:
                row, col = row + breaks, min(len(trailing.expandtabs(4)), columns - 1)  # keep the indentation
        row += 1
    return Layout("text", tuple(cells), tuple(headers), row, columns, canvas)


def display_text(piece: str) -> str:
    """A token's text with whitespace made visible where it matters.

    Newlines and tabs always get glyphs; a token made only of spaces (indentation) shows one dot
    per space, since blank cells would hide when indentation commits.
    """
    text = piece.replace("\r", "").replace("\n", NEWLINE_GLYPH).replace("\t", TAB_GLYPH)
    if text and not text.strip(" "):
        return SPACE_GLYPH * len(text)
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)


def text_slot_text(piece: str) -> str:
    """What a token shows in the text layout: up to its last newline; the indentation after the
    newline is where the next line starts, so it is not drawn a second time."""
    if "\n" in piece:
        return display_text(piece.rpartition("\n")[0] + "\n")
    return display_text(piece)


def _is_special(token: int, trace: Trace) -> bool:
    return token in trace.model.eos_token_ids or token == trace.model.pad_token_id


def _fit(text: str, width: int) -> str:
    if len(text) > width:
        return text[: width - 1] + ELLIPSIS if width > 1 else ELLIPSIS
    return text.ljust(width)


def paint(frame: FrameState, layout: Layout, trace: Trace, palette: Palette, details=None) -> list[PaintedCell]:
    """What every cell shows at one frame. `details(block, position) -> str` adds tooltip lines."""
    model = trace.model  # for the EOS / pad ids
    pinned = pinned_positions(trace)
    painted = []
    for cell in layout.cells:
        if cell.block >= frame.states.shape[0]:
            continue
        state = State(frame.states[cell.block, cell.position])
        token = int(frame.token_ids[cell.block, cell.position])
        fg, bg = palette.colors(state)
        special = False
        if state in (State.NOISE, State.REMASKED):
            text, label = NOISE_GLYPH * cell.width, state.name.lower()
        elif state == State.EMPTY:
            text, label = EMPTY_GLYPH.ljust(cell.width) if layout.kind == "grid" else " " * cell.width, "not reached"
        else:
            piece = trace.piece(token)
            special = _is_special(token, trace)
            if special and layout.kind == "text":
                text = EOS_GLYPH if token in model.eos_token_ids else PAD_GLYPH
            elif token == model.pad_token_id:
                text = PAD_GLYPH
            else:
                text = text_slot_text(piece) if layout.kind == "text" else display_text(piece)
            text = _fit(text, cell.width)
            label = {State.NEW: "new", State.KEPT: "kept draft", State.COMMITTED: "committed"}[state]
        if special:
            fg = palette.special if state == State.COMMITTED else fg
        thought = frame.thought is not None and bool(frame.thought[cell.block, cell.position])
        if thought and state == State.COMMITTED and not special:
            fg = palette.thought[0]
        tooltip = _tooltip(frame, cell, state, token, label, trace) + ("\nthinking channel (not the answer)" if thought else "")
        is_pinned = cell.block == 0 and cell.position in pinned
        if is_pinned:
            tooltip += "\npinned: the run held this token here (not the model's choice)"
        if details is not None:
            extra = details(cell.block, cell.position)
            tooltip = f"{tooltip}\n{extra}" if extra else tooltip
        painted.append(
            PaintedCell(
                row=cell.row,
                col=cell.col,
                width=cell.width,
                text=text,
                fg=fg,
                bg=bg,
                state=state,
                remasked_mark=state == State.REMASKED,
                changed_mark=bool(frame.changed[cell.block, cell.position]),
                special=special,
                tooltip=tooltip,
                thought=thought,
                pinned=is_pinned,
            )
        )
    return painted


def pinned_positions(trace: Trace) -> frozenset[int]:
    """The first block's pinned positions (record --pin); pins hold only the first block."""
    return frozenset(position for position, _ in trace.start.pins) if trace.start is not None else frozenset()


def _tooltip(frame: FrameState, cell: Cell, state: State, token: int, label: str, trace: Trace) -> str:
    parts = [f"block {cell.block + 1} · position {cell.position} · {label}"]
    if token >= 0:
        parts.append(f"token {token} {trace.piece(token)!r}")
    if frame.kind == "step" and cell.block == frame.block:
        parts.append(f"entropy {number(frame.entropy_nats[cell.position])} nats")
        if state in (State.NOISE, State.REMASKED):
            draft = int(frame.argmax[cell.position])
            parts.append(f"argmax draft {trace.piece(draft)!r}")
        if frame.changed[cell.block, cell.position]:
            parts.append("resampled to a different token this step")
    return " · ".join(parts[:2]) + ("\n" + " · ".join(parts[2:]) if len(parts) > 2 else "")
