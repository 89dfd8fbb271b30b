"""Screenshots of the app's layer capture and pins, in a real headless browser (for docs/layers-and-pins.md).

    python -m tools.screenshot_layers --out docs/images [--model FOLDER] [--layers 0,3,5] [--position 11] [--text moon]

Launches the app on the built-in model (by default), records the acrostic demo with `--layers`, clicks a token
of the first block, pins a text there with *Pin text here*, runs again and photographs: the live view with the
pinned position marked (pin-view.png), the per-layer RMS panel while the first run's block denoises
(layers-live.png) and once committed (layers-view.png), the token inspector with a
position's lens rank grid (lens-view.png) and the heatmap's KL layer (kl-view.png).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.screenshot_app import app_page, dismiss_notices

LIVE_PANEL = ("() => { const s = window.dvLiveView.stats(); const svg = document.querySelector('#dv-layer_rms svg'); "
              "return s && s.layersAskedLive >= 2 && !s.ended && svg && svg.textContent.includes('Block 1'); }")
ENDED = "n => { const s = window.dvLiveView.stats(); return s && s.ended && s.runs === n; }"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/images")
    parser.add_argument("--model", default=None)
    parser.add_argument("--demo", default="acrostic")
    parser.add_argument("--layers", default="0,3,5", help="the layers box (the built-in model has 6: 0 to 5)")
    parser.add_argument("--position", type=int, default=11, help="the first block's position to pin")
    parser.add_argument("--text", default="moon", help="the text to pin there")
    parser.add_argument("--lens-position", type=int, default=13, help="the position whose lens ranks to show")
    parser.add_argument("--full-page", default=None, help="also photograph the whole page here (to check the layout)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)

    from prompts.demos import demo

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with app_page(model=args.model, chromium=args.chromium, width=1400, height=1300) as page:
        page.get_by_text("parameters").first.wait_for(timeout=120_000)
        page.get_by_label("Demo prompt").click()
        page.get_by_role("option", name=demo(args.demo).title).click()
        page.get_by_text("Layers and pins").click()
        page.locator("#dv-knob-layers textarea").fill(args.layers)
        page.get_by_role("button", name="Generate").click()
        # the layer panel while the first block denoises (asked once a second): its rows fill downwards
        try:
            page.wait_for_function(LIVE_PANEL, timeout=120_000)
            page.locator("#dv-layer_rms").screenshot(path=out / "layers-live.png")
        except Exception:  # a machine fast enough to finish the block within a second: nothing live to photograph
            print("the first block committed before its layer panel was asked for live: no layers-live.png")
        page.wait_for_function(ENDED, arg=1, timeout=300_000)

        # click a token of the first block: its position goes to "Pin text here"
        page.locator(f'.dv-canvas span[data-i="{args.position}"]').click()
        page.wait_for_function(f"() => document.querySelector('#dv-pin-row input[type=number]').value === '{args.position}'")
        page.locator("#dv-pin-text textarea").fill(args.text)
        page.get_by_role("button", name="Pin text here").click()
        page.wait_for_function(f"() => document.querySelector('#dv-knob-pins textarea').value.includes('{args.position}={args.text}')")
        page.get_by_role("button", name="Generate").click()
        page.wait_for_function(ENDED, arg=2, timeout=300_000)
        page.locator("#dv-layer_rms svg").wait_for(timeout=30_000)
        if page.locator(".toast-body").count():
            dismiss_notices(page)

        page.locator("#dv-live .dv-frame").screenshot(path=out / "pin-view.png")
        page.locator("#dv-layer_rms").screenshot(path=out / "layers-view.png")
        page.locator(f'.dv-canvas span[data-i="{args.lens_position}"]').click()
        page.wait_for_function(f"() => document.querySelector('#dv-inspector').textContent.includes('position {args.lens_position}: rank')",
                               timeout=30_000)
        page.locator("#dv-inspector").screenshot(path=out / "lens-view.png")
        page.locator("select.dv-heat-layer").select_option("kl")
        page.locator(".dv-commit-panel").screenshot(path=out / "kl-view.png")
        if args.full_page:
            page.screenshot(path=args.full_page, full_page=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
