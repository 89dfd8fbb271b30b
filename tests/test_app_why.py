"""The app's "why" views through gradio_client: a token's alternatives, a step's accept budget,
structure first, and the thinking and top-k knobs, with a one-line answer to any bad request."""

from __future__ import annotations

import json

import pytest
from gradio_client import Client
from gradio_client.exceptions import ValidationError

from webapp import app as app_module, knob_widgets, why_views
from tests.app_api import GENERATE_ARGS, frames_of, model_answer, run_message, served_app

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def served(no_eos_model_dir):
    with served_app(app_module.build_app(str(no_eos_model_dir))) as url:
        yield url, str(no_eos_model_dir)


def run(client, model, *, thinking=False, topk=3, prompt="Write a short poem.", steps=6):
    args = {**GENERATE_ARGS, "max_new_tokens": 256, "max_denoising_steps": steps, "thinking": thinking, "record_topk": topk}
    outputs = list(client.submit(prompt, model, **args, api_name="/generate"))
    return frames_of(*outputs)


def refused(client, model, *, thinking=False, topk=3):
    args = {**GENERATE_ARGS, "max_new_tokens": 256, "max_denoising_steps": 6, "thinking": thinking, "record_topk": topk}
    client.submit("hi", model, **args, api_name="/generate").result()


def alternatives(client, frame, position) -> str:
    return client.predict(frame, position, api_name="/alternatives")


def budget(client, frame) -> str:
    return client.predict(frame, api_name="/accept_budget")


def test_a_run_with_candidates_answers_for_any_token_and_step(served):
    url, model = served
    client = Client(url, verbose=False)
    frames = run(client, model, topk=3)
    last = len(frames) - 1
    panel = alternatives(client, 1, 7)
    assert "position 7 of block 1" in panel and "step 2" in panel
    assert "commit step" in panel and "the token it almost chose" in panel
    assert panel.count("<tr") == 2 * 3  # three candidates at the step viewed and at the commit step
    assert "commit step" in alternatives(client, last, 0)  # the commit frame shows the block's last step
    # the accept budget of a step: the sampler's rule replayed, and it differs from step to step
    first, second = budget(client, 0), budget(client, 1)
    assert first.startswith("<svg") and "fit the entropy bound of 0.1 nats" in first
    assert "Block 1, step 1:" in first and "Block 1, step 2:" in second
    # structure first, once the run is complete, also in the live view's end line
    assert "Structure first" in client.predict(api_name="/structure_first")


def test_bad_requests_get_one_line_and_keep_the_run(served):
    url, model = served
    client = Client(url, verbose=False)
    assert "No run yet" in alternatives(client, 0, 0) and "No run yet" in budget(client, 0)
    assert "No run yet" in client.predict(api_name="/structure_first")
    frames = run(client, model, topk=2)
    good = alternatives(client, 2, 5)
    cases = [
        ((len(frames) + 5, 0), f"outside 0..{len(frames) - 1}"),
        ((-1, 0), "outside"),
        ((0, 256), "outside the canvas (0 to 255)"),
        (("abc", 0), "frame must be a number"),
        ((0, "1.5"), "position must be a whole number"),
        ((0, ""), "position is empty"),
        ((0, "nan"), "finite number"),
    ]
    for args, expected in cases:
        answer = alternatives(client, *args)
        assert expected in answer and answer.count("<div") == 1, (args, answer)
    assert "outside" in budget(client, 10_000) and "frame must be a number" in budget(client, "x")
    assert alternatives(client, 2, 5) == good  # nothing recorded was touched


def test_a_run_without_candidates_says_so_in_one_line(served):
    url, model = served
    client = Client(url, verbose=False)
    run(client, model, topk=0)
    answer = alternatives(client, 1, 3)
    assert "recorded no candidates" in answer and "<table" not in answer
    assert "fit the entropy bound" in budget(client, 1)  # the budget needs no candidates


def test_a_saved_trace_loaded_again_answers_the_same(served, tmp_path):
    url, model = served
    client = Client(url, verbose=False)
    run(client, model, topk=2)
    before = alternatives(client, 3, 9), budget(client, 3)
    (saved,), _ = client.predict(api_name="/save_trace")
    other = Client(url, verbose=False)
    from gradio_client import handle_file

    value, _, message = other.predict(handle_file(saved), api_name="/load_trace")
    assert message == "" and json.loads(value[1])["structure_svg"].startswith("<svg")
    assert (alternatives(other, 3, 9), budget(other, 3)) == before


class NoThinking:
    """A loaded backend whose chat template has no thinking mode (the project's own models all have one now)."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def supports_thinking(self) -> bool:
        return False


def test_thinking_and_top_k_knobs(served):
    url, model = served
    client = Client(url, verbose=False)
    thinking = model_answer(client.predict(model, api_name="/load_model"))["thinking"]
    # the project's tokenizer carries Gemma 4's enable_thinking template (the built-in model learned the channel)
    assert thinking["interactive"] is True and "no thinking channel" not in thinking["info"]
    assert run(client, model, thinking=True) and run_message(client)[1] == ""
    # a model whose template has no thinking mode: the knob is off, with the reason
    no_thinking = knob_widgets.knob_updates(NoThinking(app_module.MODELS.get(model)))["thinking"]
    assert no_thinking.interactive is False and "no thinking channel" in no_thinking.info
    with pytest.raises(ValidationError) as too_many:  # refused before the queue, in the page's words (hosting.py)
        refused(client, model, topk=40)
    assert "record top-k must be a whole number from 0 to 32 (got 40)" in str(too_many.value)
    frames = run(client, model, topk=1)  # one candidate: the favourite, nothing else to compare
    assert frames and alternatives(client, 2, 4).count("<tr") == 2


def test_the_views_answer_during_a_live_run_without_waiting_for_the_model(served):
    import time

    url, model = served
    client = Client(url, verbose=False)
    args = {**GENERATE_ARGS, "max_new_tokens": 768, "max_denoising_steps": 48, "thinking": False, "record_topk": 2}
    job = client.submit("Tell me a long story.", model, **args, api_name="/generate")
    while len(job.outputs()) < 3:
        time.sleep(0.05)
    answer, chart = alternatives(client, 1, 3), budget(client, 1)
    structure = client.predict(api_name="/structure_first")
    still_running = not job.done()
    client.predict(api_name="/stop")
    job.result()
    assert still_running, "the run ended before the views were asked"
    assert "position 3 of block 1" in answer and "Block 1, step 2:" in chart
    assert "once the run has finished" in structure


def test_an_ask_about_an_earlier_run_is_not_answered_over_the_new_runs_panel():
    """The live view sends each ask with its run's token (the start line's "run"); an ask about the run before
    (sent just before Generate, answered after it) leaves the panel as it is: its hint, never the old answer."""
    import gradio as gr

    from tests.trace_factory import trace_from_commit_steps
    from webapp.sessions import RunSession

    session = RunSession()
    session.show(trace_from_commit_steps([[0, 1, 1, None]]))
    handler = why_views.event_view(why_views.inspect_token, ("frame", "position"), hint="Click a token")
    current = handler(session, gr.EventData(None, {"frame": 0, "position": 0, "run": session.run_id}))
    assert isinstance(current, str) and "dv-alternatives" in current  # answered (this trace: "no candidates")
    earlier = session.run_id
    session.show(trace_from_commit_steps([[0, 1, 1, None]]))  # a new run, with the same content
    assert session.run_id != earlier
    assert handler(session, gr.EventData(None, {"frame": 0, "position": 0, "run": earlier})) == why_views.message_html("Click a token")
    assert handler(session, gr.EventData(None, {"frame": 0, "position": 0})) == current  # an API client's ask: no token
    assert json.loads(app_module.replay_value(session.trace, run=session.run_id)[0])["run"] == session.run_id


def test_an_answer_carries_its_ask_epoch_and_the_hint_to_show_once_that_epoch_is_over():
    """An answer computed before Generate was pressed and delivered after it can't be told by the server (no new
    run yet): it comes back marked with the live view's ask epoch, holding the hint the page shows in its place
    once a new epoch began (live_view.js `dropStale`, tests/test_browser_why.py)."""
    import gradio as gr

    from tests.trace_factory import trace_from_commit_steps
    from webapp.sessions import RunSession

    session = RunSession()
    session.show(trace_from_commit_steps([[0, 1, 1, None]]))
    handler = why_views.event_view(why_views.inspect_token, ("frame", "position"), hint="Click a token")
    plain = handler(session, gr.EventData(None, {"frame": 0, "position": 0, "run": session.run_id}))
    marked = handler(session, gr.EventData(None, {"frame": 0, "position": 0, "run": session.run_id, "epoch": 7}))
    assert marked == (f'<div class="dv-asked" data-epoch="7"><div class="dv-answer">{plain}</div>'
                      f'<div class="dv-stale">{why_views.message_html("Click a token")}</div></div>')
    for odd in ('7"><script>', True, None, 1.5):  # only an int is an epoch: anything else is answered unmarked
        assert handler(session, gr.EventData(None, {"frame": 0, "position": 0, "run": session.run_id, "epoch": odd})) == plain
    hidden = why_views.event_view(why_views.inspect_token, ("frame", "position"), hide_empty=True)
    shown = hidden(session, gr.EventData(None, {"frame": 0, "position": 0, "run": session.run_id, "epoch": 3}))
    assert 'data-epoch="3"' in shown.value and '<div class="dv-stale"></div>' in shown.value  # nothing in its place
