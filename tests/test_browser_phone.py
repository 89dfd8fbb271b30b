"""On a phone (390x844) the canvas fits the width, 8 cells a row with no sideways scroll (the text layout 44 columns
in 13px glyphs, each of its lines one line on screen), and pressing Generate, which
lies under the canvas, brings the canvas into view and keeps it there while the run fills it in (issue 58).  A page
of its own (not test_browser_layout's): its first run's canvas grows under the eye, where scroll anchoring pushed it
off the top."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, VIEW, app_in_chromium, press_generate, wait_for_run_end
from visualizer.layout import NARROW_TEXT_COLUMNS

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

NO_SIDEWAYS_SCROLL = """() => { const frame = document.querySelector('#dv-live .dv-frame');
  return document.documentElement.scrollWidth <= window.innerWidth && frame.scrollWidth <= frame.clientWidth; }"""


CANVAS_IN_VIEW = """() => { const r = document.querySelector('.dv-canvas').getBoundingClientRect();
  return r.top >= 0 && r.top < window.innerHeight; }"""


def test_on_a_phone_the_canvas_fits_the_width_and_a_run_brings_it_into_view(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:  # a fresh page: its first run's canvas fills in under the eye
        page.set_viewport_size({"width": 390, "height": 844})
        page.locator("#dv-generate").scroll_into_view_if_needed()  # a visitor scrolls down to Generate
        assert not page.evaluate(CANVAS_IN_VIEW)
        runs = press_generate(page)
        page.wait_for_function(CANVAS_IN_VIEW, timeout=10_000)  # the run's canvas in view
        wait_for_run_end(page, runs + 1)
        assert page.evaluate(CANVAS_IN_VIEW), "the canvas filled in and left the view"
        assert page.evaluate(NO_SIDEWAYS_SCROLL), "the canvas scrolls sideways on a phone"
        row = page.evaluate("""() => [0, 7, 8].map((i) => document.querySelector(`.dv-canvas span[data-i="${i}"]`)
            .getBoundingClientRect().top)""")
        assert row[0] == row[1] < row[2]  # 8 cells a row
        page.set_viewport_size({"width": 1400, "height": 1000})
        assert page.evaluate(NO_SIDEWAYS_SCROLL)
        row = page.evaluate("() => [0, 15].map((i) => document.querySelector(`.dv-canvas span[data-i=\"${i}\"]`).getBoundingClientRect().top)")
        assert row[0] == row[1]  # at 1400 px, 16 a row again


TEXT_LINES = f"""() => {{ const view = {VIEW}, pre = document.querySelector('#dv-live .dv-canvas');
  const drawn = Math.round(pre.getBoundingClientRect().height / parseFloat(getComputedStyle(pre).lineHeight));
  return {{ columns: view.layout.columns, rows: view.layout.rows, drawn, font: parseFloat(getComputedStyle(pre).fontSize),
           rule: pre.querySelector('.dv-rule').textContent.length }}; }}"""


def settled(page) -> None:
    """Wait until the canvas on screen holds as many lines as the layout has rows: the view takes its new layout
    before the next frame draws it (in CI the lines were read in between: one line short), and a browser that
    wrapped the lines again never gets there (the assertions after say what it drew)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(f"() => {{ const s = ({TEXT_LINES})(); return s.drawn === s.rows; }}", timeout=10_000)
    except PlaywrightTimeout:
        pass


def test_on_a_phone_the_text_layout_is_laid_out_at_its_width(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        page.set_viewport_size({"width": 390, "height": 844})
        wait_for_run_end(page, press_generate(page) + 1)
        page.get_by_label("Text (after the run)").check()
        page.wait_for_function(f"() => {VIEW}.layoutKind === 'text'")
        settled(page)
        lines = page.evaluate(TEXT_LINES)
        assert lines["columns"] == NARROW_TEXT_COLUMNS and lines["rule"] == NARROW_TEXT_COLUMNS  # the server's narrow layout
        assert lines["drawn"] == lines["rows"], f"the browser wrapped the text layout's lines again: {lines}"
        assert lines["font"] >= 12, f"the text is too small to read on a phone: {lines}"
        assert page.evaluate(NO_SIDEWAYS_SCROLL), "the text layout scrolls sideways on a phone"
        page.set_viewport_size({"width": 1400, "height": 1000})  # a wide window: the run's 96 columns again
        page.wait_for_function(f"() => {VIEW}.layout.columns === 96")
        settled(page)
        lines = page.evaluate(TEXT_LINES)
        assert lines["drawn"] == lines["rows"] and page.evaluate(NO_SIDEWAYS_SCROLL)
