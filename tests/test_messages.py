"""Messages in words (issue 58): what a visitor reads when a file is not a trace, a knob's value is wrong or a run
was stopped never carries a parser's or a tuple's text ("Expecting value: line 1 column 1 (char 0)", "got (-1,)")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.trace_factory import trace_from_masks
from visualizer.live_stream import LiveEncoder, stopped_line
from visualizer.replay import load_upload
from visualizer.settings import GenerationSettings
from visualizer.states import frame_refs
from visualizer.trace import TraceError
from visualizer.trace_format import parse_trace_json
from webapp.views import render_view


@pytest.mark.parametrize(("text", "message"), [
    (b"hello, this is not a trace", "not a trace: the file is not JSON"),
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "not a trace: the file is not JSON"),
    (b'{"format": "\xff\xfe"}', "not a trace: the file is not JSON"),  # not UTF-8 text
    (b'{"format": "diffusion-trace",\n "version": ', "not a trace: the file stops being JSON at line 2, column 13"),
    (b"[" * 100_000, "not a trace: the file's JSON is nested too deeply"),
])
def test_a_file_that_is_not_json_is_said_in_words(text, message):
    with pytest.raises(TraceError) as refused:
        parse_trace_json(text)
    assert str(refused.value) == message
    assert "Expecting" not in str(refused.value) and "char" not in str(refused.value)


def test_an_uploaded_file_that_is_not_json_names_the_file(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text("Dear diary,")
    with pytest.raises(TraceError, match=r"^notes\.json: not a trace: the file is not JSON$"):
        load_upload(str(path))


@pytest.mark.parametrize(("layers", "message"), [
    ((-1,), "layer -1 does not exist: layers are counted from 0"),
    ((0, 5000), "layer 5000 does not exist: no model here has 1024 layers"),
    ((3, 1, 3), "layer 3 is asked for twice: give each layer once"),
    (("a", 2), "layers must be layer numbers separated by commas, such as 0,9,19,29, or 'all'"),
])
def test_a_wrong_layer_list_says_which_layer_and_why(layers, message):
    assert GenerationSettings(layers=layers).problems() == [message]


@pytest.mark.parametrize(("pins", "message"), [
    (tuple((i, "x") for i in range(5000)), "a run takes at most 4096 pins (5000 were given)"),
    ((("one", "x"),), "each pin must be a canvas position (a whole number) and the text to place there"),
])
def test_a_wrong_pin_list_is_said_in_words(pins, message):
    assert GenerationSettings(pins=pins).problems() == [message]


def test_a_stopped_run_says_where_it_stopped():
    canvas = 8
    masks = [np.zeros(canvas, bool)] * 3  # three steps of a 48-step budget, then Stop: the block never committed
    trace = trace_from_masks([masks], unfinished=1)
    assert stopped_line(trace) == "Stopped at step 3 of 48 in block 1"
    encoder = LiveEncoder(trace, run=1)
    encoder.start_line(), encoder.frame_lines()
    end = json.loads(encoder.end_line())
    assert end["finish"] == "cancelled" and end["stopped"] == "Stopped at step 3 of 48 in block 1"


def test_the_server_drawn_status_of_a_stopped_runs_last_frame_says_stopped():
    """`/show_frame` (webapp.views.render_view) says what the browser's status line says: where it stopped, not its budget."""
    trace = trace_from_masks([[np.ones(8, bool)], [np.zeros(8, bool)] * 3], unfinished=1)  # block 1 done, 3 steps of block 2
    frames = len(frame_refs(trace))
    _, status, _ = render_view(trace, frames - 1, "standard", "grid")
    assert status == f"Frame {frames}/{frames} · Stopped at step 3 of 48 in block 2", status
    _, earlier, _ = render_view(trace, frames - 2, "standard", "grid")
    assert "budget" in earlier and "Stopped" not in earlier  # the frames before it keep their own line


def test_a_finished_run_has_no_stop_line():
    trace = trace_from_masks([[np.ones(8, bool)]])
    encoder = LiveEncoder(trace, run=1)
    encoder.start_line(), encoder.frame_lines()
    assert "stopped" not in json.loads(encoder.end_line())
    _, status, _ = render_view(trace, len(frame_refs(trace)) - 1, "standard", "grid")
    assert "Stopped" not in status


def test_a_commit_frame_says_after_how_many_steps_so_frames_and_steps_read_as_two_counts():
    """Each block's commit is a frame of its own: the last frame of a 24-step run is frame 25, and its status says
    the block committed after 24 steps, in the server-drawn status and in the live view's caption alike."""
    masks = [np.zeros(8, bool)] * 23 + [np.ones(8, bool)]
    trace = trace_from_masks([masks, [np.ones(8, bool)]])  # block 1: 24 steps; block 2: 1 step
    refs = frame_refs(trace)
    assert len(refs) == 27
    _, first_commit, _ = render_view(trace, 24, "standard", "grid")
    assert first_commit.startswith("Frame 25/27 · Block 1/2 · committed after 24 steps (8 positions)"), first_commit
    _, last, _ = render_view(trace, 26, "standard", "grid")
    assert last.startswith("Frame 27/27 · Block 2/2 · committed after 1 step (8 positions)"), last
    _, step, _ = render_view(trace, 25, "standard", "grid")
    assert step.startswith("Frame 26/27 · Block 2/2 · step 1 · "), step  # steps count within their block
    encoder = LiveEncoder(trace, run=1)
    encoder.start_line()
    captions = [json.loads(line)["caption"] for line in encoder.frame_lines().splitlines() if '"caption"' in line]
    assert captions[24] == "Block 1/2 · committed after 24 steps (8 positions)"


@pytest.mark.app
def test_an_api_client_gets_the_models_refusal_when_the_model_had_to_load_first(no_eos_model_dir, random_model_dir, tmp_path):
    """The validator never loads a model, so what only the model judges (a layer past its depth) is found in the
    queued handler when the model was not in memory: the `/generate` call still fails with the page's one line (not
    a quiet, empty stream), and `/run_message`, which the page shows beside the run, says the same."""
    import shutil

    from gradio_client import Client
    from gradio_client.exceptions import AppError

    from tests.app_api import run_message, served_app, submit_generate
    from webapp import app as app_module

    unloaded = tmp_path / "not-loaded-yet"  # a folder no test has loaded: the validator cannot judge its layers
    shutil.copytree(random_model_dir, unloaded)
    with served_app(app_module.build_app(str(no_eos_model_dir))) as url:
        client = Client(url, verbose=False)
        with pytest.raises(AppError) as refused:
            submit_generate(client, "hi", str(unloaded), layers="0,99").result(timeout=300)
        line = str(refused.value)
        assert "layer 99 does not exist" in line and "\n" not in line and "Traceback" not in line, line
        assert run_message(client)[1] == line  # the page's message box
