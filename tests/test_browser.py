"""The app in a real headless browser: pick a demo, watch frames arrive, replay with the slider.

Uses Debian's Chromium through Playwright (no browser download); `.ci/run` installs Chromium.
"""

from __future__ import annotations

import re
import shutil

import pytest

import app as app_module

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def page(no_eos_model_dir):
    from playwright.sync_api import sync_playwright

    ui = app_module.build_app(str(no_eos_model_dir))
    ui.queue(default_concurrency_limit=1).launch(prevent_thread_lock=True, quiet=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(ui.local_url)
        page.get_by_text("parameters").first.wait_for(timeout=60_000)  # the model info appears once loaded
        yield page
        browser.close()
    ui.close()


def status_text(page) -> str:
    return page.get_by_text(re.compile(r"^Frame \d+/\d+")).first.text_content()


def test_demo_generate_and_replay_in_the_browser(page):
    page.get_by_label("Demo prompt").click()
    page.get_by_role("option", name="Eight planets, one per line, each with a fun fact").click()
    prompt = page.get_by_role("textbox", name="Prompt")
    page.wait_for_function("() => document.querySelector('textarea').value.includes('eight planets')")
    assert "eight planets" in prompt.input_value()
    assert "List markers" in page.content()

    page.get_by_role("button", name="Generate").click()
    # a frame of a step (not the final commit) is on screen while the model is still running
    page.get_by_text(re.compile(r"^Frame \d+/\d+ · Block 1/1 · step \d+ ")).wait_for(timeout=60_000)
    cells = page.locator(".dv-canvas .dv-cell")
    assert cells.count() == 256  # one cell per canvas position, laid out before any token arrived
    page.get_by_text(re.compile(r"committed \(256 positions\)")).wait_for(timeout=120_000)
    assert page.locator(".dv-canvas .dv-committed").count() == 256
    committed = page.get_by_role("textbox", name="Committed text").input_value()
    assert committed.strip()

    # replay an early frame by typing into the slider's number box, as a user can
    box = page.locator("input[type=number]").last
    box.fill("2")
    box.press("Enter")
    page.get_by_text(re.compile(r"^Frame 3/\d+ · Block 1/1 · step 3 ")).wait_for(timeout=30_000)
    assert page.locator(".dv-canvas .dv-committed").count() == 0

    # switching the palette re-renders the same frame with the colour-blind-safe colours
    page.get_by_label("colorblind").check()
    page.wait_for_function("() => document.querySelector('.dv-canvas').innerHTML.includes('#e69f00') || document.querySelectorAll('.dv-new').length == 0")
    assert status_text(page).startswith("Frame 3/")
