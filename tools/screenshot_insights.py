"""Screenshots of the app's "why" views, in a real headless browser (for docs/why-views.md).

    python -m tools.screenshot_insights --out assets/insights [--model FOLDER] [--demo acrostic] [--step 3] [--inspect-step 1] [--position 9]

Launches the app, runs a demo prompt on the model (the built-in one by default) with candidates
recorded, moves the replay slider to a step, clicks a token and photographs: the token inspector
(alternatives.png), the step's accept-budget chart (accept_budget.png), the structure-first figure
of the finished run (structure_first.png); then runs a prompt with the thinking channel on and
photographs the committed canvas, thoughts tinted apart from the answer, with the readout that
measures the answer only (thinking.png, thinking_readout.png).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.screenshot_app import app_page

THINKING_PROMPT = "Write an acrostic poem about the ocean for the word WAVE."  # thought, then answer (training/tasks/thinking.py)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="assets/insights")
    parser.add_argument("--model", default=None)
    parser.add_argument("--demo", default="acrostic")
    parser.add_argument("--step", type=int, default=3, help="the step (from 1) whose accept budget to show")
    parser.add_argument("--inspect-step", type=int, default=1, help="the step (from 1) at which to inspect the token")
    parser.add_argument("--position", type=int, default=9, help="the canvas position to click")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)

    from prompts.demos import demo

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with app_page(model=args.model, chromium=args.chromium, width=1400) as page:
        page.get_by_text("parameters").first.wait_for(timeout=120_000)
        page.get_by_label("Demo prompt").click()
        page.get_by_role("option", name=demo(args.demo).title).click()
        page.get_by_role("button", name="Generate").click()
        page.wait_for_function("() => { const s = window.dvLiveView.stats(); return s && s.ended; }", timeout=300_000)
        page.locator(".dv-structure svg").wait_for(timeout=30_000)

        def show_step(step):
            page.locator("input.dv-replay").fill(str(step))  # the slider counts frames from 1
            page.wait_for_function(f"() => window.dvLiveView.stats().shownIndex === {step - 1}")
            page.wait_for_function(f"() => document.querySelector('#dv-budget').textContent.includes('step {step}:')", timeout=30_000)

        show_step(args.inspect_step)
        page.locator(f'.dv-canvas span[data-i="{args.position}"]').click()
        page.wait_for_function(
            f"() => document.querySelector('#dv-inspector').textContent.includes('step {args.inspect_step} ·')", timeout=30_000)
        page.locator("#dv-inspector").screenshot(path=out / "alternatives.png")
        show_step(args.step)
        page.locator("#dv-budget").screenshot(path=out / "accept_budget.png")
        page.locator(".dv-structure").screenshot(path=out / "structure_first.png")
        print(page.locator("#dv-inspector").text_content())
        print(page.locator("#dv-budget").text_content()[:200])

        page.get_by_role("textbox", name="Prompt").fill(THINKING_PROMPT)
        page.get_by_text("Knobs (defaults").click()
        page.get_by_label("Thinking channel").check()
        page.get_by_role("button", name="Generate").click()
        page.wait_for_function("() => { const s = window.dvLiveView.stats(); return s.ended && s.runs >= 2; }", timeout=300_000)
        page.locator(".dv-frame").screenshot(path=out / "thinking.png")
        page.locator(".dv-readout").screenshot(path=out / "thinking_readout.png")
        print(page.locator(".dv-readout").text_content()[:400])
    for name in ("alternatives", "accept_budget", "structure_first", "thinking", "thinking_readout"):
        print(f"wrote {out / name}.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
