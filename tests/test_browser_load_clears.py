"""Loading a run clears what belonged to the last one (issue 58): the GIF preview, the Downloads list, the comparison
panes and cards and the pin note go; the loaded run's card and its prompt come in their place."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, app_in_chromium, generate_and_wait, load_trace_file, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

# what is on the page of the last run's, as text (empty where it is gone)
LEFT_OVER = """() => ({
  preview: Array.from(document.querySelectorAll('img')).filter((i) => i.closest('.block')?.textContent.includes('GIF')
             && !i.closest('#dv-compare-preview')).length,
  downloads: Array.from(document.querySelectorAll('.block')).filter((b) => b.querySelector('label, span')?.textContent.trim()
             === 'Downloads').map((b) => b.querySelectorAll('a').length).reduce((a, n) => a + n, 0),
  panes: document.querySelectorAll('.dv-compare-side').length,
  cards: document.querySelectorAll('#dv-compare-cards .dv-compare-card').length,
  pin_note: document.querySelector('#dv-pin-note').textContent,
  card: document.querySelector('#dv-run-card').textContent,
  prompt: document.querySelector('#dv-prompt textarea').value })"""


def test_loading_a_run_clears_the_last_runs_preview_downloads_panes_and_pin_note(no_eos_model_dir):
    from visualizer.states import frame_refs
    from visualizer.trace import Trace
    from visualizer.replay import example_traces

    path = next(p for p in example_traces() if p.name == "story.json")
    story = Trace.load(path)
    with app_in_chromium(no_eos_model_dir) as page:
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.fill("#dv-prompt textarea", "the run before")
        generate_and_wait(page)
        page.locator('.dv-canvas span[data-i="40"]').click()  # a pin: its note says where
        # the clicked position reaches the pin row from the server: wait for it (under load the pin went to 0)
        page.wait_for_function("() => document.querySelector('#dv-pin-row input[type=number]').value === '40'")
        page.get_by_label("Text to pin there").fill("ocean")
        page.get_by_role("button", name="Pin text here").click()
        wait_for_text(page, "#dv-pin-note", "Pinned 'ocean' at position 40")
        page.get_by_text("Compare two runs").click()
        for side in "AB":
            page.get_by_role("button", name=f"Use this run as {side}").click()
        page.locator(".dv-compare-side").nth(1).wait_for(timeout=30_000)
        page.get_by_text("Save, load and export").click()
        page.get_by_role("button", name="Export animation").click()
        page.wait_for_function(f"() => {{ const s = ({LEFT_OVER})(); return s.preview && s.downloads; }}", timeout=180_000)
        before = page.evaluate(LEFT_OVER)
        assert before["panes"] == 2 and before["cards"] == 2 and "the run before" in before["card"], before

        load_trace_file(page, path, len(frame_refs(story)))
        page.wait_for_function(f"() => ({LEFT_OVER})().prompt === {story.prompt!r}", timeout=30_000)
        after = page.evaluate(LEFT_OVER)
        assert after["preview"] == 0 and after["downloads"] == 0, after  # the last run's GIF and files are gone
        assert after["panes"] == 0 and after["cards"] == 0, after  # and its comparison
        assert "Pinned" not in after["pin_note"] and "the run before" not in after["card"], after
        assert story.prompt[:30] in after["card"], after  # the loaded run says what it is
