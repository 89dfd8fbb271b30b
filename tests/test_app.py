"""The app, launched for real and driven through gradio_client, as a browser would drive it."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

import gradio as gr
import pytest

from visualizer.settings import GenerationSettings
from gradio_client import Client, handle_file
from gradio_client.exceptions import ValidationError

from webapp import app as app_module, knob_widgets, serve, why_views
from tests.app_api import frames_of, model_answer, run_message, served_app, submit_generate
from visualizer.live_stream import RING

pytestmark = pytest.mark.app


@pytest.fixture(scope="module")
def launched(no_eos_model_dir):
    demo = app_module.build_app(str(no_eos_model_dir))
    with served_app(demo):
        yield demo


@pytest.fixture(scope="module")
def served(launched, no_eos_model_dir, random_model_dir):
    return launched.local_url, str(no_eos_model_dir), str(random_model_dir)


def generate(client, prompt, model, **overrides):
    """A long run through the `/generate` API (768 tokens, 48 steps, as GENERATE_ARGS, unless overridden)."""
    return submit_generate(client, prompt, model, **{"max_new_tokens": 768, "steps": 48, **overrides})


HANG_S = 300  # an outer bound against a hang only; no test here measures speed


def spy_on_runs(monkeypatch, hold_steps=()) -> tuple[list, dict, list]:
    """Record, on the server, when each run's record stream starts and ends (in order, no clock),
    and hold the model before the step after each step in `hold_steps` (counted over the whole
    test, from 0) until the test releases it: the model waits for the client, not the reverse.
    Patched on the classes, so every run of the app's loaded model goes through it."""
    from transformers import DiffusionGemmaForBlockDiffusion

    from backends.transformers_backend import TransformersBackend

    events: list = []
    holds = {step: threading.Event() for step in hold_steps}
    real_batches, real_step = TransformersBackend.generate_batches, DiffusionGemmaForBlockDiffusion._denoising_step
    calls = []

    def generate_batches_spy(self, prompt, *args, **kwargs):
        events.append(("start", prompt))
        try:
            yield from real_batches(self, prompt, *args, **kwargs)
        finally:
            events.append(("end", prompt))

    def denoising_step_spy(self, *args, **kwargs):
        calls.append(None)
        step = len(calls) - 1  # this step's number: steps 0..step-1 are done
        if step - 1 in holds:
            holds[step - 1].wait(timeout=HANG_S)  # until the client has seen the step before
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(TransformersBackend, "generate_batches", generate_batches_spy)
    monkeypatch.setattr(DiffusionGemmaForBlockDiffusion, "_denoising_step", denoising_step_spy)
    return events, holds, calls


def test_frames_stream_live_then_the_run_replays(served, monkeypatch):
    url, model, _ = served
    _, holds, steps_run = spy_on_runs(monkeypatch, hold_steps=range(1, 22))  # the model waits until each of 21 frames is seen
    client = Client(url, verbose=False)
    job = generate(client, "Write a six-line poem about the ocean.", model)
    arrivals = []
    for output in job:
        arrivals.append((job.done(), output))
        seen = max([-1] + [json.loads(line)["i"] for line in output[2:] if line])
        for step, seen_it in holds.items():
            if step <= seen:
                seen_it.set()  # block 0's step s is frame s: the client saw it, the model may go on
    # the log grew while the model was still generating (held until each frame was seen): many
    # updates, the first one included
    done_at_first, first = arrivals[0]
    assert len(steps_run) == 3 * 48  # the model went through the spy that held it (3 blocks of 48 steps)
    assert not done_at_first and first[0].startswith('{"type":"start"')
    assert sum(not done for done, _ in arrivals) > 10
    newest = [max([-1] + [json.loads(line)["i"] for line in value[2:] if line]) for _, value in arrivals]
    newest = [i for i in newest if i >= 0]  # the first value has no frame yet, the closing one none left
    assert newest == sorted(newest) and len(set(newest)) > 20  # many distinct intermediate frames
    assert not any(arrivals[-1][1][2:])  # the run closes with its frame slots emptied
    assert max(len(value) for _, value in arrivals) <= 2 + RING  # each update stays small
    frames = frames_of(*(value for _, value in arrivals))
    assert frames[1]["caption"].startswith("Block 1/3 · step 2 ")
    assert frames[-1]["kind"] == "commit" and frames[-1]["caption"].startswith("Block 3/3 · committed")
    end = json.loads(arrivals[-1][1][1])
    assert end["type"] == "end" and end["finish"] in ("eos", "length") and end["text"]
    assert run_message(client) == (end["text"], "")
    # the server still renders any recorded frame for API clients, without rerunning the model
    html, status, panel = client.predict(len(frames) - 1, "standard", "grid", api_name="/show_frame")
    assert status.startswith(f"Frame {len(frames)}/{len(frames)} · {frames[-1]['caption']}")
    assert "dv-committed" in html and "tau_b" in panel
    assert client.predict(1, "standard", "grid", api_name="/show_frame")[1].startswith(f"Frame 2/{len(frames)} · {frames[1]['caption']}")


def test_sessions_do_not_see_each_others_runs(served):
    url, model, _ = served
    a, b = Client(url, verbose=False), Client(url, verbose=False)
    list(generate(a, "Hello there", model, max_new_tokens=256, steps=4))
    assert b.predict(0, "standard", "grid", api_name="/show_frame")[1] == "No run yet: press Generate."
    assert a.predict(0, "standard", "grid", api_name="/show_frame")[1].startswith("Frame 1/")


def test_layers_or_pins_for_a_run_that_does_not_read_them_are_refused_never_dropped():
    """Every installed backend of CI reads both (transformers, diffusers); MLX does not: its runs take
    this path, which must refuse the box instead of running stock without saying so."""
    from webapp.knob_widgets import settings_from_widgets

    for knob, text in (("pins", "3=x"), ("layers", "0,1")):
        with pytest.raises(ValueError, match=f"sampler does not take {knob}"):
            settings_from_widgets({knob: text, "sampler": "confidence"}, frozenset())
    assert settings_from_widgets({"pins": "", "layers": ""}, frozenset()) == GenerationSettings()  # empty boxes: fine


def test_bad_input_gets_a_message_and_keeps_the_recorded_run(served):
    url, model, _ = served
    client = Client(url, verbose=False)
    list(generate(client, "Name a colour.", model, max_new_tokens=256, steps=4))
    before = client.predict(2, "standard", "grid", api_name="/show_frame")
    # what a knob's declaration judges, a model that cannot load, and (the model being loaded) what only the model can
    # judge: refused before the request joins the model queue, and the API client's error carries the page's one line
    # (not a bare "400 Bad Request", nor a quiet `/run_message` after an empty stream: issue 58)
    refused = {
        "No model folder": ("/no/such/model/folder", {}),
        "max denoising steps must be a whole number from 1 to": (model, {"steps": 0}),
        "max denoising steps must be a whole number (got 2.5)": (model, {"steps": 2.5}),
        "seed must be a whole number from 0 to": (model, {"seed": -1}),
        "entropy bound must be a number above 0": (model, {"entropy_bound": -2}),
        "layers takes layer numbers separated by commas": (model, {"layers": "0,a"}),
        "layer 1 is asked for twice: give each layer once": (model, {"layers": "1,1"}),
        "each pin is a line POS=TEXT": (model, {"pins": "moon"}),
        "empty text": (model, {"pins": "3="}),
        "The prompt is empty": (model, {"prompt": ""}),
        "exceeds": (model, {"max_new_tokens": 2048}),
        "t_max must be larger": (model, {"t_min": 0.9, "t_max": 0.1}),
        "context": (model, {"prompt": "word " * 3000}),  # the model's context in tokens
        "layer 99 does not exist": (model, {"layers": "0,99"}),  # the model's depth
        "outside the canvas": (model, {"pins": "999=x"}),
        "more than the 6 position(s) left": (model, {"pins": "250=" + "word " * 40}),
    }
    for expected, (source, overrides) in refused.items():
        prompt = overrides.pop("prompt", "hi")
        with pytest.raises(ValidationError) as error:
            generate(client, prompt, source, **overrides).result()
        message = str(error.value)
        assert expected in message and "Bad Request" not in message, (overrides, message)
        if expected in ("context", "layer 99 does not exist"):  # said at the input that caused it, as the page draws it
            assert f"- {'prompt' if expected == 'context' else 'layers'}: " in message, message
    assert client.predict(2, "standard", "grid", api_name="/show_frame") == before


def test_stop_ends_the_run_and_keeps_its_frames(served):
    url, model, _ = served
    client = Client(url, verbose=False)
    job = generate(client, "Tell me a long story.", model)
    while not job.outputs():
        time.sleep(0.05)
    client.predict(api_name="/stop")
    job.result()  # waits for the run to end
    frames = len(frames_of(*job.outputs()))
    assert run_message(client)[1].startswith("Stopped after")
    assert 1 <= frames < 144  # far fewer than the 3 x 48 steps of a full run
    assert client.predict(0, "standard", "grid", api_name="/show_frame")[1].startswith("Frame 1/")


def test_picking_a_model_reports_it_or_says_why_not(served):
    url, model, random_model = served
    client = Client(url, verbose=False)
    picked = model_answer(client.predict(random_model, api_name="/load_model"))
    assert "vocab" in picked["model_info"] and picked["model_message"] == ""
    # its samplers, from every backend installed here that runs it; the knobs its default sampler reads
    assert picked["sampler"]["visible"] and [c[0] for c in picked["sampler"]["choices"]] == ["entropy-bound", "discrete-ddim", "block-refinement"]
    assert picked["entropy_bound"]["visible"] and not picked["temperature"]["visible"] and not picked["corrector_k"]["visible"]
    failed = model_answer(client.predict("/no/such/folder", api_name="/load_model"))
    assert "No model folder" in failed["model_message"]
    assert "vocab" in failed["model_info"]  # a working model stays loaded and described


def test_one_generation_at_a_time_and_the_queue_position_is_reported(served, monkeypatch):
    from gradio_client.utils import Status

    url, model, _ = served
    events, holds, _ = spy_on_runs(monkeypatch, hold_steps=[1])  # A waits at its step 1 until B is seen queued
    a, b = Client(url, verbose=False), Client(url, verbose=False)
    job_a = generate(a, "First in line.", model, max_new_tokens=512)
    while not job_a.outputs():
        time.sleep(0.02)
    job_b = generate(b, "Second in line.", model, max_new_tokens=256, steps=4)
    deadline = time.monotonic() + HANG_S  # against a hang only
    while not holds[1].is_set():
        assert time.monotonic() < deadline, "B never showed its place in the queue"
        status = job_b.status()
        if status.code == Status.IN_QUEUE and status.rank is not None:
            holds[1].set()  # B waits in the queue, with its position, while A runs
        assert not job_a.done() and not job_b.done()
        time.sleep(0.05)
    job_a.result(timeout=HANG_S)
    job_b.result(timeout=HANG_S)
    # the server's own order of events: B's model run began only after A's had ended
    assert events == [("start", "First in line."), ("end", "First in line."), ("start", "Second in line."), ("end", "Second in line.")]
    assert frames_of(*job_b.outputs())


def test_an_mlx_model_runs_with_its_own_sampler(served, mlx_models):
    url, _, _ = served
    client = Client(url, verbose=False)
    folder = str(mlx_models["float32"])
    loaded = model_answer(client.predict(folder, api_name="/load_model"))
    assert "mlx on" in loaded["model_info"] and loaded["model_message"] == ""
    sampler, note = loaded["sampler"], loaded["sampler_note"]
    assert sampler["visible"] and sampler["value"] == "entropy-bound"  # MLX-only knobs appear
    assert note["visible"] and "Entropy-bound" in note["value"]
    outputs = list(generate(client, "Write a haiku.", folder, max_new_tokens=256, steps=6,
                            sampler="confidence-threshold", temperature=0.0))
    statuses = [f["caption"] for f in frames_of(*outputs)]
    assert run_message(client)[1] == "" and "committed" in statuses[-1]
    assert all("remasked 0" in s for s in statuses if " step " in s)  # reveals accumulate: nothing is remasked


def test_the_queue_polls_less_often_than_gradios_own_and_queued_calls_still_run(launched, served):
    queue, gradios = launched._queue, gr.Blocks().queue()._queue
    assert (queue.sleep_when_free, queue.progress_update_sleep_when_free) == (serve.QUEUE_POLL_S, serve.PROGRESS_POLL_S)
    assert serve.QUEUE_POLL_S > gradios.sleep_when_free and serve.PROGRESS_POLL_S > gradios.progress_update_sleep_when_free
    # and Gradio's loops really sleep that long (a Gradio that polled on other names would ignore ours):
    # give both attributes values nothing else uses and watch the running loops' sleeps for them
    marks = {"sleep_when_free": 0.0123, "progress_update_sleep_when_free": 0.0457}
    saw, real_sleep = set(), asyncio.sleep

    async def sleep_spy(delay, *args, **kwargs):
        saw.add(delay)
        return await real_sleep(delay, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(asyncio, "sleep", sleep_spy)
        for name, mark in marks.items():
            patch.setattr(queue, name, mark)
        deadline = time.monotonic() + 60  # against a hang only: the loops go round many times a second
        while not set(marks.values()) <= saw:
            assert time.monotonic() < deadline, f"Gradio's loops never slept {set(marks.values()) - saw}"
            time.sleep(0.05)

    # queued calls still start and finish: asks from several sessions at once, three with a run and
    # three without. One client's own calls go one after another: gradio_client (2.7.2) reads every
    # call of a client from one shared event stream, and a call sent while the server is closing that
    # stream (every call it knew of had finished) is cancelled on the client, never answered; twelve
    # calls sent at once from one client met that on a busy CI machine.
    url, model, _ = served

    def session_with_a_run():
        client = Client(url, verbose=False)
        frames = len(frames_of(*generate(client, "Name a colour.", model, max_new_tokens=256, steps=4)))
        answers = [client.predict(i % frames, "standard", "grid", api_name="/show_frame")[1].split(" · ")[0] for i in range(4)]
        return answers, [f"Frame {i % frames + 1}/{frames}" for i in range(4)]

    def stranger():
        return Client(url, verbose=False).predict(0, "standard", "grid", api_name="/show_frame")[1]

    with ThreadPoolExecutor(6) as pool:
        ran = [pool.submit(session_with_a_run) for _ in range(3)]
        theirs = [pool.submit(stranger) for _ in range(3)]
        for answered in ran:
            answers, expected = answered.result(timeout=120)
            assert answers == expected
        assert [t.result(timeout=60) for t in theirs] == ["No run yet: press Generate."] * 3


def test_a_gradio_without_those_intervals_keeps_its_own_and_says_so_once(caplog):
    class Queue:  # a future Gradio's queue, polling on other names
        poll_s = 0.001

    class Blocks:
        def queue(self, **kwargs):
            self._queue = Queue()

    serve._say_once.cache_clear()
    with caplog.at_level(logging.WARNING):
        apps = [serve.queue_app(Blocks()) for _ in range(2)]
    assert all(a._queue.poll_s == 0.001 and not hasattr(a._queue, "sleep_when_free") for a in apps)
    said = [r.getMessage() for r in caplog.records if r.name == serve.__name__]
    assert len(said) == 1 and "no sleep_when_free or progress_update_sleep_when_free" in said[0]


def test_every_scheduler_knob_is_set_through_the_api_and_recorded(served):
    """The four diffusers knobs are /generate parameters named as the knob table names them; picking
    their sampler runs the model on the backend that has it, and the trace records each value."""
    url, model, _ = served
    client = Client(url, verbose=False)
    cases = {
        "discrete-ddim": {"corrector_steps": 1, "corrector_k": 2},
        "block-refinement": {"refine_threshold": 0.8, "editing_threshold": 0.99},
    }
    for sampler, knobs in cases.items():
        outputs = list(generate(client, "Name a colour.", model, max_new_tokens=256, steps=4, sampler=sampler, **knobs))
        assert frames_of(*outputs) and run_message(client)[1] == ""
        saved, message = client.predict(api_name="/save_trace")
        trace = json.loads(Path(saved[0]).read_text(encoding="utf-8"))
        assert trace["model"]["backend"] == "diffusers" and trace["settings"]["sampler"] == sampler
        assert {name: trace["settings"][name] for name in knobs} == knobs
        assert trace["settings"]["entropy_bound"] is None  # a knob the sampler does not read is not recorded


def test_picking_a_sampler_shows_the_knobs_it_reads(served):
    _, model, _ = served
    handlers = app_module.Handlers(app_module.Hosting.from_environment())
    shown = {name: update.get("visible") if isinstance(update, dict) else update.visible
             for name, update in handlers.select_sampler("block-refinement", model).items() if name in app_module.KNOBS}
    assert shown["refine_threshold"] and shown["editing_threshold"] and shown["temperature"]
    assert not shown["entropy_bound"] and not shown["corrector_steps"] and not shown["t_min"]
    assert "must be one of" in handlers.select_sampler("confidence-threshold", model)["model_message"]
    # the model line follows the backend that runs the picked sampler, and back
    assert "diffusers on `cpu`" in handlers.select_sampler("block-refinement", model)["model_info"]
    assert "transformers on `cpu`" in handlers.select_sampler("entropy-bound", model)["model_info"]
    ddim = {name: update.get("visible") if isinstance(update, dict) else update.visible
            for name, update in handlers.select_sampler("discrete-ddim", model).items()
            if name in app_module.KNOBS}
    assert ddim["corrector_steps"] and not ddim["corrector_k"]  # k positions per sweep, of no sweeps (the default 0)
    assert knob_widgets.shown_while(2)["visible"] and not knob_widgets.shown_while(0)["visible"]  # an edit of the steps box


def test_layers_and_pins_through_the_api_are_recorded_and_shown(served, tmp_path):
    """`layers` and `pins` are /generate parameters (the knob table's names): the trace records both, the
    layer panel and the inspector's lens grid answer from it, and a trace without layers shows no panel."""
    url, model, _ = served
    client = Client(url, verbose=False)
    outputs = list(generate(client, "Name a colour.", model, max_new_tokens=256, steps=4, layers="0,1", pins="3=blue\n20=sea"))
    frames = frames_of(*outputs)
    assert run_message(client)[1] == ""
    start = json.loads(outputs[-1][0])
    assert {3, 20} <= set(start["pins"]) and start["layers"] and start["shift"]
    saved, _ = client.predict(api_name="/save_trace")
    trace = json.loads(Path(saved[0]).read_text(encoding="utf-8"))
    assert trace["settings"]["layers"] == [0, 1] and trace["settings"]["pins"] == [[3, "blue"], [20, "sea"]]
    assert {3, 20} <= {position for position, _ in trace["pins"]}
    assert len(trace["steps"][1]["layer_rms"]) == 2 and trace["blocks"][0]["lens_ranks"]
    assert "kl" not in frames[0] and "kl" in frames[1]  # the shift, for the heatmap's KL layer (none at a block's first step)
    panel = client.predict(2, api_name="/layers")
    assert panel.startswith("<svg") and ">L0<" in panel and ">L1<" in panel and "pinned position 3" in panel
    assert "rank of the committed token" in client.predict(2, 3, api_name="/alternatives")
    assert "frame must be a number" in client.predict("x", api_name="/layers")
    # an older trace (no layers): no panel, no error; and no lens grid in the inspector
    from visualizer.replay import example_traces

    client.predict(handle_file(str(example_traces()[0])), api_name="/load_trace")
    assert client.predict(2, api_name="/layers") == ""
    assert "rank of the committed token" not in client.predict(2, 3, api_name="/alternatives")


def test_no_panel_shares_a_name_with_a_knob():
    """`build_app` keeps components by name: a why-view panel named like a knob would take the knob's
    updates (a panel named "layers" was shown, empty, whenever a model loaded)."""
    assert not {why.panel for why in why_views.WHY_VIEWS} & {knob.name for knob in knob_widgets.APP_KNOBS}
