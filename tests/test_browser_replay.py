"""A loaded run says what it is (issue 58): its card shows its prompt, the Prompt box holds it, and what
belonged to the previous run (the pin note) is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from visualizer.states import frame_refs
from visualizer.trace import Trace

from tests.browser import CHROMIUM, app_in_chromium, load_trace_file, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

PALINDROME = Path(__file__).parent.parent / "assets" / "traces" / "palindrome.json"


def test_loading_a_trace_shows_its_card_and_fills_the_prompt(no_eos_model_dir, tmp_path):
    trace = Trace.load(PALINDROME)
    with app_in_chromium(no_eos_model_dir) as page:
        page.locator("#dv-pin-note").get_by_text("Pin").first.wait_for()
        page.fill("#dv-prompt textarea", "a prompt of the run before")
        page.get_by_text("Save, load and export").click()
        load_trace_file(page, PALINDROME, len(frame_refs(trace)))
        wait_for_text(page, "#dv-run-card", "is_palindrome")
        assert page.input_value("#dv-prompt textarea") == trace.prompt
        assert "seed 0" in page.inner_text("#dv-run-card")
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(tmp_path / "card.png"))
        page.screenshot(path="/tmp/card_shot.png")
