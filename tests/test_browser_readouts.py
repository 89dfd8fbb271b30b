"""The readouts in a real headless browser: the inspector's sentence when the sampler took a token that was not the
most likely, the legend's padding and resampled entries, a tooltip's numbers written as Python writes them, and a
long token, cut in its cell, said whole on hover and in the inspector, and the heatmap's axes named under it."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser import CHROMIUM, app_in_chromium, load_trace_file, show, wait_for_text
from tests.trace_factory import trace_from_text
from visualizer.layout import PAD_GLYPH
from visualizer.palette import PAD_LABEL, RESAMPLED_LABEL
from visualizer.states import frame_refs
from visualizer.trace import Trace

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]


def test_the_inspector_legend_and_tooltips_read_in_words(no_eos_model_dir, tmp_path):
    data = json.loads(trace_from_text([["a", "b"]], [[0, 0]], topk=3).to_json())
    data["steps"][0]["canvas"][0] = data["steps"][0]["topk_ids"][0][2]  # position 0 took its third candidate
    data["steps"][0]["entropy_nats"][1] = 2e-06  # near zero: "< 0.001", never 2e-06
    trace = Trace.from_dict(data)
    path = tmp_path / "outsider.json"
    trace.save(path)
    with app_in_chromium(no_eos_model_dir) as page:
        load_trace_file(page, path, len(frame_refs(trace)))
        legend = page.locator(".dv-legend").text_content()
        assert f"{PAD_GLYPH} {PAD_LABEL}" in legend and RESAMPLED_LABEL in legend
        show(page, 0)
        page.locator('.dv-canvas span[data-i="1"]').hover()
        page.wait_for_function("() => (document.querySelector('.dv-canvas span[data-i=\"1\"]').title || '').includes('entropy')")
        title = page.locator('.dv-canvas span[data-i="1"]').get_attribute("title")
        assert "entropy < 0.001 nats" in title and not re.search(r"\de-\d", title)
        page.locator('.dv-canvas span[data-i="0"]').click()
        wait_for_text(page, "#dv-inspector", "was more likely")
        inspector = page.locator("#dv-inspector").text_content()
        assert "It sampled" in inspector and "not its most likely candidate" in inspector and "almost chose" not in inspector


def test_a_long_tokens_cell_says_it_whole_on_hover(no_eos_model_dir, tmp_path):
    long_token = "<b>internationalization</b>"  # model output: shown as text, never as markup
    trace = trace_from_text([["a", long_token]], [[0, 0]], topk=3)
    path = tmp_path / "long.json"
    trace.save(path)
    with app_in_chromium(no_eos_model_dir) as page:
        load_trace_file(page, path, len(frame_refs(trace)))
        cell = page.locator('.dv-canvas span[data-i="1"]')
        assert cell.text_content().endswith("…")  # the cell cuts it
        cell.hover()
        page.wait_for_function("() => (document.querySelector('.dv-canvas span[data-i=\"1\"]').title || '').includes('token')")
        assert repr(long_token) in cell.get_attribute("title")
        assert page.locator(".dv-canvas b").count() == 0
        cell.click()
        wait_for_text(page, "#dv-inspector", "internationalization")
        assert repr(long_token) in page.locator("#dv-inspector").text_content()
        assert page.locator("#dv-inspector b").count() == 0


def test_the_heatmap_names_its_axes_and_its_colours(no_eos_model_dir, tmp_path):
    trace = trace_from_text([["a", "b", "c"]], [[0, 1, 2]])
    path = tmp_path / "three.json"
    trace.save(path)
    with app_in_chromium(no_eos_model_dir) as page:
        load_trace_file(page, path, len(frame_refs(trace)))
        show(page, 1)  # a step: the map has a cursor
        wait_for_text(page, ".dv-heat-axes", "position 0 to 2")
        axes = page.locator(".dv-heat-axes").text_content()
        assert "down: step 1 to 48" in axes and "orange line: the step on screen" in axes
        assert "dark: confident, yellow: uncertain" in page.locator(".dv-heatmap").locator("xpath=..").text_content()
