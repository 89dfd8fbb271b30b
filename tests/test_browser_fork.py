"""The fork in a real headless browser (issue 55, docs/lab.md "In the app"): scrub to a step, click a token, put an
intervention together, fork; the branch streams in the live view, joins the session's runs, and the compare view
steps parent and branch together with the changed positions outlined and the metric deltas under them.

SCREENSHOTS=folder writes docs/images/lab-fork.png's picture there (1400x1000)."""

from __future__ import annotations

import os

import pytest

from tests.browser import CHROMIUM, app_in_chromium, generate_and_wait, press_generate, show, wait_for_run_end, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

OUTLINED = """() => Array.from(document.querySelectorAll('.dv-compare .dv-cell'))
  .filter((cell) => (cell.getAttribute('style') || '').includes('inset 0 0 0 1.5px')).length"""


def value_of(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first.input_value()


def wait_for_value(page, elem_id: str, value: str) -> None:
    page.wait_for_function(
        f"() => {{ const e = document.querySelector('#{elem_id} textarea, #{elem_id} input'); return e && e.value === {value!r}; }}",
        timeout=30_000)


def test_scrub_click_fork_and_compare_the_branch(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        page.set_viewport_size({"width": 1400, "height": 1000})
        generate_and_wait(page)
        page.get_by_text("Fork this run").click()
        show(page, 2)  # the third step of block 1 on screen: the fork point follows the slider
        wait_for_value(page, "dv-fork-at", "1:3")
        page.locator("#dv-fork-kind input").click()
        page.get_by_role("option", name="set", exact=True).click()
        wait_for_text(page, "#dv-fork-hint", "set POS=TEXT")
        page.locator('.dv-canvas span[data-i="9"]').click()  # the clicked position starts the argument
        wait_for_value(page, "dv-fork-arg", "9=")
        page.locator("#dv-fork-arg textarea, #dv-fork-arg input").first.fill("9=storm")
        page.get_by_role("button", name="Add", exact=True).click()
        wait_for_value(page, "dv-fork-list", "set 9=storm")
        runs = page.evaluate("() => window.dvLiveView.stats().runs")
        page.get_by_role("button", name="Fork here and run").click()
        wait_for_run_end(page, runs + 1)  # the branch streamed in the live view as a run of its own
        wait_for_text(page, "#dv-fork-note", "branch 1: set 9=storm at 1:3, forked from root")
        wait_for_text(page, "#dv-run-card", "branch of root")
        assert "set 9=storm" in page.locator("#dv-run-card").text_content()
        # the compare view opened on parent (A) and branch (B): position 9 (and whatever followed) outlined, deltas
        page.locator(".dv-compare-side").nth(1).wait_for(timeout=30_000)
        page.wait_for_function(f"() => ({OUTLINED})() >= 2", timeout=30_000)  # at least position 9, on both sides
        deltas = page.locator(".dv-branch-deltas").text_content()
        assert "mean tau_b, blocks" in deltas and "B minus A" in deltas
        assert "branch at 1:3 (set 9=storm)" in page.locator(".dv-compare-side").nth(1).text_content()
        # a step outside the run: refused at its box before the queue, in one line; the branch stays on screen
        at = page.locator("#dv-fork-at textarea, #dv-fork-at input").first
        at.fill("1:99")
        page.get_by_role("button", name="Fork here and run").click()
        page.wait_for_function("(box) => box.closest('.block').textContent.includes('99')", arg=at.element_handle(),
                               timeout=30_000)
        assert page.evaluate("() => window.dvLiveView.stats().runs") == runs + 1
        assert "branch of root" in page.locator("#dv-run-card").text_content()
        # the session's runs: back to the root and the live view replays it
        page.locator("#dv-run-picker input").click()
        page.get_by_role("option", name="root", exact=True).click()
        page.wait_for_function("() => !(document.querySelector('#dv-run-card')?.textContent || '').includes('branch of')",
                               timeout=30_000)
        if os.environ.get("SCREENSHOTS"):
            page.locator("#dv-run-picker input").click()
            page.get_by_role("option", name="branch 1 (set 9=storm at 1:3)").click()
            wait_for_text(page, "#dv-run-card", "branch of root")
            page.locator("#dv-fork-box").scroll_into_view_if_needed()
            page.screenshot(path=f"{os.environ['SCREENSHOTS']}/lab-fork.png")
            page.locator("#dv-compare-box").scroll_into_view_if_needed()
            page.screenshot(path=f"{os.environ['SCREENSHOTS']}/lab-fork-compare.png")
        runs = press_generate(page)  # a new run starts the tree over
        wait_for_run_end(page, runs + 1)
        wait_for_value(page, "dv-run-picker", "root")
        page.locator("#dv-run-picker input").click()
        assert page.get_by_role("option", name="branch 1 (set 9=storm at 1:3)").count() == 0


def test_start_a_new_run_from_the_canvas_on_screen(no_eos_model_dir):
    """Scrub to a step, *Start a new run from this canvas or text*: a run streams, joins the session's runs
    as a start of the root, and its card says where it started; with Fork at empty and a start text, a new run
    from that text alone. SCREENSHOTS=folder writes lab-warm-start.png."""
    with app_in_chromium(no_eos_model_dir) as page:
        page.set_viewport_size({"width": 1400, "height": 1000})
        generate_and_wait(page)
        page.get_by_text("Fork this run").click()
        show(page, 2)
        wait_for_value(page, "dv-fork-at", "1:3")
        runs = page.evaluate("() => window.dvLiveView.stats().runs")
        page.get_by_role("button", name="Start a new run from this canvas or text").click()
        wait_for_run_end(page, runs + 1)
        wait_for_text(page, "#dv-fork-note", "start 1: warm start from root's canvas at 1:3")
        wait_for_text(page, "#dv-run-card", "started from the canvas of root")
        assert "at block 1, step 3" in page.locator("#dv-run-card").text_content()
        page.locator("#dv-run-picker input").click()
        assert page.get_by_role("option", name="start 1 (warm start from root's canvas at 1:3)").count() == 1
        page.keyboard.press("Escape")
        page.get_by_role("option", name="root", exact=True).wait_for(state="hidden", timeout=30_000)
        # Fork at emptied and a text given: a new run from the text alone, the session's tree started over. The
        # finished run's slider rests on its last frame and names that step in Fork at first (a later empty box
        # would be refilled): wait for it
        page.wait_for_function(
            "() => { const e = document.querySelector('#dv-fork-at textarea, #dv-fork-at input');"
            " return e && e.value !== '' && e.value !== '1:3'; }", timeout=30_000)
        page.locator("#dv-fork-at input, #dv-fork-at textarea").first.fill("")
        page.locator("#dv-warm-text textarea, #dv-warm-text input").first.fill("0=Ocean")
        page.get_by_role("button", name="Start a new run from this canvas or text").click()
        wait_for_run_end(page, runs + 2)
        wait_for_text(page, "#dv-fork-note", "root: warm start from text 0=Ocean;")
        # nothing else reached the view: the list, opened and closed above, replayed no run when the button took
        # the focus (its `input` event did, before the picker listened to `select` only)
        assert page.evaluate("() => window.dvLiveView.stats().runs") == runs + 2
        wait_for_text(page, "#dv-run-card", "given the text 0=Ocean, not held")
        assert "started from the canvas" not in page.locator("#dv-run-card").text_content()
        if os.environ.get("SCREENSHOTS"):
            page.locator("#dv-fork-box").scroll_into_view_if_needed()
            page.screenshot(path=f"{os.environ['SCREENSHOTS']}/lab-warm-start.png")
            page.locator("#dv-run-card").screenshot(path=f"{os.environ['SCREENSHOTS']}/lab-warm-start-card.png")
