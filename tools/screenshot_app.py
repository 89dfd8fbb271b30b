"""Screenshot of the app mid-run, in a real headless browser (for the README).

    python tools/screenshot_app.py --out assets/screenshot.png [--model FOLDER] [--demo acrostic] [--at-step 6]

Launches the app, opens it in headless Chromium through Playwright (Debian's /usr/bin/chromium,
no browser download), picks a demo prompt, presses Generate and takes the picture as soon as the
status line reports the wanted step, while the model is still denoising.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="assets/screenshot.png")
    parser.add_argument("--model", default=None)
    parser.add_argument("--demo", default="acrostic")
    parser.add_argument("--at-step", type=int, default=6)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)

    import app as app_module
    from playwright.sync_api import sync_playwright
    from prompts.demos import demo

    ui = app_module.build_app(args.model)
    ui.queue(default_concurrency_limit=1).launch(prevent_thread_lock=True, quiet=True, css=app_module.CSS)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1450}, device_scale_factor=1)
            page.goto(ui.local_url)
            page.get_by_label("Demo prompt").click()
            page.get_by_role("option", name=demo(args.demo).title).click()
            page.get_by_role("button", name="Generate").click()
            # the browser-drawn live view reports what it has on screen (visualizer/static/live_view.js)
            page.wait_for_function(
                "n => { const s = window.dvLiveView && window.dvLiveView.stats(); return s && s.shownIndex >= n; }",
                arg=args.at_step - 1, timeout=120_000, polling=20,
            )
            page.screenshot(path=args.out, full_page=False)
            status = page.locator(".dv-status").text_content()
            print(f"wrote {args.out} at: {status}")
            page.get_by_role("button", name="Stop").click()  # end the run before the app closes
            page.get_by_text(re.compile("Stopped after|committed")).first.wait_for(timeout=60_000)
            browser.close()
    finally:
        ui.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
