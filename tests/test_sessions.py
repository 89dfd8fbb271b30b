"""Every tab is released as soon as it closes, whatever it did: here, one that only loads a trace."""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path

import gradio as gr
import pytest

from webapp import app as app_module
from webapp.sessions import RunSession
from tests.browser import CHROMIUM, app_in_chromium
from visualizer.replay import example_traces
from visualizer.states import frame_refs
from visualizer.trace import Trace

pytestmark = pytest.mark.app


def test_no_load_event_replaces_the_session_state(no_eos_model_dir):
    """The cause of the browser test below failing 4 runs in 10 under load (sessions.py): a State
    given a callable gets a load event of Gradio's that writes a new RunSession into it, racing
    `register` on the same page load.  With an instance, `register` is the only load event that
    reads it and none writes it."""
    demo = app_module.build_app(str(no_eos_model_dir))
    [state] = [b for b in demo.blocks.values() if isinstance(b, gr.State) and b.delete_callback == RunSession.close]
    on_load = [fn for fn in demo.fns.values() if any(event == "load" for _, event in fn.targets)]
    assert [fn.name for fn in on_load if state in fn.outputs] == []
    assert [fn.name for fn in on_load if state in fn.inputs] == ["register"]


def test_the_app_makes_no_session_folder_before_a_session_needs_one(no_eos_model_dir, tmp_path, monkeypatch):
    """The State's template RunSession (and Gradio's copies of it) live as long as the app: none
    may own a downloads folder, which no session would ever release (test_load saw two)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    app_module.build_app(str(no_eos_model_dir))
    assert not list(tmp_path.glob("dv-session-*"))
    session = copy.deepcopy(RunSession())  # what Gradio gives each session
    folder = Path(session.files.name)  # made when first asked for
    assert folder.parent == tmp_path and folder.is_dir() and session.files is session.files
    session.close()
    session.close()  # Gradio's delete_callback may close it again, an hour after the registry did
    assert not folder.exists()


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")
def test_a_tab_that_only_loads_a_trace_is_released_when_it_closes(no_eos_model_dir, monkeypatch):
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.5")  # a closed tab is noticed in a second, not 15 s
    sessions = app_module.SESSIONS
    before = set(sessions._sessions)
    path = next(p for p in example_traces() if p.stem == "sky")
    with app_in_chromium(no_eos_model_dir) as page:
        page.get_by_text("Save, load and export").click()
        page.locator("input[type=file]").first.set_input_files(str(path))
        n = len(frame_refs(Trace.load(path)))
        page.wait_for_function(f"() => window.dvLiveView.stats().shownFrames === {n}", timeout=30_000)
        [(session_hash, session)] = [(h, s) for h, s in sessions._sessions.items() if h not in before]  # registered on load
        folder = Path(session.files.name)
        # The frames come from load_trace_file's answer, sent after it set the trace: the registered
        # session holds it by now, unless it is not the one the handlers got (sessions.py).
        assert session.trace is not None and session.trace.prompt == Trace.load(path).prompt and folder.exists()
        page.close()  # the tab goes: Gradio runs demo.unload once the heartbeat stops
        for _ in range(300):
            if session_hash not in sessions:
                break
            time.sleep(0.05)
    assert session_hash not in sessions
    assert session.trace is None and not folder.exists()  # its trace and its downloads folder are gone


def test_the_file_box_sending_the_trace_on_screen_again_replays_nothing():
    """Gradio's file box sends its change again when Clear is pressed, with the file it held (or, racing an
    upload right after, the new file twice): the trace on screen must not replay from frame 1 under a user
    already stepping through it (a CI failure of test_browser_replay). A new file, or the same file once a run
    replaced it on screen, loads as before."""
    request = gr.Request()
    session = RunSession()
    first, second = (str(path) for path in sorted(example_traces())[:2])
    loaded = app_module.load_trace_file(first, session, request)
    assert loaded["live"] and app_module.after_load(session)["run_card"]
    token = session.run_id
    for again in (first, None):  # Clear's change: the held file, then no file
        assert app_module.load_trace_file(again, session, request) == {"session": session}
        assert isinstance(app_module.after_load(session)["run_card"], type(gr.skip()))
        assert session.run_id == token and str(session.shown_file) == first
    assert app_module.load_trace_file(second, session, request)["live"] and session.run_id != token
    session.show(Trace.load(second))  # a run made here (what `generate` shows) is from no file
    assert app_module.load_trace_file(second, session, request)["live"]


def test_a_run_is_no_longer_running_when_the_value_carrying_its_end_is_sent():
    """The browser, shown a run's end line, at once asks for the step on screen (Fork at, the accept budget); those
    answers are refused while the session is running.  So the session stops running before the value with the end
    goes out, not after the generator's last value (under load that came after the ask: Fork at kept its step)."""
    from webapp.app_run import live_values

    whole = Trace.load(next(p for p in example_traces() if p.stem == "sky"))
    records = [r for block in whole.blocks for r in (*(s for s in whole.steps if s.block == block.block), block)]
    records.append(whole.end)
    trace = Trace(model=whole.model, prompt=whole.prompt, pieces=dict(whole.pieces))
    trace.append(whole.start)

    def batches():
        for record in records:
            trace.append(record)
            yield [record]

    session = RunSession()
    values = live_values(session, trace, batches(), min_interval_s=0)
    running = []
    for value in values:
        running.append((value[1] is not None and value[1] != "", session.running))
    ended = [is_running for has_end, is_running in running if has_end]
    assert ended and not any(ended)  # every value carrying the end line is sent with the session not running
    assert all(is_running for has_end, is_running in running[:-1] if not has_end)  # before it, running
