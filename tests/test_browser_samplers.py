"""The sampler picker in a real headless browser: the built-in model, listed once, offers the samplers of
every installed backend that runs it, each with its note; picking one shows the knobs it reads, and a run
under it is recorded with that sampler on the backend that has it."""

from __future__ import annotations

import os

import pytest

from tests.browser import CHROMIUM, app_in_chromium

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]


@pytest.fixture(scope="module")
def page():
    from backends import BUILTIN_MODEL_DIR

    with app_in_chromium(str(BUILTIN_MODEL_DIR)) as page:
        yield page


def test_the_picker_offers_every_sampler_with_its_note_and_runs_the_picked_one(page):
    page.get_by_text("Knobs (defaults").click()
    page.get_by_label("Entropy bound (nats)").wait_for(timeout=10_000)  # the knobs entropy-bound reads, and no other
    assert not page.get_by_label("Refine threshold").is_visible()
    assert page.get_by_text("lowest-entropy positions").first.is_visible()  # the default's note
    page.get_by_label("Sampler").click()
    # the open dropdown's options (the live view's own selects, the replay speed, hold options too)
    offered = [o.text_content().replace("✓", "").strip() for o in page.get_by_role("listbox").get_by_role("option").all()]
    assert offered == ["entropy-bound", "discrete-ddim", "block-refinement"]
    page.get_by_role("option", name="block-refinement").click()
    page.get_by_text("commits accumulate").first.wait_for(timeout=10_000)  # its note replaces the default's
    page.get_by_label("Refine threshold").wait_for(timeout=10_000)  # the knobs it reads appear, the others go
    assert page.get_by_label("Editing threshold").is_visible() and not page.get_by_label("Entropy bound (nats)").is_visible()
    model_line = page.locator("#dv-model-info")  # names the backend that runs the picked sampler
    model_line.get_by_text("diffusers on").wait_for(timeout=10_000)
    assert "transformers" not in model_line.inner_text()

    steps = page.get_by_label("Max denoising steps").first  # a short run: the machine may be shared
    steps.fill("8")
    steps.press("Enter")
    page.get_by_role("button", name="Generate").click()
    page.wait_for_function("() => { const s = window.dvLiveView && window.dvLiveView.stats(); return s && s.ended; }",
                           timeout=240_000)
    if os.environ.get("DV_SCREENSHOT"):  # the picture for docs/samplers.md
        page.screenshot(path=os.environ["DV_SCREENSHOT"], full_page=True)
    assert "committed" in page.locator(".dv-status").text_content()  # the run reached its committed frame
