"""Messages where the eye is (issue 58): each beside what caused it (a model that cannot load under the Model box, a
file that is not a trace under the upload box, a run's stop under Stop, inside the view at 1400x1000), one message
in one place, cleared by the visitor's next action; after Stop the status line says the run stopped."""

from __future__ import annotations

import pytest

from tests.browser import CHROMIUM, app_in_chromium, press_generate, wait_for_run_end, wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

MESSAGES = ("#dv-message", "#dv-model-message", "#dv-files-message", "#dv-export-message")
BOX = "(e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }"


@pytest.fixture(scope="module")
def page(no_eos_model_dir):
    with app_in_chromium(no_eos_model_dir) as page:
        page.set_viewport_size({"width": 1400, "height": 1000})
        yield page


def box(page, selector: str) -> list[float]:
    return page.locator(selector).first.evaluate(BOX)


def shown_messages(page) -> dict:
    """Each place's message text ("" where it is empty, or not drawn: a folded accordion draws nothing inside)."""
    return page.evaluate("(selectors) => Object.fromEntries(selectors.map((s) => [s, (document.querySelector(s)?.textContent || '').trim()]))",
                         list(MESSAGES))


def assert_just_under(message: list[float], cause: list[float], gap: float = 120) -> None:
    """`message` starts within `gap` px under `cause` and overlaps it sideways: the eye finds it there."""
    assert cause[3] - 1 <= message[1] <= cause[3] + gap, (message, cause)
    assert message[0] < cause[2] and cause[0] < message[2], (message, cause)


def test_a_model_that_cannot_load_is_said_under_the_model_box_until_the_prompt_is_edited(page):
    box_ = page.get_by_role("combobox", name="Model", exact=True)
    box_.fill("nonexistent/foo")
    box_.press("Enter")
    wait_for_text(page, "#dv-model-message", "nonexistent/foo")
    page.wait_for_function("(box) => box.value && box.value !== 'nonexistent/foo'", arg=box_.element_handle(), timeout=30_000)
    shown = shown_messages(page)
    assert [s for s, text in shown.items() if text] == ["#dv-model-message"], shown  # one message in one place
    assert_just_under(box(page, "#dv-model-message"), box_.evaluate(BOX), gap=80)
    page.locator("#dv-prompt textarea").press_sequentially(" more")
    page.wait_for_function("() => !document.querySelector('#dv-model-message').textContent.includes('nonexistent/foo')",
                           timeout=30_000)


def test_a_file_that_is_not_a_trace_is_said_under_the_upload_box(page, tmp_path):
    notes = tmp_path / "notes.json"
    notes.write_text("Dear diary, today the model denoised.")
    if page.locator("input[type=file]").count() == 0:
        page.get_by_text("Save, load and export").click()
    page.locator("input[type=file]").first.set_input_files(str(notes))
    wait_for_text(page, "#dv-files-message", "notes.json: not a trace: the file is not JSON")
    shown = shown_messages(page)
    assert [s for s, text in shown.items() if text] == ["#dv-files-message"], shown
    assert_just_under(box(page, "#dv-files-message"), box(page, "#dv-trace-upload"), gap=80)
    page.screenshot(path=str(tmp_path.parent / "notices_upload.png"))


def test_after_stop_the_status_says_stopped_and_the_notice_is_under_stop(page, tmp_path):
    page.evaluate("() => window.scrollTo(0, 0)")
    runs = press_generate(page)
    page.wait_for_function("() => { const s = window.dvLiveView.stats(); return s && s.runs > %d && s.shownIndex >= 2 && !s.ended; }"
                           % runs, timeout=60_000)
    page.get_by_role("button", name="Stop").click()
    wait_for_run_end(page, runs + 1)
    wait_for_text(page, ".dv-status", "Stopped at step")
    status = page.locator(".dv-status").first.text_content()
    assert "budget" not in status and "more step" not in status, status
    wait_for_text(page, "#dv-message", "Stopped after")
    assert "Stopped at step" not in page.locator("#dv-message").text_content()  # each says its own part, once
    message, stop = box(page, "#dv-message"), box(page, "#dv-stop")
    assert_just_under(message, stop)
    assert 0 <= message[1] and message[3] <= 1000, message  # in view at 1400x1000, no scrolling
    page.screenshot(path=str(tmp_path.parent / "notices_stop.png"))


def test_a_refused_knob_is_said_at_its_box_before_the_run(page, tmp_path):
    """The event's validator (hosting.py) answers before the queue; Gradio draws its line on the input that caused it."""
    page.evaluate("() => window.scrollTo(0, 0)")
    page.get_by_text("Knobs (defaults").click()
    seed = page.get_by_label("Seed", exact=True)
    seed.fill("-1")
    seed.press("Tab")
    page.get_by_role("button", name="Generate").click()
    page.wait_for_function("(box) => box.closest('.block').textContent.includes('seed must be a whole number from 0 to')",
                           arg=seed.element_handle(), timeout=30_000)
    assert not any(shown_messages(page).values())  # said at the seed box only
    page.screenshot(path=str(tmp_path.parent / "notices_knob.png"), full_page=True)
    seed.fill("0")
    seed.press("Tab")
    page.get_by_text("Knobs (defaults").click()


def test_a_prompt_past_the_models_context_is_said_once_at_the_prompt(page, tmp_path):
    """What only the loaded model judges goes through the validator too (webapp.app.Handlers.loaded_model_problem):
    drawn at the prompt box, not a second time under Stop, and no run starts."""
    page.evaluate("() => window.scrollTo(0, 0)")
    prompt = page.locator("#dv-prompt textarea")
    asked, runs = prompt.input_value(), page.evaluate("() => (window.dvLiveView.stats() || {runs: 0}).runs")
    prompt.fill("word " * 3000)
    page.get_by_role("button", name="Generate").click()
    page.wait_for_function("(box) => box.closest('.block').textContent.includes(\"this model's context\")",
                           arg=prompt.element_handle(), timeout=30_000)
    said = page.evaluate("() => document.body.innerText.split(\"this model's context\").length - 1")
    assert said == 1 and not any(shown_messages(page).values()), (said, shown_messages(page))  # one message, one place
    assert page.evaluate("() => (window.dvLiveView.stats() || {runs: 0}).runs") == runs
    page.screenshot(path=str(tmp_path.parent / "notices_context.png"))
    prompt.fill(asked)


def test_the_dropdowns_text_stops_before_its_arrow(page):
    for picker in ("#dv-model-picker", "#dv-demo-picker"):
        text_right, arrow_left = page.evaluate("""(id) => {
            const input = document.querySelector(id + ' input'), arrow = document.querySelector(id + ' .icon-wrap, ' + id + ' svg');
            const style = getComputedStyle(input);
            return [input.getBoundingClientRect().right - parseFloat(style.paddingRight), arrow.getBoundingClientRect().left];
        }""", picker)
        assert text_right <= arrow_left, (picker, text_right, arrow_left)


def test_the_demos_notes_go_with_the_untrained_random_model(page):
    """(Last here: it leaves the random model loaded.)"""
    page.get_by_role("combobox", name="Demo prompt").click()
    page.get_by_role("option").nth(1).click()
    wait_for_text(page, "#dv-watch-for", "Watch for")
    assert page.locator("#dv-watch-for").is_visible() and page.locator("#dv-builtin-guide").is_visible()
    box_ = page.get_by_role("combobox", name="Model", exact=True)
    box_.click()
    page.get_by_role("option", name="Tiny random model (untrained, for comparison)").click()
    gone = "(id) => { const e = document.querySelector(id); return !e || !e.checkVisibility(); }"
    for part in ("#dv-builtin-guide", "#dv-watch-for"):
        page.wait_for_function(gone, arg=part, timeout=60_000)
