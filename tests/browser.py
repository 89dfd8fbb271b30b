"""The app served in Debian's headless Chromium (Playwright never downloads a browser here)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

from tools.screenshot_app import app_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def app_in_chromium(model_dir):
    """A page showing the app on `model_dir`, once the model's info has appeared (it is loaded)."""
    with app_page(model=str(model_dir), chromium=CHROMIUM) as page:
        page.get_by_text("parameters").first.wait_for(timeout=60_000)
        yield page


def wait_for_text(page, selector: str, text: str, timeout_ms: int = 30_000) -> None:
    """Wait until `selector`'s text contains `text`; on a timeout, say what it showed instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    check = f"() => (document.querySelector({selector!r})?.textContent || '').includes({text!r})"
    try:
        page.wait_for_function(check, timeout=timeout_ms)
    except PlaywrightTimeout:
        shown = page.locator(selector).text_content()
        stats = page.evaluate("() => JSON.stringify(window.dvLiveView && window.dvLiveView.stats())")
        raise AssertionError(f"{selector} never showed {text!r} in {timeout_ms} ms; it shows {shown[:300]!r}; live view: {stats}") from None


def load_trace_file(page, path, frames: int) -> None:
    """Load a saved trace through the app's file input; wait until its `frames` frames are shown and its run ended."""
    page.locator("input[type=file]").first.set_input_files(str(path))
    page.wait_for_function(f"() => window.dvLiveView.stats().shownFrames === {frames} && window.dvLiveView.stats().ended",
                           timeout=30_000)
