"""A loaded run says what it is and replays that play (issue 58): its card shows its prompt, the Prompt box holds
it, and what belonged to the previous run (the pin note) is gone; it opens at its first frame, and Play, Pause,
the steps and the speed move through its frames in the browser, on a clock the tests move."""

from __future__ import annotations

from pathlib import Path

import pytest

from visualizer.states import frame_refs
from visualizer.trace import Trace

from tests.browser import (CHROMIUM, FAKE_CLOCK, REAL_CLOCK, VIEW, advance, app_in_chromium, load_trace_file,
                           press_generate, wait_for_run_end, wait_for_text)

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

PALINDROME = Path(__file__).parent.parent / "assets" / "traces" / "palindrome.json"
STORY = Path(__file__).parent.parent / "assets" / "traces" / "story.json"  # 48 frames: room to play at 1x and 2x


@pytest.fixture(scope="module")
def page(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        yield page


def test_loading_a_trace_shows_its_card_and_fills_the_prompt(page, tmp_path):
    trace = Trace.load(PALINDROME)
    page.locator("#dv-pin-note").get_by_text("Pin").first.wait_for()
    page.fill("#dv-prompt textarea", "a prompt of the run before")
    load_trace_file(page, PALINDROME, len(frame_refs(trace)))
    wait_for_text(page, "#dv-run-card", "is_palindrome")
    assert page.input_value("#dv-prompt textarea") == trace.prompt
    assert "seed 0" in page.inner_text("#dv-run-card")


LABEL = ".dv-replay-label"


def button(page, name: str):
    return page.get_by_role("button", name=name, exact=True)


def shown_after_drawing(page) -> int:
    """The frame on screen once the view has had two animation frames to draw whatever was due."""
    return page.evaluate(f"() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done({VIEW}.stats.shownIndex))))")


def wait_shown(page, index: int) -> None:
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === {index}", timeout=10_000)


def test_a_loaded_trace_opens_at_frame_1_and_steps_plays_and_pauses(page):
    n = len(frame_refs(Trace.load(STORY)))
    assert n >= 20, "the speed check below needs frames left after 1x and 2x"
    runs = page.evaluate(f"() => {VIEW}.stats.runs || 0")
    load_trace_file(page, STORY, n)
    page.wait_for_function(f"() => {VIEW}.stats.runs > {runs}")  # this load's, not an earlier test's same trace
    wait_shown(page, 0)
    assert page.locator(LABEL).text_content() == f"Replay: frame 1/{n}"
    assert page.locator("input.dv-replay").input_value() == "1"
    assert page.locator(".dv-status").text_content().startswith(f"Frame 1/{n} · ")

    button(page, "Step forward").click()
    wait_shown(page, 1)
    assert page.locator(LABEL).text_content() == f"Replay: frame 2/{n}"
    assert page.locator("input.dv-replay").input_value() == "2"
    button(page, "Step back").click()
    wait_shown(page, 0)
    assert page.locator(LABEL).text_content() == f"Replay: frame 1/{n}"
    button(page, "Step back").click()  # at the first frame: stays there
    assert shown_after_drawing(page) == 0

    page.evaluate(FAKE_CLOCK)
    try:
        button(page, "Play").click()
        button(page, "Pause").wait_for()
        assert shown_after_drawing(page) == 0  # the clock did not move: nothing is due yet
        advance(page, 510)  # 1x: 8 frames a second
        page.wait_for_function(f"() => {VIEW}.stats.shownIndex > 0")
        at_1x = shown_after_drawing(page)
        button(page, "Pause").click()
        button(page, "Play").wait_for()
        advance(page, 2000)
        assert shown_after_drawing(page) == at_1x  # paused: holds its frame
        assert page.locator(LABEL).text_content() == f"Replay: frame {at_1x + 1}/{n}"

        page.get_by_label("Replay speed").select_option("2x")
        button(page, "Play").click()
        advance(page, 510)  # the same advance at 2x
        page.wait_for_function(f"() => {VIEW}.stats.shownIndex > {at_1x}")
        at_2x = shown_after_drawing(page) - at_1x
        assert at_1x >= 3 and abs(at_2x - 2 * at_1x) <= 1, (at_1x, at_2x)
        assert page.locator("input.dv-replay").input_value() == str(at_1x + at_2x + 1)

        advance(page, 10_000)  # far past the end: playing stops at the last frame
        wait_shown(page, n - 1)
        button(page, "Play").wait_for()
        assert page.locator(LABEL).text_content() == f"Replay: frame {n}/{n}"

        button(page, "Play").click()  # at the end: again from frame 1
        wait_shown(page, 0)
        page.locator("input.dv-replay").fill("6")  # dragging the slider pauses
        wait_shown(page, 5)
        button(page, "Play").wait_for()
        advance(page, 1000)
        assert shown_after_drawing(page) == 5
    finally:
        page.evaluate(f"() => {{ const v = {VIEW}; v.pause(false); }}")
        page.evaluate(REAL_CLOCK)


def test_a_live_run_keeps_its_last_frame_and_can_then_be_played(page):
    runs = press_generate(page)
    # while it streams the controls are off; once it has ended, on (read together: no race with its end)
    ended, disabled = page.wait_for_function(f"""() => {{ const v = {VIEW}; const b = document.querySelector('.dv-replay-button');
        return v.stats.runs === {runs + 1} && v.stats.shownIndex >= 1 && [!!v.end, b.disabled]; }}""", timeout=60_000).json_value()
    assert disabled == (not ended)
    wait_for_run_end(page, runs + 1)
    n = page.evaluate(f"() => {VIEW}.frames.length")
    wait_shown(page, n - 1)  # the end of a live run stays on its last frame
    assert page.locator(LABEL).text_content() == f"Replay: frame {n}/{n}"
    assert button(page, "Play").is_enabled() and button(page, "Step back").is_enabled()
    page.evaluate(FAKE_CLOCK)
    try:
        button(page, "Play").click()  # at the end: from frame 1
        wait_shown(page, 0)
        advance(page, 260)
        page.wait_for_function(f"() => {VIEW}.stats.shownIndex >= 2")
        button(page, "Pause").click()
    finally:
        page.evaluate(f"() => {{ const v = {VIEW}; v.pause(false); }}")
        page.evaluate(REAL_CLOCK)
