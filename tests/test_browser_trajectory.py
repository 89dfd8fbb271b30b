"""Every step read against its end, in a real headless browser: the *Record distance to final* box records the KL to the final
step, the live heatmap offers it as a third layer, and the token inspector says when the clicked token was finalized."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, app_in_chromium, press_generate, wait_for_run_end, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]


def test_the_kl_to_final_layer_and_the_inspectors_trajectory_line(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        page.get_by_text("Knobs (defaults").click()
        page.get_by_label("Record distance to final").check()
        press_generate(page)
        wait_for_run_end(page, 1)
        picker = page.locator("select.dv-heat-layer")
        assert picker.is_visible()
        picker.select_option("klf")
        wait_for_text(page, ".dv-commit-panel", "KL of each position's final distribution from each step's")
        page.locator('.dv-canvas span[data-i="4"]').click()
        wait_for_text(page, "#dv-inspector", "finalized at step")
        assert "KL to final at step" in page.locator("#dv-inspector").inner_text()
