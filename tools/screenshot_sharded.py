"""Screenshot of the app serving a sharded model, in a real headless browser (for docs/sharded.md).

    python -m tools.screenshot_sharded --out docs/images/sharded-app.png [--parallel expert] [--demo acrostic]

Starts `torchrun --nproc-per-node 2 app.py --parallel KIND` on this machine (CPU, gloo, the built-in
model), opens it in headless Chromium, runs a demo prompt to its end and takes the picture: the
picker's one entry and the model line say how the model is spread. Then it ends torchrun as Ctrl-C
in its terminal would, and says whether every rank left cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
from tools.screenshot_app import CHROMIUM_FLAGS, dismiss_notices


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/images/sharded-app.png")
    parser.add_argument("--parallel", default="expert", choices=("expert", "tensor", "tensor+expert"))
    parser.add_argument("--demo", default="acrostic")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    from prompts.demos import demo

    port = free_port()
    torchrun = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(free_port()),
         "app.py", "--parallel", args.parallel, "--port", str(port)],
        cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 300
        while True:
            if torchrun.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the app did not start under torchrun")
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1500, "height": 900}, device_scale_factor=1)
                page.goto(url)
                page.get_by_text("parallel over").last.wait_for(timeout=120_000)  # the model line
                page.get_by_label("Demo prompt").click()
                page.get_by_role("option", name=demo(args.demo).title).click()
                page.get_by_role("button", name="Generate").click()
                committed = page.get_by_label("Committed text")
                until = time.monotonic() + 300
                while not committed.input_value() and time.monotonic() < until:  # the run's end fills it
                    time.sleep(0.2)
                dismiss_notices(page)
                page.evaluate("window.scrollTo(0, 0)")  # the picker and the model line, above the canvas
                page.wait_for_timeout(300)
                page.screenshot(path=args.out, full_page=False)
                print(f"wrote {args.out}; the model line: {page.get_by_text('parallel over').last.text_content()}")
            finally:
                browser.close()
    finally:
        if torchrun.poll() is None:
            # Ctrl-C: torchrun passes it on to the ranks (each runs in a session of its own), and on SIGTERM it
            # ends them itself (SIGKILL 30 s after); a killed torchrun would leave them behind
            torchrun.send_signal(signal.SIGINT)
            try:
                print(f"torchrun ended with exit status {torchrun.wait(timeout=90)} after Ctrl-C")
            except subprocess.TimeoutExpired:
                torchrun.terminate()
                print(f"torchrun did not end within 90 s of Ctrl-C; after SIGTERM: {torchrun.wait(timeout=60)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
