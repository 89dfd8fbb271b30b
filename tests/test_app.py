"""The app, launched for real and driven through gradio_client, as a browser would drive it."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import ValidationError

import app as app_module

GENERATE_ARGS = dict(
    max_new_tokens=768, steps=48, entropy_bound=0.1, t_min=0.4, t_max=0.8, seed=0, palette="standard", layout_kind="grid",
    sampler="entropy-bound", temperature=1.0,
)


@pytest.fixture(scope="module")
def served(no_eos_model_dir, random_model_dir):
    demo = app_module.build_app(str(no_eos_model_dir))
    demo.queue(default_concurrency_limit=1).launch(prevent_thread_lock=True, quiet=True)
    yield demo.local_url, str(no_eos_model_dir), str(random_model_dir)
    demo.close()


def generate(client, prompt, model, **overrides):
    args = {**GENERATE_ARGS, **overrides}
    return client.submit(prompt, model, *args.values(), api_name="/generate")


def test_frames_stream_live_then_the_run_replays(served):
    url, model, _ = served
    client = Client(url, verbose=False)
    job = generate(client, "Write a six-line poem about the ocean.", model)
    arrivals = []
    for output in job:
        if not output[1].startswith("Loading "):  # the model's first use on this server says so first
            arrivals.append((job.done(), output))
    # frames reached us while the model was still generating: many of them, the first one included
    done_at_first, first = arrivals[0]
    assert not done_at_first
    assert sum(not done for done, _ in arrivals) > 10
    assert "step 1 " in first[1] and "Block 1/3" in first[1]
    steps_seen = {re.search(r"Frame (\d+)/", o[1]).group(1) for _, o in arrivals}
    assert len(steps_seen) > 20  # many distinct intermediate frames, not a burst of one
    html, status, slider, text, message, panel = arrivals[-1][1]
    assert "tau_b" in panel and panel.count("<svg") == 3 and "block 3 · committed" in panel
    assert "committed" in status and "Block 3/3" in status
    assert message == "" and len(text) > 0
    last_frame = slider["value"] if isinstance(slider, dict) else slider
    # replay: any recorded frame, without rerunning the model, and the last one equals the live one
    replay_html, replay_status, replay_panel = client.predict(last_frame, "standard", "grid", api_name="/show_frame")
    assert replay_html == html and replay_panel == panel
    first_html, first_status, _ = client.predict(0, "standard", "grid", api_name="/show_frame")
    assert first_status.startswith("Frame 1/") and first_html == first[0]


def test_sessions_do_not_see_each_others_runs(served):
    url, model, _ = served
    a, b = Client(url, verbose=False), Client(url, verbose=False)
    list(generate(a, "Hello there", model, max_new_tokens=256, steps=4))
    assert b.predict(0, "standard", "grid", api_name="/show_frame")[1] == "No run yet: press Generate."
    assert a.predict(0, "standard", "grid", api_name="/show_frame")[1].startswith("Frame 1/")


def test_bad_input_gets_a_message_and_keeps_the_recorded_run(served):
    url, model, _ = served
    client = Client(url, verbose=False)
    list(generate(client, "Name a colour.", model, max_new_tokens=256, steps=4))
    before = client.predict(2, "standard", "grid", api_name="/show_frame")
    cases = [
        (("", model), {}, "empty"),
        (("hi", model), {"seed": -1}, "seed"),
        (("hi", model), {"max_new_tokens": 2048}, "exceeds"),
        (("hi", model), {"t_min": 0.9, "t_max": 0.1}, "t_max must be larger"),
        (("hi", model), {"entropy_bound": -2}, "entropy bound"),
        (("word " * 3000, model), {}, "context"),
    ]
    for (prompt, source), overrides, expected in cases:
        outputs = list(generate(client, prompt, source, **overrides))
        assert expected in outputs[-1][4], (prompt[:20], overrides, outputs[-1][4])
    # a model that cannot load is refused before the request joins the model queue
    with pytest.raises(ValidationError, match="No model folder"):
        generate(client, "hi", "/no/such/model/folder").result()
    # sliders refuse out-of-range values themselves, with Gradio's own message, also before the queue
    with pytest.raises(httpx.HTTPStatusError) as refused:
        generate(client, "hi", model, steps=0).result()
    assert "less than minimum" in refused.value.response.json()["detail"]
    assert client.predict(2, "standard", "grid", api_name="/show_frame") == before


def test_stop_ends_the_run_and_keeps_its_frames(served):
    url, model, _ = served
    client = Client(url, verbose=False)
    job = generate(client, "Tell me a long story.", model)
    while not job.outputs():
        time.sleep(0.05)
    client.predict(api_name="/stop")
    job.result()  # waits for the run to end
    final = job.outputs()[-1]
    assert final[4].startswith("Stopped after")
    frames = int(re.search(r"Frame \d+/(\d+)", final[1]).group(1))
    assert 1 <= frames < 144  # far fewer than the 3 x 48 steps of a full run
    assert client.predict(0, "standard", "grid", api_name="/show_frame")[1].startswith("Frame 1/")


def test_picking_a_model_reports_it_or_says_why_not(served):
    url, model, random_model = served
    client = Client(url, verbose=False)
    picked = client.predict(random_model, api_name="/load_model")
    assert "vocab" in picked[1] and picked[2] == ""
    assert picked[8]["visible"] is False  # the sampler knob is MLX-only
    failed = client.predict("/no/such/folder", api_name="/load_model")
    assert "No model folder" in failed[2]
    assert "vocab" in failed[1]  # a working model stays loaded and described


def test_one_generation_at_a_time_and_the_queue_position_is_reported(served):
    from gradio_client.utils import Status

    url, model, _ = served
    a, b = Client(url, verbose=False), Client(url, verbose=False)
    job_a = generate(a, "First in line.", model, max_new_tokens=512)
    while not job_a.outputs():
        time.sleep(0.02)
    job_b = generate(b, "Second in line.", model, max_new_tokens=256, steps=4)
    seen_queued = False
    while not job_a.done():
        status = job_b.status()
        if status.code == Status.IN_QUEUE and status.rank is not None:
            seen_queued = True
        assert not job_b.outputs(), "the second run started while the first was still generating"
        time.sleep(0.05)
    job_b.result()
    assert seen_queued
    assert job_b.outputs()[-1][1].startswith("Frame")


def test_an_mlx_model_runs_with_its_own_sampler(served, mlx_models):
    url, _, _ = served
    client = Client(url, verbose=False)
    folder = str(mlx_models["float32"])
    loaded = client.predict(folder, api_name="/load_model")
    assert "mlx on" in loaded[1] and loaded[2] == ""
    sampler, note = loaded[8], loaded[10]
    assert sampler["visible"] and sampler["value"] == "entropy-bound"  # MLX-only knobs appear
    assert note["visible"] and "Entropy-bound" in note["value"]
    outputs = list(generate(client, "Write a haiku.", folder, max_new_tokens=256, steps=6,
                            sampler="confidence-threshold", temperature=0.0))
    statuses = [o[1] for o in outputs]
    assert outputs[-1][4] == "" and "committed" in statuses[-1]
    assert all("remasked 0" in s for s in statuses if " step " in s)  # reveals accumulate: nothing is remasked
