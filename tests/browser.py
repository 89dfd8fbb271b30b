"""The app served in Debian's headless Chromium (Playwright never downloads a browser here)."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

from tools.screenshot_app import app_page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# What the browser shows, read back: per cell (data-i order) its class, text and colours.
READ_CELLS = """() => Array.from(document.querySelectorAll('.dv-canvas span[data-i]'))
  .sort((a, b) => a.dataset.i - b.dataset.i)
  .map(s => [s.className, s.textContent, getComputedStyle(s).color, getComputedStyle(s).backgroundColor])"""
VIEW = "window.dvLiveView.views.find((v) => v.root.isConnected)"  # the live view on screen, in page scripts
FAKE_CLOCK = """() => { const real = performance.now.bind(performance); window.dvFakeNow = real();
    performance.now = () => window.dvFakeNow; }"""  # the view's pacing and playing read this clock: the test moves it
REAL_CLOCK = "() => { delete performance.now; }"


def advance(page, ms: float) -> None:
    """Move the view's clock on by `ms` and let it draw: no real time passes, so no test waits on speed."""
    page.evaluate(f"() => {{ window.dvFakeNow += {ms}; {VIEW}.schedule(); }}")


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


# Gradio's status box on the live view's block is hidden once no Generate of this page is still being served
LIVE_IDLE = "(() => { const w = document.querySelector('.dv-live')?.closest('.block')?.querySelector('.wrap'); return !w || w.classList.contains('hide'); })()"


def press_generate(page) -> int:
    """Press Generate once the last run's event is over (a click while it is still served, as under load after its
    end line, is dropped: Gradio's trigger_mode "once"); returns how many runs the view had before."""
    page.wait_for_function(f"() => {LIVE_IDLE}", timeout=60_000)
    runs = page.evaluate("() => { const s = window.dvLiveView && window.dvLiveView.stats(); return (s && s.runs) || 0; }")
    page.get_by_role("button", name="Generate").click()
    return runs


def wait_for_run_end(page, runs: int, timeout_ms: int = 120_000) -> None:
    """Wait until the view's run number `runs` has ended and its event is over; on a timeout, say what it shows."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(f"() => {{ const s = window.dvLiveView.stats(); return s && s.runs === {runs} && s.ended && {LIVE_IDLE}; }}",
                               timeout=timeout_ms)
    except PlaywrightTimeout:
        stats = page.evaluate("() => JSON.stringify(window.dvLiveView.stats())")
        raise AssertionError(f"run {runs} did not end in {timeout_ms} ms; live view: {stats}") from None


def generate_and_wait(page, timeout_ms: int = 120_000) -> None:
    """Press Generate and wait until *that* run has ended (waiting for `ended` alone is met at once by the run before)."""
    wait_for_run_end(page, press_generate(page) + 1, timeout_ms)


def load_trace_file(page, path, frames: int) -> None:
    """Load a saved trace through the app's file input; wait until its `frames` frames are shown and its run ended.

    Opens "Save, load and export" first when it is folded, so a test never depends on what an earlier one opened;
    a file loaded before and still shown in the box is cleared first (the box takes a new one only then)."""
    box = page.locator("#dv-trace-upload")
    if not box.is_visible():
        page.get_by_text("Save, load and export").click()
    clear = box.get_by_label("Clear")
    if clear.count():
        clear.click()
    box.locator("input[type=file]").set_input_files(str(path))
    page.wait_for_function(f"() => window.dvLiveView.stats().shownFrames === {frames} && window.dvLiveView.stats().ended",
                           timeout=30_000)


def rgb(color: str) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def expected_cells(trace, index: int, palette: str = "standard", layout=None) -> list:
    """What `layout.paint` (the Python renderers' source) says every cell shows at a frame."""
    from visualizer.layout import grid_layout, paint
    from visualizer.palette import get_palette
    from visualizer.states import frame_state

    frame = frame_state(trace, index)
    layout = layout or grid_layout(trace.max_blocks, trace.canvas_length)
    return [
        [f"dv-cell dv-{c.state.name.lower()}", c.text, rgb(c.fg), rgb(c.bg)]
        for c in paint(frame, layout, trace, get_palette(palette))
    ]


def show(page, index: int) -> None:
    """Move the replay slider as a user would, and wait until that frame is on screen (the slider counts from 1, as its label)."""
    page.locator("input.dv-replay").fill(str(index + 1))
    page.wait_for_function(f"() => window.dvLiveView.stats().shownIndex === {index}", timeout=10_000)
