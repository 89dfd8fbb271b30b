"""Messages that stay until the visitor acts (issue 58): a typed model id that cannot be loaded is refused in one
line, the box goes back to the model that runs, and the line stays (putting the old model back is not a new pick)."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, app_in_chromium, wait_for_text

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
