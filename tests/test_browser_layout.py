"""One view holds the run (issue 58): at 1400x1000 and 1280x800 the prompt, Generate and Stop, the canvas's
first rows and the tau_b readout are on screen without scrolling, before and during a run, and a clicked
token's inspector is on screen together with the canvas; on a phone the canvas comes first."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, press_generate, wait_for_run_end

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

SIZES = ((1400, 1000), (1280, 800))
# each part's box on screen, [left, top, right, bottom] in CSS pixels; None where the page has no such part
BOXES = """() => {
  const box = (e) => { if (!e) return null; const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const tau = Array.from(document.querySelectorAll('.dv-readout span')).find((s) => s.textContent.startsWith('tau_b '));
  return { prompt: box(document.querySelector('#dv-prompt textarea')), generate: box(document.querySelector('#dv-generate')),
           stop: box(document.querySelector('#dv-stop')), canvas: box(document.querySelector('.dv-canvas')),
           first_row: box(document.querySelector('.dv-canvas span[data-i="0"]')),
           row_end: box(document.querySelector('.dv-canvas span[data-i="15"]')),
           readout: box(document.querySelector('.dv-readout')), tau: box(tau),
           inspector: box(document.querySelector('#dv-inspector')) };
}"""
MAIN = ("prompt", "generate", "stop", "canvas")


def boxes_at(page, width: int, height: int) -> dict:
    page.set_viewport_size({"width": width, "height": height})
    assert page.evaluate("() => [window.scrollX, window.scrollY]") == [0, 0]
    return page.evaluate(BOXES)


def assert_in_view(boxes: dict, names, width: int, height: int) -> None:
    for name in names:
        left, top, right, bottom = boxes[name]
        assert 0 <= left and right <= width and 0 <= top and bottom <= height, f"{name} {boxes[name]} outside {width}x{height}"


def test_controls_canvas_readout_and_inspector_share_one_view(page):
    for width, height in SIZES:  # before the first run: the (empty) canvas and readout start on screen
        boxes = boxes_at(page, width, height)
        assert_in_view(boxes, (*MAIN, "readout"), width, height)

    runs = press_generate(page)
    page.wait_for_function("""() => { const s = window.dvLiveView.stats(); return s && s.shownIndex >= 1 && !s.ended
        && Array.from(document.querySelectorAll('.dv-readout span')).some((e) => e.textContent.startsWith('tau_b ')); }""",
                           timeout=60_000)
    during = {size: boxes_at(page, *size) for size in SIZES}  # while the model still runs
    ended = page.evaluate("() => window.dvLiveView.stats().ended")
    for (width, height), boxes in during.items():
        assert_in_view(boxes, (*MAIN, "first_row", "row_end", "tau"), width, height)
    assert not ended, "the run ended before its layout was measured"
    wait_for_run_end(page, runs + 1)

    page.locator('.dv-canvas span[data-i="40"]').click()
    page.wait_for_function("() => document.querySelector('#dv-inspector').textContent.includes('position 40')", timeout=30_000)
    for width, height in SIZES:
        boxes = boxes_at(page, width, height)
        assert_in_view(boxes, (*MAIN, "first_row", "tau", "inspector"), width, height)
        # beside the canvas, not under it
        assert boxes["inspector"][2] <= boxes["canvas"][0] and boxes["inspector"][1] < boxes["canvas"][3]


def test_on_a_phone_the_canvas_comes_first(page):
    boxes = boxes_at(page, 390, 844)
    assert boxes["canvas"][1] < boxes["prompt"][1] and boxes["canvas"][1] < boxes["generate"][1]
    page.set_viewport_size({"width": 1400, "height": 1000})

