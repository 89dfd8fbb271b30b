"""Compare that fits (issue 58): at 1400x1000 and 1280x800 both panes stand side by side and show their whole canvas
(no sideways scroll), on a phone one under the other, still without; each pane is titled by its run, and the exported
comparison GIF's file appears right beside its button."""

from __future__ import annotations

import os

import pytest

from tests.browser import CHROMIUM, app_in_chromium, press_generate, wait_for_run_end

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

PANES = """() => Array.from(document.querySelectorAll('.dv-compare-side')).map((side) => {
  const canvas = side.querySelector('.dv-canvas').parentElement;
  return { title: side.querySelector('.dv-compare-label').textContent, scroll: canvas.scrollWidth, client: canvas.clientWidth,
           top: side.getBoundingClientRect().top, page: document.documentElement.scrollWidth <= window.innerWidth };
})"""
SIZES = ((1400, 1000, "side by side"), (1280, 800, "side by side"), (390, 844, "one under the other"))


def test_both_panes_fit_are_titled_and_the_gif_lies_beside_its_button(no_eos_model_dir, tmp_path):
    with app_in_chromium(no_eos_model_dir) as page:
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.get_by_text("Compare two runs").click()
        for side in "AB":
            wait_for_run_end(page, press_generate(page) + 1)
            page.get_by_role("button", name=f"Use this run as {side}").click()
            page.get_by_text(f"Run {side}:").first.wait_for(timeout=30_000)
        page.locator(".dv-compare-side").nth(1).wait_for(timeout=30_000)
        for width, height, placed in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            panes = page.evaluate(PANES)
            assert len(panes) == 2
            for side, pane in zip("AB", panes):
                assert pane["scroll"] <= pane["client"] and pane["page"], (width, pane)  # the whole canvas, no sideways scroll
                assert pane["title"].startswith(f"{side}: '") and "seed" in pane["title"] and "sampler" in pane["title"]
            assert (panes[0]["top"] == panes[1]["top"]) == (placed == "side by side"), (width, panes)
        page.set_viewport_size({"width": 1400, "height": 1000})
        cards = page.locator("#dv-compare-cards .dv-compare-card")
        assert cards.count() == 2
        for card in (cards.nth(0), cards.nth(1)):  # pinning B kept A's card
            text = card.text_content()
            assert "not chosen" not in text and "seed" in text and "sampler" in text and "steps over" in text
            assert card.locator(".dv-card-prompt").get_attribute("title")  # the whole prompt on hover
        page.get_by_role("button", name="Export comparison GIF").click()
        link = page.locator("#dv-compare-file a").first
        link.wait_for(timeout=120_000)
        button, file_box = page.get_by_role("button", name="Export comparison GIF").bounding_box(), link.bounding_box()
        assert abs(file_box["x"] - (button["x"] + button["width"])) < 200 or abs(file_box["y"] - button["y"]) < 200
        if os.environ.get("SCREENSHOTS"):
            page.locator(".dv-compare").screenshot(path=f"{os.environ['SCREENSHOTS']}/compare-panes.png")
            page.screenshot(path=f"{os.environ['SCREENSHOTS']}/compare-page.png", full_page=True)
