"""The readouts' words: the sentence under tau_b, the inspector's sentence, one number format, one layer
order, the padding glyph and the legends, the GIF caption's wrapping, a long token said whole on hover, the pin mark
in the legends and the heatmaps' axes and colours named."""

import json
import re
import shutil
from html import escape
from html.parser import HTMLParser
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import ImageColor

from tests.trace_factory import inside_trace, trace_from_text
from visualizer.alternatives import alternatives_html, alternatives_text, position_alternatives
from visualizer.animation import PROMPT_LINES, status_line, wrap_caption
from visualizer.charts import entropy_heatmap_svg
from visualizer.layer_charts import kl_heatmap_svg, layer_rms_svg, lens_rank_svg
from visualizer.layout import PAD_GLYPH, SPACE_GLYPH, grid_layout
from visualizer.live_stream import LiveEncoder
from visualizer.numbers import number
from visualizer.palette import PAD_LABEL, PIN_LABEL, RESAMPLED_LABEL, STANDARD
from visualizer.readout import order_words
from visualizer.render_html import legend_html, render_frame_html
from visualizer.render_image import LEGEND_LINES, MARGIN, text_metrics, render_frame_image
from visualizer.states import frame_refs, frame_state
from visualizer.trace import Trace

pytestmark = pytest.mark.unit

LIVE_VIEW_JS = Path(__file__).parent.parent / "visualizer" / "static" / "live_view.js"


def test_order_words_follow_tau():
    assert order_words(0.95) == "run left to right"
    assert order_words(0.44) == "mostly run left to right"
    assert order_words(0.0) == "follow no clear order"
    assert order_words(-0.95) == "run right to left"


# ---- one number format ----------------------------------------------------------------------------
NUMBERS = [1.0, 0.4548, 0.2211, 0.002094, 1.55e-06, 0.0, 12.345, 999.6, 1234.5, 0.001, -0.5, -2e-05]


def test_numbers_have_three_significant_digits_and_no_exponent():
    assert [number(v) for v in NUMBERS] == [
        "1", "0.455", "0.221", "0.00209", "< 0.001", "0", "12.3", "1000", "1235", "0.001", "-0.5", "> -0.001"]


@pytest.mark.processes
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run live_view.js's number()")
def test_the_browser_writes_numbers_as_python_does():
    source = re.search(r"function number\(value\) \{.*?\n  \}\n", LIVE_VIEW_JS.read_text(), re.S).group(0)
    script = source + f"console.log(JSON.stringify({json.dumps(NUMBERS)}.map(number)));"
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out) == [number(v) for v in NUMBERS]


# ---- the inspector's sentence ----------------------------------------------------------------------
def _sampled_outsider() -> Trace:
    """Position 0 accepted its third candidate (p 0.1) while the first (p 0.6) was more likely."""
    data = json.loads(trace_from_text([["a", "b"]], [[0, 0]], topk=3).to_json())
    data["steps"][0]["canvas"][0] = data["steps"][0]["topk_ids"][0][2]
    return Trace.from_dict(data)


def test_the_inspector_says_a_sample_was_not_the_most_likely_token():
    trace = _sampled_outsider()
    alt = position_alternatives(trace, 0, position=0, step=0)
    sentence = alternatives_text(alt).splitlines()[-1]
    taken, favourite = alt.taken.piece, alt.almost.piece
    assert sentence == (f"It sampled {taken!r} (p = {number(alt.taken.probability)}), not its most likely candidate: "
                        f"{favourite!r} (p = {number(alt.almost.probability)}) was more likely.")
    assert "almost chose" not in alternatives_html(trace, 0, 0) and "was more likely" in alternatives_html(trace, 0, 0)


def test_the_inspector_names_the_runner_up_when_it_took_the_favourite():
    trace = trace_from_text([["a", "b"]], [[0, 0]], topk=3)
    alt = position_alternatives(trace, 0, position=0, step=0)
    assert alt.taken == alt.at_commit[0]
    assert alternatives_text(alt).splitlines()[-1] == (
        f"It took {alt.taken.piece!r} (p = {number(alt.taken.probability)}), its most likely candidate; "
        f"the token it almost chose: {alt.almost.piece!r} (p = {number(alt.almost.probability)}).")


def test_no_number_in_the_inspector_is_written_with_an_exponent():
    data = json.loads(trace_from_text([["a", "b"]], [[0, 0]], topk=3).to_json())
    data["steps"][0]["topk_probs"][0][2] = 1.5e-06
    data["steps"][0]["entropy_nats"][0] = 2e-05
    html = alternatives_html(Trace.from_dict(data), 0, 0)
    assert "< 0.001" in html and not re.search(r"\de-\d", html)


# ---- one layer order -------------------------------------------------------------------------------
def _label_y(svg: str, label: str) -> float:
    return float(re.search(rf'<text[^>]* y="([\d.]+)"[^>]*>{label}</text>', svg).group(1))


def test_the_rms_panel_and_the_lens_grid_put_the_first_layer_on_top():
    trace = inside_trace()  # layers 0 and 3
    rms, lens = layer_rms_svg(trace, 0), lens_rank_svg(trace, 0, 2)
    assert _label_y(rms, "L0") < _label_y(rms, "L3")
    assert _label_y(lens, "L0") < _label_y(lens, "L3")


# ---- padding and the legends -----------------------------------------------------------------------
def test_padding_has_its_own_glyph_and_a_place_in_every_legend():
    assert PAD_GLYPH != SPACE_GLYPH
    html = legend_html(STANDARD)
    assert f">{PAD_GLYPH}</span> {PAD_LABEL}" in html and RESAMPLED_LABEL in html
    trace = inside_trace()
    start = json.loads(LiveEncoder(trace).start_line())
    assert (start["pad_glyph"], start["pad_label"], start["resampled_label"]) == (PAD_GLYPH, PAD_LABEL, RESAMPLED_LABEL)
    assert f'"{PAD_GLYPH}"' not in LIVE_VIEW_JS.read_text()  # the browser draws the glyph it is sent


def test_the_gif_legend_shows_the_resampled_mark_and_padding_on_its_second_line():
    trace = inside_trace(pins=(), layers=())
    layout = grid_layout(trace.max_blocks, trace.canvas_length)
    image = np.asarray(render_frame_image(trace, frame_state(trace, 0), layout, STANDARD, caption=[]))
    cw, lh = text_metrics(13)
    second = image[MARGIN + lh: MARGIN + LEGEND_LINES * lh]
    colours = {tuple(int(c) for c in px) for px in second.reshape(-1, 3)}
    assert ImageColor.getrgb(STANDARD.mark) in colours  # the mark under the resampled swatch
    assert ImageColor.getrgb(STANDARD.kept[1]) in colours
    pad_x = MARGIN + (len(RESAMPLED_LABEL) + 6) * cw  # the padding swatch follows the resampled entry
    swatch = second[:, int(pad_x): int(pad_x + cw)]
    assert (swatch != ImageColor.getrgb(STANDARD.background)).any()


# ---- the GIF caption -------------------------------------------------------------------------------
def test_a_gif_caption_wraps_instead_of_being_cut_off():
    trace = inside_trace()
    status = status_line(trace, frame_refs(trace), 0) + " · a model with a long name"
    prompt = "Prompt: " + " ".join(["word"] * 60)
    lines = wrap_caption([prompt, status], 40)
    assert all(len(line) <= 40 for line in lines)
    assert len(lines) > 1 + PROMPT_LINES and lines[PROMPT_LINES - 1].endswith("…")
    assert " · ".join(lines[PROMPT_LINES:]) == status  # nothing of the status line is lost, broken between its parts


# ---- a long token, whole on hover and in the inspector ---------------------------------------------
LONG_TOKEN = "<b>internationalization</b>"  # model output: markup in it must stay text


class _Cells(HTMLParser):
    """Each canvas cell's shown text and title, unescaped as a browser reads them."""

    def __init__(self):
        super().__init__()
        self.cells, self._open = [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "span" and "dv-cell" in (attrs.get("class") or ""):
            self._open = {"title": attrs.get("title", ""), "text": ""}
            self.cells.append(self._open)

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        self._open = None


def test_a_long_token_is_cut_in_its_cell_and_said_whole_in_its_title_and_the_inspector():
    trace = trace_from_text([["a", LONG_TOKEN]], [[0, 0]], topk=3)
    layout = grid_layout(trace.max_blocks, trace.canvas_length)
    html = render_frame_html(trace, frame_state(trace, -1), layout, STANDARD)
    assert "<b>" not in html  # escaped, never markup
    parser = _Cells()
    parser.feed(html)
    cell = parser.cells[1]
    assert cell["text"].endswith("…") and len(cell["text"]) == layout.cells[1].width  # the cell cuts it
    assert repr(LONG_TOKEN) in cell["title"]  # the tooltip says it whole
    inspector = alternatives_html(trace, len(frame_refs(trace)) - 1, 1)
    assert "<b>" not in inspector and escape(repr(LONG_TOKEN)) in inspector


# ---- pin marks and the heatmaps' axes --------------------------------------------------------------
def test_the_canvas_legend_names_the_pin_mark_only_when_the_run_pinned():
    for pins, shown in (((2, 30),), True), ((), False):
        trace = inside_trace(pins=pins)
        html = render_frame_html(trace, frame_state(trace, -1), grid_layout(trace.max_blocks, trace.canvas_length), STANDARD)
        legend = html.split('<pre class="dv-canvas"')[0]
        assert (f"</span> {PIN_LABEL}</span>" in legend) == shown


HEATMAPS = {"entropy": (entropy_heatmap_svg, "dark = confident"), "shift": (kl_heatmap_svg, "dark = settled"),
            "layer RMS": (layer_rms_svg, "dark = small")}


@pytest.mark.parametrize("name", HEATMAPS)
def test_every_heatmap_names_its_axes_its_colours_and_its_pin_marks(name):
    draw, colours = HEATMAPS[name]
    pinned, plain = draw(inside_trace(), 0), draw(inside_trace(pins=()), 0)
    for svg in (pinned, plain):
        assert ">position →</text>" in svg and re.search(r">step( \d+)?</text>", svg)
        assert colours in svg and "yellow = " in svg
    assert "pinned position (record --pin)" in pinned and "pinned position (record --pin)" not in plain
