"""Screenshot of the hosted model picker, opened, in a real headless browser (for docs/hosting.md).

    python -m tools.screenshot_hosted --out assets/hosted_picker.png

Launches the app in hosted mode (as on a Space) and opens the Model dropdown: the allowlist is all
a visitor can pick, and the note under the title states the caps.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.screenshot_app import app_page


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="assets/hosted_picker.png")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)

    import hosting

    with app_page(hosting_mode=hosting.Hosting.from_environment(flag=True), chromium=args.chromium, width=1280, height=560) as page:
        page.get_by_text("vocab").first.wait_for(timeout=120_000)  # the preselected model is loaded
        page.get_by_label("Model").click()
        page.get_by_role("option").first.wait_for(timeout=10_000)
        page.screenshot(path=args.out, full_page=False)
        options = page.get_by_role("option").all_text_contents()
        print(f"wrote {args.out}; the picker offers: {options}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
