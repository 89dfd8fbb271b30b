"""Messages that stay until the visitor acts (issue 58): a typed model id that cannot be loaded is refused in one
line, the box goes back to the model that runs, and the line stays (putting the old model back is not a new pick)."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, app_in_chromium, press_generate, wait_for_run_end, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]


def test_a_failed_model_load_keeps_its_message_until_the_visitor_acts(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        box = page.get_by_role("combobox", name="Model", exact=True)
        box.fill("nonexistent/foo")
        box.press("Enter")
        wait_for_text(page, "#dv-model-message", "nonexistent/foo")
        page.wait_for_function("(box) => box.value && box.value !== 'nonexistent/foo'", arg=box.element_handle(), timeout=30_000)
        assert box.input_value() == str(no_eos_model_dir)  # back to the model that runs
        # the revert's events have long run by now (they cleared the message ~180 ms after it appeared)
        page.wait_for_timeout(2_000)
        assert "nonexistent/foo" in page.locator("#dv-model-message").text_content()
        # the visitor's next action clears it: picking a model from the list loads it (a pick is an `input` too)
        box.click()
        page.get_by_role("option", name="Tiny random model (untrained, for comparison)").click()
        page.wait_for_function("() => !document.querySelector('#dv-model-message').textContent.includes('nonexistent/foo')", timeout=60_000)


def test_the_run_card_shows_what_ran_never_a_request_that_was_refused(no_eos_model_dir):
    """The card comes from the run that started (its recorded settings), not from the widgets at the click: a request
    the validator refuses leaves the card of the run before it, and the reproduce lines with it."""
    with app_in_chromium(no_eos_model_dir) as page:
        page.fill("#dv-prompt textarea", "the run that ran")
        wait_for_run_end(page, press_generate(page) + 1)
        wait_for_text(page, "#dv-run-card", "steps over")  # after the run: its card, its steps counted
        assert "the run that ran" in page.inner_text("#dv-run-card")
        reproduce = page.locator("#dv-reproduce-box")
        reproduce.get_by_text("Reproduce this run").click()
        wait_for_text(page, "#dv-reproduce", "the run that ran")
        prompt = page.locator("#dv-prompt textarea")
        prompt.fill("refused " * 3000)  # past the model's context: refused by the validator, before the queue
        page.get_by_role("button", name="Generate").click()
        page.wait_for_function("(box) => box.closest('.block').textContent.includes(\"this model's context\")",
                               arg=prompt.element_handle(), timeout=30_000)
        page.wait_for_timeout(1_000)  # whatever the click started has had its time
        assert "the run that ran" in page.inner_text("#dv-run-card")
        assert "refused" not in page.inner_text("#dv-run-card") and "refused" not in page.inner_text("#dv-reproduce")
