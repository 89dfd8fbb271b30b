"""The load benchmark, small (4 clients x 2 runs on the built-in model): no cross-talk between
sessions, the queue really queues, and every session's folder is gone once its client leaves."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from webapp import app as app_module
from webapp import hosting
from backends import BUILTIN_MODEL_DIR
from benchmarks.bench_load import BUILTIN_LABEL, run_load
from tests.app_api import served_app

pytestmark = [pytest.mark.app, pytest.mark.model]


@pytest.fixture()
def served(tmp_path):
    if not (BUILTIN_MODEL_DIR / "config.json").exists():
        pytest.skip("the built-in model is not in this checkout")
    tempfile.tempdir = str(tmp_path)  # the sessions' folders land here, where the test can count them
    os.environ["GRADIO_HEARTBEAT_INTERVAL"] = "0.5"
    with served_app(app_module.build_app(hosting_mode=hosting.Hosting(True, hosting.Limits.hosted(), tuple(hosting.hosted_choices())))) as url:
        yield url, tmp_path
    tempfile.tempdir = None
    del os.environ["GRADIO_HEARTBEAT_INTERVAL"]


def test_four_clients_two_runs_each_match_their_solo_runs(served):
    url, tmp = served
    result = run_load(url, clients=4, runs=2, model=BUILTIN_LABEL, steps=4, distinct=4, idle_s=0, tmp=tmp)
    assert result.failures == [] and result.runs == 8
    assert result.mismatches == 0
    assert result.queue_ranks  # with one model slot, some clients waited in line
    assert len(result.refusals_s) == 4  # paths and unknown ids sent during the load were all refused
    for _ in range(300):  # each client closed its session: the server releases its folder
        if not list(Path(tmp).glob("dv-session-*")):
            break
        time.sleep(0.1)
    assert not list(Path(tmp).glob("dv-session-*"))


def test_an_api_client_that_only_loads_a_trace_is_released_when_it_leaves(served):
    """No page load and no generate: the load itself registers the session, so the trace it holds is
    dropped when the client closes, not an hour later (Gradio's time-to-live)."""
    from gradio_client import Client, handle_file

    from visualizer.replay import example_traces

    url, _ = served
    before = len(app_module.SESSIONS)
    client = Client(url, verbose=False)
    _, text, message = client.predict(handle_file(str(next(iter(example_traces())))), api_name="/load_trace")
    assert message == "" and text
    assert client.session_hash in app_module.SESSIONS and len(app_module.SESSIONS) == before + 1
    client.close()
    for _ in range(300):
        if client.session_hash not in app_module.SESSIONS:
            break
        time.sleep(0.1)
    assert client.session_hash not in app_module.SESSIONS
