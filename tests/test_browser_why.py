"""The "why" views in a real headless browser: clicking a token shows its alternatives, the
accept-budget chart follows the replay slider, the structure-first figure appears when a run ends,
and thought tokens are tinted and banded as the Python renderers draw them."""

from __future__ import annotations

import pytest

from tests.browser import (READ_CELLS, CHROMIUM, expected_cells, generate_and_wait, load_trace_file, press_generate,
                           rgb, show, wait_for_run_end, wait_for_text)
from tests.trace_factory import trace_from_text
from visualizer.palette import STANDARD
from visualizer.states import frame_refs


pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]
INSPECTOR, BUDGET = "#dv-inspector", "#dv-budget"
THINKING = ["<|channel>", "thought", "\n", "plan", " it", "<channel|>", "O", "cean", "\n", "C", "alm"]


def text_of(page, selector: str) -> str:
    return page.locator(selector).text_content()


def test_clicking_a_token_shows_its_alternatives_and_the_budget_follows_the_slider(page):
    generate_and_wait(page)
    # the run is over: the step on screen's budget and the structure-first figure arrive on their own
    wait_for_text(page, BUDGET, "fit the entropy bound")
    page.wait_for_function("() => document.querySelector('.dv-structure svg') !== null")
    assert "Structure first" in text_of(page, ".dv-structure")

    show(page, 2)
    page.locator('.dv-canvas span[data-i="9"]').click()
    wait_for_text(page, INSPECTOR, "position 9 of block 1")
    inspector = text_of(page, INSPECTOR)
    assert "step 3" in inspector and "commit step" in inspector and "the token it almost chose" in inspector

    # the slider moves: after it rests, the chart explains the new step, and the picked token follows
    wait_for_text(page, BUDGET, "step 3:")
    at_step_3 = page.locator(BUDGET).inner_html()
    show(page, 0)
    wait_for_text(page, BUDGET, "step 1:")
    assert page.locator(BUDGET).inner_html() != at_step_3
    # the step-1 answer itself (its title runs into its step line); "step 1 ·" alone also matched the step-3 answer's
    # "commit step 1 ·", so Generate could be pressed with this answer still on its way, landing over the hint
    wait_for_text(page, INSPECTOR, "of block 1step 1 ·")

    # a new run: both panels go back to their hints at once, never showing the last run's answers
    runs = press_generate(page)
    wait_for_text(page, BUDGET, "Move the replay slider", timeout_ms=5_000)
    wait_for_text(page, INSPECTOR, "Click a token on the canvas", timeout_ms=5_000)
    wait_for_run_end(page, runs + 1)
    wait_for_text(page, BUDGET, "fit the entropy bound")


def test_asks_still_on_their_way_when_generate_is_pressed_never_answer_over_the_hints(page):
    """A token picked and the slider moved, then Generate at once: the asks they sent about the old run are
    answered after the new run began, and must leave the panels' hints in place (the run token)."""
    generate_and_wait(page)  # a run on screen to pick a token of
    for attempt in range(3):
        page.locator('.dv-canvas span[data-i="9"]').click()
        page.locator("input.dv-replay").fill("2")  # frame 2, then frame 1 (the slider counts from 1)
        page.locator("input.dv-replay").fill("1")
        wait_for_run_end(page, press_generate(page) + 1)
        page.wait_for_timeout(1_000)  # room for any late answer to land (the property is that none does)
        assert "Click a token on the canvas" in text_of(page, INSPECTOR), attempt


def test_an_answer_to_an_ask_made_before_generate_was_pressed_gives_way_to_the_hint(page):
    """An ask the server answered before Generate's handler ran, delivered after the click, can't be told by the
    server (no new run yet): its answer carries the live view's ask epoch, and the page shows the hint instead
    once Generate began a new epoch. Driven deterministically: the epoch is begun as Generate's click begins it,
    then an ask of the epoch before is sent and answered."""
    from tests.browser import VIEW

    generate_and_wait(page)
    page.locator('.dv-canvas span[data-i="9"]').click()
    wait_for_text(page, INSPECTOR, "position 9 of block 1")
    before = page.evaluate("() => window.dvLiveView.epoch()")
    page.evaluate("() => window.dvLiveView.runComing()")  # what Generate's click does first (the hints' js)
    wait_for_text(page, INSPECTOR, "Click a token on the canvas", timeout_ms=5_000)  # the answer on screen: stale now
    assert "position 9" not in text_of(page, INSPECTOR)

    # count the answers that land (the page runs dropStale after each), then send an ask of the epoch before
    page.evaluate("() => { const api = window.dvLiveView, drop = api.dropStale; api.landed = 0;"
                  " api.dropStale = () => { api.landed += 1; drop(); }; }")
    page.evaluate(f"() => {{ const v = {VIEW}; v.trigger('inspect', {{ frame: 0, position: 9, block: 0, picked: true, "
                  f"run: v.start.run, epoch: {before} }}); }}")
    page.wait_for_function("() => window.dvLiveView.landed >= 1", timeout=30_000)
    assert "Click a token on the canvas" in text_of(page, INSPECTOR) and "position 9" not in text_of(page, INSPECTOR)
    # an ask of the epoch now is answered as ever (another token: clicking the picked one again unpicks it)
    page.locator('.dv-canvas span[data-i="8"]').click()
    wait_for_text(page, INSPECTOR, "position 8 of block 1")


def test_thought_tokens_are_tinted_and_banded_as_the_renderers_draw_them(page, tmp_path):
    trace = trace_from_text([THINKING], [[0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4]], topk=3)  # no entropy bound recorded
    path = tmp_path / "thinking.json"
    trace.save(path)
    page.get_by_text("Save, load and export").click()
    n = len(frame_refs(trace))
    load_trace_file(page, path, n)
    show(page, n - 1)
    assert page.evaluate(READ_CELLS) == expected_cells(trace, n - 1)
    shadows = page.evaluate("() => Array.from(document.querySelectorAll('.dv-canvas span[data-i]')).slice(0, 11).map(s => s.style.boxShadow)")
    band = rgb(STANDARD.thought[1])
    assert all(band in s for s in shadows[:6]) and not any(band in s for s in shadows[6:])
    assert "thought" in page.locator(".dv-legend").text_content()
    # the commit order measures the answer; the knob counts the thoughts too, in the browser alone
    wait_for_text(page, ".dv-readout", "answer tokens only (6 thought tokens excluded)")
    answer_tau = text_of(page, ".dv-readout")
    page.get_by_text("Knobs (defaults").click()
    page.get_by_label("Count thought tokens in the commit order").check()
    wait_for_text(page, ".dv-readout", "answer and thought tokens (6 thought)")
    wait_for_text(page, ".dv-structure", "answer and thought tokens")
    assert text_of(page, ".dv-readout") != answer_tau
    page.get_by_label("Count thought tokens in the commit order").uncheck()
    wait_for_text(page, ".dv-readout", "answer tokens only (6 thought tokens excluded)")
    wait_for_text(page, ".dv-structure", "answer tokens only")
    # a hand-built trace's candidates answer too: the answer token right after the channel
    page.locator('.dv-canvas span[data-i="6"]').click()
    wait_for_text(page, INSPECTOR, "position 6 of block 1")
    wait_for_text(page, BUDGET, "did not record its entropy bound")
