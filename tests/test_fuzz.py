"""Hostile input, fuzzed with hypothesis: every API endpoint of a launched app, and trace uploads
mutated from a valid trace.  Each input gets a clear message (or works), nothing crashes, every call
ends, nothing is written outside the session's folder, and download names are safe.

Bounded: a fixed number of examples per property, no deadline per example (each call waits for its
answer, with a generous timeout only against a hang: speed is not what these tests measure),
derandomized so CI sees the same inputs every time.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import httpx
import gradio as gr
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError, ValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webapp import app as app_module, views
from webapp import hosting
from tests.app_api import served_app
from backends import ModelChoice
from visualizer.replay import load_upload
from visualizer.states import frame_refs
from visualizer.trace import TraceError

pytestmark = pytest.mark.app


ROOT = Path(__file__).resolve().parent.parent
VALID_TRACE = ROOT / "assets" / "traces" / "sky.json"
HANG_TIMEOUT_S = 300  # a call that has not answered by now hangs; a slow machine is not a failure
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Text a visitor can send: control characters, NUL, right-to-left marks, HTML, paths, huge and empty.
HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from("\x00\x01\x1b\x7f\u202e\u202d\u200f\u2066\ufeff\ud7ff<>&\"'/\\.%\n\r\t"), max_size=40),
    st.sampled_from(["", " ", "\x00", "../../../etc/passwd", "<script>alert(1)</script>", "\u202eevil.json",
                     "x" * 100_000, "word " * 5000, "%s%n{0}", "CON", "/dev/zero"]),
)
# JSON has no NaN or infinity (a browser sends null): over the API they come as text, and the
# handlers get the float values themselves in test_non_finite_knobs_reach_the_handlers.
HOSTILE_NUMBER = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 1e308, -1e308, 2**63, "nan", "inf", "-inf", "1e999", "0x10", "1_000"]),
)
NON_FINITE = st.sampled_from([float("nan"), float("inf"), float("-inf")])
WRONG_TYPE = st.one_of(st.none(), st.booleans(), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
ANY_VALUE = st.one_of(HOSTILE_TEXT, HOSTILE_NUMBER, WRONG_TYPE)
GENERIC_ERROR = "has not enabled verbose error reporting"  # gradio_client's text for an exception


def fuzz_mode(model_dir, label="Test model"):
    return hosting.Hosting(True, hosting.Limits(knob_caps={"max_new_tokens": 256, "max_denoising_steps": 4}, max_upload_mb=2, max_export_frames=40),
                           (ModelChoice(label, str(model_dir), "transformers", True),))


@pytest.fixture(scope="module")
def served(no_eos_model_dir, tmp_path_factory):
    # A private temporary folder for this app (the machine's /tmp is shared), Gradio's cache apart.
    tempfile.tempdir = str(tmp_path_factory.mktemp("app-tmp"))
    os.environ["GRADIO_TEMP_DIR"] = str(tmp_path_factory.mktemp("gradio-cache"))
    label = "Test model"
    mode = fuzz_mode(no_eos_model_dir, label)
    with served_app(app_module.build_app(hosting_mode=mode), max_file_size=mode.limits.max_file_size) as url:
        client = Client(url, verbose=False)
        client.submit("Name a colour.", label, max_new_tokens=256, max_denoising_steps=4, api_name="/generate").result(timeout=120)  # a recorded run, so replay and export have work to do
        yield client, label
    tempfile.tempdir = None
    del os.environ["GRADIO_TEMP_DIR"]


@FUZZ
@given(knob=NON_FINITE, which=st.integers(0, 5))
def test_non_finite_knobs_reach_the_handlers(served, no_eos_model_dir, knob, which):
    """NaN and infinity, handed to the handlers as Python floats (what no JSON client can send)."""
    _, label = served
    names = ["max_new_tokens", "max_denoising_steps", "entropy_bound", "t_min", "t_max", "seed"]
    knobs = dict(zip(names, [256, 4, 0.1, 0.4, 0.8, 0]), sampler="entropy-bound", temperature=1.0)
    knobs[names[which]] = knob
    handlers = app_module.Handlers(fuzz_mode(no_eos_model_dir, label))
    session = app_module.RunSession()
    # a refusal the validator could not see (it judges JSON, never NaN): the call fails with the page's one line
    # (gr.Error, issue 58), and the session keeps the same line for the page's message box
    with pytest.raises(gr.Error) as refused:
        list(handlers.generate("hi", label, session, **knobs))
    assert refused.value.message == session.error
    message = app_module.finish_run(session)[1]
    assert isinstance(message, str) and message and "\n" not in message
    session.trace = load_upload(VALID_TRACE)
    files, _, message = handlers.export_run(session, ["gif"], "", knob, knob, knob, True, "standard", "grid",
                                              progress=lambda *a, **k: None)
    assert files is None and message
    session.close()


def outcome(job) -> str:
    """The message a call ends with: the app's message field, or the refusal Gradio or the app's
    validator sent back.  A handler that raised (a crash) fails the test."""
    try:
        result = job.result(timeout=HANG_TIMEOUT_S)
    except ValidationError as exc:
        return str(exc)
    except httpx.HTTPStatusError as exc:
        return exc.response.json()["detail"]
    except AppError as exc:
        return str(exc)
    return result


def assert_no_app_crash(capfd) -> None:
    """No traceback the server printed passes through the project's code: the only ones allowed
    are Gradio refusing a value in its own component (gr.Error with its message, or a wrongly typed
    value answered with Gradio's generic error) before any handler of the app ran."""
    printed = capfd.readouterr().err
    # the project's own files, not a virtual environment that happens to live inside the checkout (as CI's does)
    assert not re.search(rf'File "{re.escape(str(ROOT))}/(?!\.?venv/)', printed), printed[-3000:]


def assert_clear(message) -> None:
    text = message if isinstance(message, str) else json.dumps(message, default=str)
    assert "Traceback" not in text and 'File "' not in text


def files_outside_sessions(before: set[str]) -> set[str]:
    """New entries in the app's temporary folder that are neither a session's folder nor Gradio's
    cache (a folder named by the content hash of each file Gradio serves or receives)."""
    now = set(os.listdir(tempfile.gettempdir()))
    return {name for name in now - before
            if not name.startswith(("dv-session-", "gradio")) and not re.fullmatch(r"[0-9a-f]{40,64}", name)}


@FUZZ
@given(prompt=HOSTILE_TEXT, model=ANY_VALUE, tokens=st.one_of(HOSTILE_NUMBER, WRONG_TYPE, st.integers(1, 256)),
       steps=st.one_of(HOSTILE_NUMBER, WRONG_TYPE, st.integers(1, 4)), knob=st.one_of(HOSTILE_NUMBER, WRONG_TYPE),
       seed=st.one_of(HOSTILE_NUMBER, WRONG_TYPE), choice=ANY_VALUE)
def test_generate(served, capfd, prompt, model, tokens, steps, knob, seed, choice):
    client, label = served
    model = label if isinstance(model, int) else model  # some examples reach the model with hostile knobs
    before = set(os.listdir(tempfile.gettempdir()))
    result = outcome(client.submit(prompt, model, max_new_tokens=tokens, max_denoising_steps=steps, entropy_bound=knob,
                                   t_min=0.4, t_max=knob, seed=seed, sampler=choice, temperature=knob, refine_threshold=knob,
                                   corrector_k=knob, editing_threshold=knob, api_name="/generate"))
    assert_clear(result)
    if not isinstance(result, str):  # the run was accepted: its outcome is one line
        _, message = outcome(client.submit(api_name="/run_message"))
        assert isinstance(message, str) and "\n" not in message.strip()
    assert not files_outside_sessions(before)
    assert_no_app_crash(capfd)


@FUZZ
@given(index=ANY_VALUE, palette=ANY_VALUE, layout=ANY_VALUE, model=ANY_VALUE)
def test_replay_compare_and_model_endpoints(served, capfd, index, palette, layout, model):
    client, _ = served
    for args, api in (((index, palette, layout), "/show_frame"), ((index, palette, layout), "/compare_step"),
                      ((palette, layout), "/pin_a"), ((model,), "/load_model"), ((), "/stop")):
        assert_clear(outcome(client.submit(*args, api_name=api)))
    assert_no_app_crash(capfd)


@FUZZ
@given(formats=st.one_of(st.lists(st.sampled_from(["gif", "mp4", "webp", "exe", "../x", ""]), max_size=4), ANY_VALUE),
       blocks=ANY_VALUE, frame_ms=ANY_VALUE, hold_ms=ANY_VALUE, width=ANY_VALUE, with_prompt=ANY_VALUE)
def test_export_and_save(served, capfd, formats, blocks, frame_ms, hold_ms, width, with_prompt):
    client, _ = served
    before = set(os.listdir(tempfile.gettempdir()))
    result = outcome(client.submit(formats, blocks, frame_ms, hold_ms, width, with_prompt, "standard", "grid", api_name="/export"))
    assert_clear(result)
    if isinstance(result, (list, tuple)) and result[0]:
        assert all(re.fullmatch(r"[\w.-]+\.(gif|mp4|webp)", Path(f).name) for f in result[0])
    saved = outcome(client.submit(api_name="/save_trace"))
    assert_clear(saved)
    if isinstance(saved, (list, tuple)) and saved[0]:
        assert re.fullmatch(r"trace-[a-z0-9-]+\.json", Path(saved[0][0]).name)
    assert not files_outside_sessions(before)
    assert_no_app_crash(capfd)


def test_download_names_are_sanitized(served):
    client, label = served
    for prompt in ("../../etc/passwd", "\u202eevil\x00.exe", "<b>bold</b> /tmp/x", "CON"):
        client.submit(prompt, label, max_new_tokens=256, max_denoising_steps=2, api_name="/generate").result(timeout=HANG_TIMEOUT_S)
        saved, message = client.predict(api_name="/save_trace")
        assert message == "" and re.fullmatch(r"trace-[a-z0-9-]+\.json", Path(saved[0]).name), saved


# ---- trace uploads mutated from a valid trace ----------------------------------------------------
def json_paths(value, prefix=()):
    """Every key path of a JSON value (the first two items of each list)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:2]):
            yield from json_paths(item, (*prefix, i))


VALID = json.loads(VALID_TRACE.read_text())
PATHS = [p for p in json_paths(VALID) if p]
REPLACEMENT = st.one_of(ANY_VALUE, NON_FINITE, st.lists(HOSTILE_NUMBER, max_size=300), st.just([0] * 256))


@st.composite
def mutated_trace(draw) -> bytes:
    kind = draw(st.sampled_from(["replace", "delete", "truncate", "flip"]))
    if kind in ("truncate", "flip"):
        data = bytearray(VALID_TRACE.read_bytes())
        at = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            return bytes(data[:at])
        data[at] = draw(st.integers(0, 255))
        return bytes(data)
    trace = copy.deepcopy(VALID)
    path = draw(st.sampled_from(PATHS))
    owner = trace
    for key in path[:-1]:
        owner = owner[key]
    if kind == "delete":
        del owner[path[-1]]
    else:
        owner[path[-1]] = draw(REPLACEMENT)
    return json.dumps(trace, allow_nan=True).encode()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=mutated_trace())
def test_mutated_traces_load_or_say_why_and_replay_if_loaded(data):
    try:
        trace = load_upload(data)
    except TraceError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message
        return
    refs = frame_refs(trace)
    for index, shown in ((0, 1), (10**6, len(refs))):  # a trace that loads must also replay: first and last frame
        html, status, panel = views.render_view(trace, index, "standard", "grid")
        if refs:
            assert status.startswith(f"Frame {shown}/{len(refs)} · ") and "<" in html, status
        else:
            assert (html, status) == ("", "Waiting for the first step...")


@FUZZ
@given(data=mutated_trace())
def test_mutated_trace_uploads_through_the_app(served, capfd, data, tmp_path_factory):
    client, _ = served
    path = tmp_path_factory.mktemp("upload") / "upload.json"
    path.write_bytes(data)
    result = outcome(client.submit(handle_file(str(path)), api_name="/load_trace"))
    assert_clear(result)
    if isinstance(result, (list, tuple)):
        assert isinstance(result[2], str) and "\n" not in result[2]
    assert_no_app_crash(capfd)


def repository_status() -> list[str]:
    """What git sees in the folders a hostile input might reach (a developer's own edits included)."""
    status = subprocess.run(["git", "status", "--porcelain", "--ignored", "--", "assets", "visualizer", "backends"],
                            cwd=ROOT, capture_output=True, text=True).stdout
    return [line for line in status.splitlines() if "__pycache__" not in line]


STATUS_BEFORE_FUZZING = repository_status()  # taken when this module is collected, before any test runs


def test_the_repository_is_untouched_by_the_fuzzing():
    assert repository_status() == STATUS_BEFORE_FUZZING

