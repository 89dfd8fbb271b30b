"""Messages cleared by the visitor's next action (issue 58): a message belongs to what caused it, so editing the
prompt (or starting a run, or uploading) takes the last one off the page."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, app_in_chromium, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]


def test_editing_the_prompt_clears_the_last_message(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        box = page.get_by_role("combobox", name="Model", exact=True)
        box.fill("nonexistent/foo")
        box.press("Enter")
        wait_for_text(page, "#dv-message", "nonexistent/foo")
        page.locator("#dv-prompt textarea").press_sequentially(" more")
        page.wait_for_function("() => !document.querySelector('#dv-message').textContent.includes('nonexistent/foo')",
                               timeout=30_000)
