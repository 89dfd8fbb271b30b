"""Layers and pins in a real headless browser: a run with layers shows the layer panel (hidden without them)
and the heatmap's KL layer; clicking a token and *Pin text here* pins a text there for the next run, which
the canvas marks; a replayed version-4 trace shows its pins and layers as a live run would."""

from __future__ import annotations

import pytest

from tests.browser import (READ_CELLS, CHROMIUM, expected_cells, load_trace_file, press_generate, rgb, show,
                           wait_for_run_end, wait_for_text)
from tests.trace_factory import inside_trace
from visualizer.palette import STANDARD
from visualizer.states import frame_refs

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]
LAYERS, PINS, PIN_NOTE = "#dv-layer_rms", "#dv-knob-pins textarea", "#dv-pin-note"
SHADOWS = "() => Array.from(document.querySelectorAll('.dv-canvas span[data-i]')).map(s => s.style.boxShadow)"
ASKED_LIVE = "() => window.dvLiveView.stats().layersAskedLive"
# each column's alpha at the middle of the pin strip above the heatmap, and the colour at the pinned column 2
PIN_MARKS = """() => { const c = document.querySelector('.dv-heat-pins'), ctx = c.getContext('2d'), cw = c.width / window.dvLiveView.views.find((v) => v.root.isConnected).start.canvas;
  const alpha = Array.from({length: 8}, (_, p) => ctx.getImageData(Math.floor((p + 0.5) * cw), 1, 1, 1).data[3]);
  return {alpha, rgb: Array.from(ctx.getImageData(Math.floor(2.5 * cw), 1, 1, 1).data.slice(0, 3)), title: c.title}; }"""
HIDDEN = "() => { const e = document.querySelector('#dv-layer_rms'); return !e || e.offsetParent === null; }"


@pytest.fixture(scope="module")
def page(page):
    """conftest's page, with the layers and pins opened."""
    page.get_by_text("Layers and pins").click()
    return page


def run(page, n: int, *, layers: str = "") -> None:
    """Press Generate with `layers` in its box and wait for the page's `n`th run to end."""
    page.locator("#dv-knob-layers textarea").fill(layers)
    press_generate(page)
    wait_for_run_end(page, n)


def test_a_run_with_layers_shows_the_layer_panel_and_the_heatmap_offers_the_shift(page):
    assert page.evaluate(HIDDEN)  # no run yet: no panel
    run(page, 1, layers="0,1")
    assert page.evaluate(ASKED_LIVE) >= 1  # the panel was asked for while the block denoised, not only at its commit
    wait_for_text(page, LAYERS, "RMS of each recorded layer's output")
    svg = page.locator(f"{LAYERS} svg").inner_html()
    assert ">L0<" in svg and ">L1<" in svg and "<image" in svg
    # the heatmap beside the entropy: its KL layer, drawn from the frames
    picker = page.locator("select.dv-heat-layer")
    assert picker.is_visible() and picker.input_value() == "entropy"
    picker.select_option("kl")
    wait_for_text(page, ".dv-commit-panel", "KL of each position's distribution")
    picker.select_option("entropy")
    wait_for_text(page, ".dv-commit-panel", "entropy per position and step")
    # the inspector adds the lens rank grid of a clicked token
    page.locator('.dv-canvas span[data-i="4"]').click()
    wait_for_text(page, "#dv-inspector", "rank of the committed token under each layer's lens")
    # a run without layers: the panel goes away
    run(page, 2)
    page.wait_for_function(HIDDEN, timeout=10_000)
    assert not page.evaluate(ASKED_LIVE)  # without layers, never


def test_clicking_a_token_and_pinning_a_text_there_holds_it_in_the_next_run(page):
    run(page, 3)
    page.locator(PINS).fill("")
    page.locator('.dv-canvas span[data-i="5"]').click()
    page.wait_for_function("() => document.querySelector('#dv-pin-row input[type=number]').value === '5'")
    page.get_by_role("button", name="Pin text here").click()
    wait_for_text(page, PIN_NOTE, "type the text to pin there first")  # an empty text: one line, nothing added
    assert page.locator(PINS).input_value() == ""
    page.locator("#dv-pin-row input[type=number]").fill("999")
    page.locator("#dv-pin-text textarea").fill("blue")
    page.get_by_role("button", name="Pin text here").click()
    wait_for_text(page, PIN_NOTE, "must be from 0 to 255 (got 999)")
    page.locator('.dv-canvas span[data-i="5"]').click()  # unpicked
    page.locator('.dv-canvas span[data-i="5"]').click()  # picked again: its position comes back
    page.wait_for_function("() => document.querySelector('#dv-pin-row input[type=number]').value === '5'")
    page.get_by_role("button", name="Pin text here").click()
    wait_for_text(page, PIN_NOTE, "Pinned 'blue' at position 5")
    assert page.locator(PINS).input_value() == "5=blue"

    run(page, 4)
    shadows = page.evaluate(SHADOWS)
    pin = rgb(STANDARD.pin)
    assert pin in shadows[5] and not any(pin in s for s in shadows[:5])  # "blue" from 5 on (one or more tokens)
    assert "pinned" in page.locator(".dv-legend").text_content()
    wait_for_text(page, ".dv-readout", "pinned tokens excluded")
    page.locator(PINS).fill("")


def test_a_replayed_trace_shows_its_pins_and_layers(page, tmp_path):
    trace = inside_trace(pins=((2, 30),), layers=(0, 3))
    path = tmp_path / "inside.json"
    trace.save(path)
    page.get_by_text("Save, load and export").click()
    n = len(frame_refs(trace))
    load_trace_file(page, path, n)
    show(page, n - 1)
    assert page.evaluate(READ_CELLS) == expected_cells(trace, n - 1)
    shadows = page.evaluate(SHADOWS)
    assert [rgb(STANDARD.pin) in s for s in shadows[:8]] == [p == 2 for p in range(8)]
    # the heatmap marks the pinned column with a triangle above it, in the pin colour, and keys it (svg.heatmap_key)
    marks = page.evaluate(PIN_MARKS)
    assert [alpha > 0 for alpha in marks["alpha"][:8]] == [p == 2 for p in range(8)], marks
    assert marks["rgb"] == list(int(STANDARD.pin[i:i + 2], 16) for i in (1, 3, 5)) and marks["title"] == "pinned: 2"
    assert page.locator(".dv-heat-key").is_visible() and "pinned position" in page.locator(".dv-heat-key").text_content()
    # its last frame is the block's commit: the status says after how many steps, so frames and steps read apart
    steps = len(trace.steps)
    assert page.locator(".dv-status").text_content().startswith(f"Frame {n}/{n} · Block 1/1 · committed after {steps} step"), steps
    # the panel still holds the earlier run's SVG (hidden, its text the same) until this trace's arrives: wait for
    # this trace's own layers, not the title
    wait_for_text(page, f"{LAYERS} svg", "L3")
    assert ">L3<" in page.locator(f"{LAYERS} svg").inner_html() and ">L1<" not in page.locator(f"{LAYERS} svg").inner_html()
