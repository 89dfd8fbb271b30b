"""The fork in the app (issue 55, docs/lab.md "In the app"), driven through gradio_client as a browser drives it:
a branch with no intervention equals its parent's steps bit for bit, a forbid holds, the session's runs form a tree
the client switches between, every refusal is one line before the queue with nothing recorded lost, and hosted mode
caps the branches a session holds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from gradio_client import Client
from gradio_client.exceptions import ValidationError

from backends import ModelChoice
from tests.app_api import KNOBS, finished_run, served_app, submit_generate
from webapp import app as app_module, hosting
from webapp.compare_runs import branch_marks, deltas_html

pytestmark = pytest.mark.app

PROMPT = "Write a six-line poem about the ocean."
ARRAYS = ("canvas", "accepted", "argmax", "entropy_nats", "topk_ids", "topk_probs")
LABEL = "Test model (built in)"


@pytest.fixture(scope="module")
def served(no_eos_model_dir):
    """The app outside hosted mode, and the same model under a branch cap of 1 (hosted mode)."""
    with served_app(app_module.build_app(str(no_eos_model_dir))) as url:
        yield url, str(no_eos_model_dir)


@pytest.fixture(scope="module")
def hosted(no_eos_model_dir):
    limits = hosting.Limits(knob_caps={"max_new_tokens": 512, "max_denoising_steps": 8}, max_branches=1)
    mode = hosting.Hosting(True, limits, (ModelChoice(LABEL, str(no_eos_model_dir), "transformers", True),))
    with served_app(app_module.build_app(hosting_mode=mode)) as url:
        yield url, LABEL


def session_of(client):
    """The server's RunSession of this client (same process: the registry of every app here)."""
    return app_module.SESSIONS._sessions[client.session_hash]


def parent_run(client, model, steps=6):
    text, message = finished_run(client, submit_generate(client, PROMPT, model, max_new_tokens=256, steps=steps))
    assert message == "" and text
    return session_of(client).trace


def run_branch(client, at, listed, model):
    """Fork the session's run; (the live view's values, the fork message after it)."""
    values = list(client.submit(at, listed, model, api_name="/run_branch"))
    message, note, *_ = client.predict("standard", "grid", api_name="/branch_message")
    return values, message or note


def refusal(client, at, listed, model) -> str:
    """The one line of a fork refused before the queue (gradio_client lists it under the input it names)."""
    try:
        client.predict(at, listed, model, api_name="/run_branch")
    except ValidationError as exc:
        lines = str(exc).splitlines()
        assert lines[0] == "1 parameter(s) failed validation:" and len(lines) == 2, str(exc)
        return lines[1].removeprefix("- at: ")
    raise AssertionError("the fork was not refused")


def same_steps(a, b) -> bool:
    return len(a) == len(b) and all(np.array_equal(getattr(x, f), getattr(y, f)) for x, y in zip(a, b) for f in ARRAYS)


def test_a_fork_without_interventions_from_the_app_equals_its_parent(served):
    url, model = served
    client = Client(url, verbose=False)
    parent = parent_run(client, model)
    values, message = run_branch(client, "1:3", "", model)
    session = session_of(client)
    branch = session.trace
    assert branch is not parent and branch.branch.to_dict()["at"] == [1, 3] and branch.branch.interventions == ()
    assert same_steps(parent.steps, branch.steps)  # every step, so the ones from the fork step on, bit for bit
    np.testing.assert_array_equal(branch.end.sequence, parent.end.sequence)
    assert values[0][0].startswith('{"type":"start"') and len(values) > 1  # streamed like a run
    assert message.startswith("branch 1: no intervention at 1:3, forked from root")
    assert session.tree.labels() == ["root", "branch 1 (no intervention at 1:3)"]
    # the compare view holds parent and branch: nothing changed, nothing outlined, every delta zero
    assert session.compare == [parent, branch] and branch_marks(session) == frozenset()
    assert deltas_html(session).count("<td>0</td>") + deltas_html(session).count("<td>n/a</td>") == 3


def test_a_forbid_holds_and_the_tree_switches_between_runs(served, no_eos_backend):
    url, model = served
    client = Client(url, verbose=False)
    parent = parent_run(client, model)
    tokenizer = no_eos_backend.tokenizer

    def one_token(p):  # committed after the fork step, and a text that is that one token again
        token = int(parent.blocks[0].tokens[p])
        return not parent.steps[0].accepted[p] and tokenizer.encode(tokenizer.decode([token]), add_special_tokens=False) == [token]

    position = next(p for p in range(parent.canvas_length) if one_token(p))
    token = int(parent.blocks[0].tokens[position])
    text = tokenizer.decode([token])
    _, message = run_branch(client, "1:2", f"forbid {position}={text}", model)
    session = session_of(client)
    branch = session.trace
    assert same_steps(parent.steps[:1], branch.steps[:1])  # before the fork step: the parent's
    for step in branch.steps[1:]:
        assert not (step.accepted[position] and step.canvas[position] == token) and step.argmax[position] != token
    assert branch.blocks[0].tokens[position] != token
    assert branch.branch.interventions == (f"forbid {position}={text}",) and branch.branch.token_ids == ((token,),)
    assert (0, position) in branch_marks(session)  # its committed token changed: outlined in the compare view
    canvas, _ = client.predict(0, "standard", "grid", api_name="/compare_step")
    assert "inset 0 0 0 1.5px" in canvas  # the outline, drawn on both sides
    # a branch of the branch, then back to the root: the live view replays it, the card names no parent
    run_branch(client, "1:4", "", model)
    assert session.tree.names() == ["root", "branch 1", "branch 1.1"]
    shown = client.predict("root", "standard", "grid", api_name="/show_run")
    assert session.trace is parent and shown[0][0].startswith('{"type":"start"')
    shown = client.predict("branch 1.1", "standard", "grid", api_name="/show_run")
    assert session.trace.branch.to_dict()["at"] == [1, 4] and "branch of branch 1" in shown[4]


def test_refusals_are_one_line_before_the_queue_and_lose_nothing(served):
    url, model = served
    client = Client(url, verbose=False)
    assert refusal(client, "1:2", "", model) == "No run to fork yet: generate one or load a trace."
    parent = parent_run(client, model, steps=4)
    cases = {
        ("1:9", ""): "Fork at ",  # a step outside the run, its range named
        ("3:1", ""): "Fork at ",
        ("1:2", "forbid 999=x"): "position 999 is outside the canvas",
        ("1:2", "set 4="): "has an empty text",
        ("1:2", "knob seed=3"): "cannot change mid-run",
        # a knob diffusers' samplers read, not this run's: its sampler's declared knobs judge it, no model asked
        ("1:2", "knob temperature=0.5"): "entropy-bound sampler cannot change temperature mid-run: it reads "
                                          "entropy_bound, t_max, t_min afresh each step",
        ("1:2", "frobnicate 3"): "unknown intervention",
    }
    for (at, listed), said in cases.items():
        message = refusal(client, at, listed, model)
        assert said in message and "\n" not in message and "Traceback" not in message
    session = session_of(client)
    assert session.trace is parent and session.tree.names() == ["root"]  # nothing recorded was lost
    # the loaded model's tokenizer judges the texts, before the queue too: one line, the parent kept
    last = parent.canvas_length - 1
    tokenized = {
        ("1:2", "forbid 3=ocean waves and more"): "forbid takes one token, and 'ocean waves and more' is",
        ("1:2", "nudge 3=ocean waves and more:0.1"): "nudge takes one token",
        ("1:2", f"set {last}=ocean waves and more"): f"tokens from position {last} run past the canvas of",
    }
    for (at, listed), said in tokenized.items():
        message = refusal(client, at, listed, model)
        assert said in message and "\n" not in message and "Traceback" not in message
    assert session.trace is parent and session.tree.names() == ["root"] and len(parent.steps) == 4


def test_a_loaded_trace_of_another_model_is_refused(served, random_backend):
    from backends.run import record_trace
    from visualizer.settings import GenerationSettings

    url, model = served
    client = Client(url, verbose=False)
    parent_run(client, model, steps=4)  # loads the app's model, so the validator can compare
    other = record_trace(random_backend, PROMPT, GenerationSettings(seed=1, max_new_tokens=256, max_denoising_steps=3))
    session = session_of(client)
    other.model = replace(other.model, name="another model")
    session.show(other)
    assert "This run was recorded with another model" in refusal(client, "1:2", "", model)
    assert session.trace is other


def test_hosted_mode_caps_the_branches_of_a_session(hosted):
    url, label = hosted
    client = Client(url, verbose=False)
    parent_run(client, label, steps=4)
    run_branch(client, "1:2", "", label)
    session = session_of(client)
    assert session.tree.branch_count() == 1
    assert "already holds 1 branch," in refusal(client, "1:2", "", label)
    assert session.tree.branch_count() == 1
    other = Client(url, verbose=False)  # another session has its own cap
    parent_run(other, label, steps=4)
    run_branch(other, "1:3", "", label)
    assert session_of(other).tree.branch_count() == 1
    assert "up to 1 branches a session" in hosting.hosted_note(hosting.Limits(max_branches=1))


def test_the_streamed_fork_refuses_before_appending_and_equals_fork_trace(random_backend):
    """`fork_records`, the app's fork: a refused plan appends nothing and leaves no plan on the backend; a streamed
    branch is `fork_trace`'s, step for step, and names its fork before its first step."""
    from backends import BackendError
    from backends.interventions import fork_records, fork_trace
    from backends.run import record_trace
    from visualizer.interventions import parse_spec
    from visualizer.settings import GenerationSettings
    from visualizer.trace import Trace

    parent = record_trace(random_backend, PROMPT, GenerationSettings(seed=2, max_new_tokens=256, max_denoising_steps=5))
    refused = Trace(model=random_backend.info, prompt=PROMPT)
    with pytest.raises(BackendError, match="is outside this run"):
        next(fork_records(random_backend, parent, "0" * 64, block=1, step=9, interventions=(), trace=refused))
    assert refused.start is None and not refused.steps and random_backend.fork_plan is None
    specs = (parse_spec("topk 3"), parse_spec("remask 2-5"))
    streamed = Trace(model=random_backend.info, prompt=PROMPT)
    batches = fork_records(random_backend, parent, "0" * 64, block=1, step=2, interventions=specs, trace=streamed)
    next(batches)
    assert streamed.branch.interventions == ("topk 3", "remask 2-5") and not streamed.steps
    list(batches)
    whole = fork_trace(random_backend, parent, "0" * 64, block=1, step=2, interventions=specs)
    assert same_steps(streamed.steps, whole.steps) and streamed.branch == whole.branch
    assert not same_steps(streamed.steps, parent.steps) and random_backend.fork_plan is None


def warm_refusal(client, at, model, start_text=None, **knobs) -> str:
    """The one line of a warm start refused before the queue (named under its start step)."""
    try:
        client.predict(PROMPT, model, **{**KNOBS, "max_denoising_steps": 4, **knobs}, start_at=at, start_text=start_text,
                       api_name="/run_warm")
    except ValidationError as exc:
        lines = str(exc).splitlines()
        assert len(lines) == 2, str(exc)
        return lines[1].removeprefix("- start_at: ")
    raise AssertionError("the warm start was not refused")


def test_a_warm_start_from_the_app_equals_record_start_from(served, no_eos_backend, tmp_path):
    """/run_warm from a step of the session's run is `record --start-from` from the same step, bit for bit."""
    import argparse

    from backends.run import record_trace
    from cli.warm_start import read_start, record_warm
    from webapp.run_card import trace_card

    url, model = served
    client = Client(url, verbose=False)
    assert "No run to start from yet" in warm_refusal(client, "1:2", model)
    parent = parent_run(client, model)
    assert warm_refusal(client, "1:9", model).startswith("Start from ")  # a step outside the run, its range named
    knobs = {**KNOBS, "max_new_tokens": 256, "max_denoising_steps": 6, "seed": 1}
    values = list(client.submit(PROMPT, model, **knobs, start_at="1:3", api_name="/run_warm"))
    message, note, *_ = client.predict("standard", "grid", api_name="/warm_message")
    session = session_of(client)
    warm = session.trace
    assert values[0][0].startswith('{"type":"start"') and message == ""  # streamed like a run
    assert note.startswith("start 1: warm start from root's canvas at 1:3;")
    assert session.tree.labels() == ["root", "start 1 (warm start from root's canvas at 1:3)"]
    assert "started from the canvas of root" in trace_card(warm, parent="root")
    path = tmp_path / "parent.json"
    path.write_bytes(parent.to_json().encode("utf-8"))  # the bytes the app hashed
    request = read_start(argparse.Namespace(start_from=f"{path}:1:3", start_from_text=[]), None, None)
    cli = record_warm(no_eos_backend, PROMPT, warm.settings, request, stop=None, on_record=None)
    assert same_steps(cli.steps, warm.steps) and cli.warm_start == warm.warm_start and warm.warm_start.placed
    np.testing.assert_array_equal(cli.end.sequence, warm.end.sequence)
    assert warm.settings.seed == 1 and list(warm.warm_start.placed) == [
        (p, int(parent.steps[2].canvas[p])) for p in parent.steps[2].accepted.nonzero()[0]]
    plain = record_trace(no_eos_backend, PROMPT, warm.settings)  # the same run without the start is another run
    assert not same_steps(plain.steps, warm.steps)


def test_a_warm_start_from_text_in_the_app_equals_record_start_from_text(served, no_eos_backend, tmp_path):
    """/run_warm with Fork at empty and a start text is `record --start-from-text`, bit for bit, as a new root run;
    over a run's canvas the text wins where the two meet; each refusal is one line before the queue."""
    import argparse

    from cli.warm_start import read_start, record_warm
    from webapp.run_card import trace_card

    url, model = served
    client = Client(url, verbose=False)
    assert warm_refusal(client, "", model) == (
        "Give a step to start from (Fork at, block:step) or a text to place (POS=TEXT).")
    assert warm_refusal(client, "", model, start_text="Ocean").startswith("Start text takes POS=TEXT")
    assert warm_refusal(client, "", model, start_text="3=").startswith("Start text '3=' has an empty text")
    knobs = {**KNOBS, "max_new_tokens": 256, "max_denoising_steps": 6, "seed": 1}
    list(client.submit(PROMPT, model, **knobs, start_at="", start_text="0=Ocean\n40=moon", api_name="/run_warm"))
    message, note, *_ = client.predict("standard", "grid", api_name="/warm_message")
    session = session_of(client)
    warm = session.trace
    assert message == "" and note.startswith("root: warm start from text 0=Ocean; 40=moon;")
    assert session.tree.labels() == ["root"] and warm.warm_start.source is None and warm.warm_start.block is None
    assert warm.warm_start.texts == ("0=Ocean", "40=moon")
    assert "given the text 0=Ocean; 40=moon, not held" in trace_card(warm)
    request = read_start(argparse.Namespace(start_from=None, start_from_text=["0=Ocean", "40=moon"]), None, None)
    cli = record_warm(no_eos_backend, PROMPT, warm.settings, request, stop=None, on_record=None)
    assert same_steps(cli.steps, warm.steps) and cli.warm_start == warm.warm_start
    ocean = no_eos_backend.tokenizer.encode("Ocean", add_special_tokens=False)
    assert [t for p, t in warm.warm_start.placed if p < len(ocean)] == list(ocean)
    # the model is in memory now: a text off the canvas is refused before the queue, naming the canvas
    assert warm_refusal(client, "", model, start_text="999=x") == (
        "Start text 999=x: position 999 is outside the canvas (positions 0 to 255)")
    # over the canvas of the run on screen (the start above): a branch of it, the text placed over that canvas
    list(client.submit(PROMPT, model, **knobs, start_at="1:3", start_text="0=Ocean", api_name="/run_warm"))
    over = session_of(client).trace
    source = dict((int(p), int(warm.steps[2].canvas[p])) for p in warm.steps[2].accepted.nonzero()[0])
    source.update(enumerate(ocean))
    assert dict(over.warm_start.placed) == source and over.warm_start.source is not None
    assert session_of(client).tree.labels()[-1] == "start 1 (warm start from root's canvas at 1:3 and text 0=Ocean)"


def test_hosted_mode_counts_a_warm_start_with_the_branches(hosted):
    url, label = hosted
    client = Client(url, verbose=False)
    parent_run(client, label, steps=4)
    list(client.submit(PROMPT, label, **{**KNOBS, "max_denoising_steps": 4}, start_at="1:2", api_name="/run_warm"))
    session = session_of(client)
    assert session.tree.branch_count() == 1 and session.trace.warm_start is not None
    assert "already holds 1 branch," in warm_refusal(client, "1:2", label)
    assert "already holds 1 branch," in refusal(client, "1:2", "", label)
    assert session.tree.branch_count() == 1
