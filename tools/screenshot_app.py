"""Screenshot of the app mid-run, in a real headless browser (for the README).

    python -m tools.screenshot_app --out assets/screenshot.png [--model FOLDER] [--demo acrostic] [--at-step 15]
    python -m tools.screenshot_app --size 1280x800 --out docs/images/app-1280x800.png
    python -m tools.screenshot_app --size 390x844 --out docs/images/app-phone.png      # a phone: the canvas first

Launches the app, opens it in headless Chromium through Playwright (Debian's /usr/bin/chromium,
no browser download), picks a demo prompt, presses Generate and takes the picture as soon as the
status line reports the wanted step, while the model is still denoising.
"""

from __future__ import annotations

import argparse
import re
import sys
from contextlib import contextmanager

CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


@contextmanager
def app_page(*, model=None, hosting_mode=None, chromium="/usr/bin/chromium", width=1500, height=1000):
    """The app launched in this process and opened in headless Chromium (Playwright never downloads a
    browser here): yields the page; the browser and the app are closed afterwards."""
    from webapp import app as app_module
    from webapp.page import page_style
    from webapp.serve import queue_app
    from playwright.sync_api import sync_playwright

    ui = app_module.build_app(model, hosting_mode)
    queue_app(ui).launch(prevent_thread_lock=True, quiet=True, **page_style())
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
                page.goto(ui.local_url)
                yield page
            finally:
                browser.close()
    finally:
        ui.close()


def dismiss_notices(page) -> None:
    """Close Gradio's notices (the first run's "Loading ..." one stays 10 s and covers the header), as a
    visitor would, so a screenshot shows the app rather than the notice."""
    for close in page.locator(".toast-close").all():
        close.click()
    page.locator(".toast-body").first.wait_for(state="detached", timeout=5_000)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="assets/screenshot.png")
    parser.add_argument("--model", default=None)
    parser.add_argument("--demo", default="acrostic")
    parser.add_argument("--at-step", type=int, default=15)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--size", default="1400x1000", help="the viewport, WIDTHxHEIGHT in CSS pixels")
    args = parser.parse_args(argv)
    width, height = (int(n) for n in args.size.lower().split("x"))

    from prompts.demos import demo

    with app_page(model=args.model, chromium=args.chromium, width=width, height=height) as page:  # the whole run in one view (issue 58)
        page.get_by_label("Demo prompt").click()
        page.get_by_role("option", name=demo(args.demo).title).click()
        page.get_by_role("button", name="Generate").click()
        # the browser-drawn live view reports what it has on screen (visualizer/static/live_view.js)
        page.wait_for_function(
            "n => { const s = window.dvLiveView && window.dvLiveView.stats(); return s && s.shownIndex >= n; }",
            arg=args.at_step - 1, timeout=120_000, polling=20,
        )
        dismiss_notices(page)
        page.screenshot(path=args.out, full_page=False)
        status = page.locator(".dv-status").text_content()
        print(f"wrote {args.out} at: {status}")
        page.get_by_role("button", name="Stop").click()  # end the run before the app closes
        page.get_by_text(re.compile("Stopped after|committed")).first.wait_for(timeout=60_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
