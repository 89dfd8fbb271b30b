"""Both renderers draw the same cells from the same state, in a layout that never reflows."""

from __future__ import annotations

import re

import pytest
from PIL import ImageColor

from tests.fake_records import fake_trace
from visualizer.layout import NEWLINE_GLYPH, NOISE_GLYPH, SPACE_GLYPH, display_text, grid_layout, paint, text_layout
from visualizer.palette import COLORBLIND, STANDARD
from visualizer.render_html import render_frame_html
from visualizer.render_image import LEGEND_LINES, MARGIN, text_metrics, frame_size, render_frame_image
from visualizer.states import State, frame_refs, frame_state


@pytest.fixture
def trace():
    return fake_trace(["1000", "1100", "0110", "1111"], ["0011", "1111"], canvas_length=4, changes={(2, 1): 60})


def grid(trace):
    return grid_layout(trace.max_blocks, trace.canvas_length, per_row=2, cell_chars=5)


def spans(html):
    return re.findall(r'<span class="dv-cell dv-(\w+)" style="([^"]*)" title="([^"]*)">([^<]*)</span>', html)


def test_html_shows_each_state_with_its_colour_and_hides_noise_tokens(trace):
    html = render_frame_html(trace, frame_state(trace, 2), grid(trace), STANDARD)
    cells = spans(html)
    states = [c[0] for c in cells]
    assert states[:4] == ["remasked", "kept", "new", "noise"]
    assert states[4:] == ["empty"] * 4  # block 2 not reached yet
    assert f"background:{STANDARD.new[1]}" in cells[2][1]
    assert f"background:{STANDARD.kept[1]}" in cells[1][1]
    assert STANDARD.mark in cells[0][1]  # the remasked mark
    assert STANDARD.mark in cells[1][1]  # kept and resampled to a different token (60)
    assert cells[3][3] == NOISE_GLYPH * 5 and cells[0][3] == NOISE_GLYPH * 5
    assert "noise&gt;" not in html and "<noise>" not in html  # the random token is never shown
    assert cells[1][3].strip() == "c60"
    assert "entropy 0.5 nats" in cells[2][2]
    for label in ("noise", "new this step", "kept draft", "remasked", "committed"):
        assert label in html  # the legend
    assert "block 1" in html and "block 2" in html


def test_html_is_a_pure_function_of_the_frame(trace):
    a = render_frame_html(trace, frame_state(trace, 3), grid(trace), STANDARD)
    b = render_frame_html(trace, frame_state(trace, 3), grid(trace), STANDARD)
    assert a == b
    assert a != render_frame_html(trace, frame_state(trace, 3), grid(trace), COLORBLIND)


def test_grid_frames_never_reflow(trace):
    """Every frame puts every cell at the same row, column and width."""
    layout = grid(trace)
    geometry = None
    for i in range(len(frame_refs(trace))):
        cells = paint(frame_state(trace, i), layout, trace, STANDARD)
        shape = [(c.row, c.col, c.width, len(c.text)) for c in cells]
        assert all(c.width == len(c.text) for c in cells)
        geometry = geometry or shape
        assert shape == geometry


def pixel(image, layout, trace, block, position, font_size=13):
    cw, lh = text_metrics(font_size)
    cell = layout.cell(block, position)
    top = MARGIN + (1 + LEGEND_LINES) * lh + lh // 2  # caption line, the legend's lines, half a line of air
    x = MARGIN + (cell.col + cell.width - 0.3) * cw
    y = top + cell.row * lh + lh // 2
    return image.getpixel((int(x), int(y)))


def test_image_cells_have_the_palette_colours(trace):
    layout = grid(trace)
    image = render_frame_image(trace, frame_state(trace, 2), layout, STANDARD)
    assert pixel(image, layout, trace, 0, 2) == ImageColor.getrgb(STANDARD.new[1])
    assert pixel(image, layout, trace, 0, 1) == ImageColor.getrgb(STANDARD.kept[1])
    cb = render_frame_image(trace, frame_state(trace, 2), layout, COLORBLIND)
    assert pixel(cb, layout, trace, 0, 2) == ImageColor.getrgb(COLORBLIND.new[1])
    assert ImageColor.getrgb(COLORBLIND.new[1]) != ImageColor.getrgb(STANDARD.new[1])


def test_all_frames_have_one_size_and_render_deterministically(trace):
    layout = grid(trace)
    sizes = {render_frame_image(trace, frame_state(trace, i), layout, STANDARD).size for i in range(len(frame_refs(trace)))}
    assert sizes == {frame_size(layout)}
    a = render_frame_image(trace, frame_state(trace, 1), layout, STANDARD)
    b = render_frame_image(trace, frame_state(trace, 1), layout, STANDARD)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != render_frame_image(trace, frame_state(trace, 2), layout, STANDARD).tobytes()


def test_whitespace_is_visible_where_it_matters():
    assert display_text("\n") == NEWLINE_GLYPH
    assert display_text("    ") == SPACE_GLYPH * 4
    assert display_text(" ocean") == " ocean"  # a word keeps its plain leading space
    assert display_text("a\tb") == "a→b"
    assert display_text("\x07") == "\ufffd"


def test_text_layout_follows_real_newlines_and_indentation():
    trace = fake_trace(["111111"], canvas_length=6)
    # tokens 10..15 = "def f():", "\n    ", "return", " 1", "\n", "x"
    trace.pieces.update({10: "def f():", 11: "\n    ", 12: "return", 13: " 1", 14: "\n", 15: "x"})
    layout = text_layout(trace)
    cells = [layout.cell(0, p) for p in range(6)]
    assert cells[0].row == cells[1].row  # the newline token ends the first line
    assert cells[2].row == cells[0].row + 1 and cells[2].col == 4  # indentation kept
    assert cells[3].col == cells[2].col + len("return")
    assert cells[5].row == cells[2].row + 1 and cells[5].col == 0
    final = frame_state(trace, -1)
    texts = [c.text for c in paint(final, layout, trace, STANDARD)]
    assert texts[0] == "def f():" and texts[1] == NEWLINE_GLYPH and texts[2] == "return"


def test_text_layout_wraps_between_words_not_inside_a_word_cut_into_tokens():
    trace = fake_trace(["11111"], canvas_length=5)
    # tokens 10..14 = "One", " evening", " I", "nside", " it": " Inside" does not fit a 14-column line after "One evening"
    trace.pieces.update({10: "One", 11: " evening", 12: " I", 13: "nside", 14: " it"})
    cells = [text_layout(trace, columns=14).cell(0, p) for p in range(5)]
    assert [(c.row, c.col) for c in cells[:2]] == [(1, 0), (1, 3)]
    assert [(c.row, c.col) for c in cells[2:]] == [(2, 0), (2, 2), (2, 7)]  # " I" went down with "nside"
    word = [text_layout(trace, columns=5).cell(0, p) for p in (2, 3)]  # a word longer than the line: cut, as before
    assert word[0].row < word[1].row


def test_text_layout_is_fixed_over_the_run_and_marks_eos_compactly():
    trace = fake_trace(["1000", "1111"], canvas_length=4, eos_at=2)
    layout = text_layout(trace)
    assert [layout.cell(0, p).width for p in range(4)] == [3, 3, 1, 1]
    first = paint(frame_state(trace, 0), layout, trace, STANDARD)
    last = paint(frame_state(trace, -1), layout, trace, STANDARD)
    assert [(c.row, c.col, c.width) for c in first] == [(c.row, c.col, c.width) for c in last]
    assert [c.state for c in last] == [State.COMMITTED] * 4
    assert last[2].text == "∎" and last[2].special
    assert first[1].text == NOISE_GLYPH * 3
