"""Two apps on one machine: closing one must not take the other's example traces with it.

Gradio caches the files it serves by content under one folder for the machine, and a hosted app
deletes what it cached when it closes (`delete_cache`). The first app here is a real process
(`python app.py`); the second, hosted, is built and closed in the test's process, as
tests/test_hosting.py does; both are given the same GRADIO_TEMP_DIR, as two instances on one disk are.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client

from webapp import app as app_module
from webapp import hosting
from tests.app_api import served_app
from tests.torchrun import free_port
from visualizer.replay import example_traces

pytestmark = [pytest.mark.app, pytest.mark.processes]


ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 300  # against a hang only: the loop returns as soon as the app answers


def _ctrl_c_closes() -> None:
    """A process started in the background inherits an ignored SIGINT: give Ctrl-C back to the app."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_app(port: int, temp: Path) -> tuple[subprocess.Popen, str]:
    """`python app.py` on `port` (not hosted), returned once its server answers."""
    environ = {k: v for k, v in os.environ.items() if k not in ("SPACE_ID", hosting.HOSTED_ENV)}
    environ.update(GRADIO_TEMP_DIR=str(temp), GRADIO_ANALYTICS_ENABLED="False")
    process = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port)], cwd=ROOT, env=environ,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_closes,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"app on {port} exited: {process.stderr.read()[-2000:]}")
        try:
            if httpx.get(url + "config", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise AssertionError(f"app on {port} did not answer")


def close_app(process: subprocess.Popen) -> None:
    """Ctrl-C, as a person closes it."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=120)  # against a hang only
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def load_example(url: str, index: int) -> str:
    """Click an example as a visitor's browser does: the server hands the upload box its cached copy
    of the file, and the box's change event sends that server path back to be read (raw HTTP: the
    Python client would upload the file again from its own disk). Returns the app's message, ""
    when the trace loaded."""
    cached = Client(url, verbose=False, download_files=False).predict(index, api_name="/load_example")["value"]
    event = httpx.post(f"{url}gradio_api/call/load_trace", json={"data": [cached]}, timeout=30).json()["event_id"]
    stream = httpx.get(f"{url}gradio_api/call/load_trace/{event}", timeout=120).text
    if "event: complete" not in stream:
        return stream[-300:]  # Gradio refused the input before the app saw it
    outputs = json.loads(stream.split("event: complete", 1)[1].split("data:", 1)[1].strip().splitlines()[0])
    live, text, message = outputs[:3]  # then the session state
    assert message or text
    return message


@pytest.mark.skipif(not example_traces(), reason="no example traces in this checkout")
def test_closing_a_hosted_app_leaves_the_other_apps_examples_readable(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.5")
    first, url = start_app(free_port(), tmp_path)  # from the OS: a fixed number met a leftover or a second run
    try:
        assert load_example(url, 0) == ""
        mode = hosting.Hosting(True, hosting.Limits.hosted(), tuple(hosting.hosted_choices()))
        with served_app(app_module.build_app(hosting_mode=mode)) as second:  # Gradio takes a free port
            assert load_example(second, 0) == ""  # it serves the same example file
        assert load_example(url, 0) == ""
    finally:
        close_app(first)
