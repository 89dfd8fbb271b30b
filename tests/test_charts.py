"""SVG charts and the readout panel: well-formed, deterministic, with the right marks and tooltips."""

import base64
import io
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image
from tests.trace_factory import block_tokens, trace_from_commit_steps, trace_from_masks

from visualizer.charts import commit_panel_html, commits_per_step_svg, entropy_heatmap_svg, tau_over_steps_svg
from visualizer.readout import position_tooltip, render_readout_html, token_details
from visualizer.metrics import live_readout, position_details
from visualizer.states import frame_refs

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)  # raises on malformed markup, e.g. an unescaped '<' in a tooltip
    assert root.tag == f"{SVG}svg"
    return root


def titles(root: ET.Element) -> list[str]:
    return [t.text for t in root.iter(f"{SVG}title")]


def cursor_lines(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter(f"{SVG}line") if e.get("stroke") == "#f59e0b"]


@pytest.fixture
def trace():
    commit = [0, 0, 1, 1, 2, 2, 3, 3, None, 1, 0, 0]
    masks = [[c is not None and c <= t for c in commit] for t in range(4)]
    masks[2][0] = False  # one re-mask event at step 2
    entropy = [[0.001 if m else 3.0 for m in row] for row in masks]
    return trace_from_masks([masks, masks], content_lengths=[10, 10], entropy=[entropy, entropy], step_budget=6)


def test_tau_chart_has_a_tooltip_per_step_and_a_cursor_only_on_its_block(trace):
    refs = frame_refs(trace)
    root = parse(tau_over_steps_svg(trace, 0, frame=2, refs=refs))
    tips = titles(root)
    assert len(tips) == 3 and tips[0].startswith("step 1: tau_b")
    assert "of 10 measured positions committed" in tips[2]
    assert len(cursor_lines(root)) == 1
    assert cursor_lines(parse(tau_over_steps_svg(trace, 0, frame=7, refs=refs))) == []  # block 1's frame


def test_charts_say_when_the_block_has_not_started(trace):
    for chart in (tau_over_steps_svg, entropy_heatmap_svg, commits_per_step_svg):
        svg = chart(trace, 1, frame=0)
        parse(svg)
        assert "block not started" in svg


def test_charts_are_pure_functions_of_trace_and_frame(trace):
    for chart in (tau_over_steps_svg, entropy_heatmap_svg, commits_per_step_svg):
        assert chart(trace, 0, frame=3) == chart(trace, 0, frame=3)
        assert chart(trace, 0, frame=1) != chart(trace, 0, frame=3)


def test_heatmap_pixels_follow_entropy_and_first_acceptances_are_outlined(trace):
    svg = entropy_heatmap_svg(trace, 0)
    root = parse(svg)
    image = next(e for e in root.iter(f"{SVG}image") if e.get("width") != "120")
    rgba = np.array(Image.open(io.BytesIO(base64.b64decode(image.get("href").split(",", 1)[1]))))
    assert rgba.shape == (6, 12, 4)  # one row per budgeted step, one column per position
    assert rgba[0, 0, 3] == 255 and rgba[5, 0, 3] == 0  # steps not run stay transparent
    assert rgba[0, 0, :3].sum() < rgba[0, 4, :3].sum()  # 0.001 nats darker than 3 nats (viridis)
    marks = next(e for e in root.iter(f"{SVG}path") if e.get("stroke") == "#ef4444")
    assert marks.get("d").count("M") == 11  # every position accepted at least once; position 8 never
    tips = titles(root)
    assert len(tips) == 12 and "commit step 3" in tips[4] and "re-masked at step 3" in tips[0]
    assert "never accepted: committed at finalization" in tips[8]
    assert "excluded from tau_b (eos)" in tips[10] and "stopped after 4 of 6 steps" in svg


def test_commits_chart_draws_first_acceptances_up_and_remasks_down(trace):
    root = parse(commits_per_step_svg(trace, 0))
    tips = titles(root)
    assert tips[0] == "step 1: 2 content position(s) first accepted, 0 re-mask event(s)"
    assert tips[2] == "step 3: 2 content position(s) first accepted, 1 re-mask event(s)"
    assert "1 content position(s)" in tips[-1] and "finalization" in tips[-1]  # position 8
    green = [e for e in root.iter(f"{SVG}rect") if e.get("fill") == "#16a34a"]
    gray = [e for e in root.iter(f"{SVG}rect") if e.get("fill") == "#9ca3af"]
    assert len(green) == 4 and len(gray) == 1


def test_tooltips_escape_token_text():
    trace = trace_from_commit_steps([[0, 1, 2, 3]])
    trace.pieces[10] = "<b>&"
    svg = entropy_heatmap_svg(trace, 0)
    parse(svg)
    assert "&lt;b&gt;&amp;" in svg


def test_readout_panel_shows_values_and_undefined_reasons(trace):
    html = render_readout_html(live_readout(trace, 3))
    assert "tau_b 0." in html and "control" in html and "block 1 · after step 4" in html and "4 of a budget of 6" in html
    assert "10 (excluded: 1 EOS, 1 pad)" in html
    one_step = trace_from_commit_steps([[0, 0, 0, 0]], content_lengths=[3])
    html = render_readout_html(live_readout(one_step, -1))
    assert "tau_b undefined" in html and "all 3 content positions committed on the same step" in html
    ET.fromstring(re.sub(r"&(?!amp;|lt;|gt;|quot;|#)", "&amp;", html))  # well-formed markup


def test_position_tooltip_while_pending():
    trace = trace_from_masks([[[True, False], [True, True]]], tokens=[block_tokens(2, None)])
    text = position_tooltip(position_details(trace, 0, 1, frame=0))
    assert "(noise)" in text and "not accepted yet" in text and "argmax unchanged since step 1" in text


def test_token_details_feed_the_canvas_tooltips(trace):
    from html import unescape

    from visualizer.layout import grid_layout
    from visualizer.palette import get_palette
    from visualizer.render_html import render_frame_html
    from visualizer.states import frame_state

    refs = frame_refs(trace)
    details = token_details(trace, 2, refs=refs)
    assert details(0, 0) == "commit step 1 (0.001 nats) · argmax unchanged since step 1 · re-masked at step 3"
    assert details(0, 4) == "commit step 3 (0.001 nats) · argmax unchanged since step 1 · never re-masked"
    assert details(1, 0) == ""  # block 1 has not started at frame 2
    html = render_frame_html(trace, frame_state(trace, 2, refs), grid_layout(2, 12), get_palette("standard"), details=details)
    assert "re-masked at step 3" in unescape(html)
    assert "excluded from tau_b (eos)" in token_details(trace, -1)(1, 10)


def test_commit_panel_holds_the_readout_and_three_charts(trace):
    html = commit_panel_html(trace, 6)  # block 1 (shown as 2), its second step
    assert html.count("<svg") == 3 and "dv-readout" in html
    assert "Block 2: tau_b after each step" in html and "block 2 · after step 2" in html
