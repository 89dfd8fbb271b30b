"""Faults, injected into a real launched app: a run that raises mid-way (a CUDA out-of-memory
error included), a client that goes away mid-run, and a model that fails to load.  Each must leave
the app serving the next visitor, give the affected visitor one line, and keep the partial run
viewable and exportable."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError

from webapp import app as app_module
from webapp import hosting
from backends import ModelChoice
from backends.base import BackendError
from backends.cache import LoadedModels
from backends.transformers_backend import TransformersBackend
from tests.app_api import finished_run, run_message, served_app, submit_generate

pytestmark = pytest.mark.app


FAULT_AT_STEP = 5


class FaultyBackend(TransformersBackend):
    """The real transformers backend whose model raises `fault` at its FAULT_AT_STEP-th forward
    pass of every run: the error comes from inside the model, where a real one would."""

    def __init__(self, source: str, fault: BaseException):
        super().__init__(source, device="cpu")
        self.fault, self.calls = fault, 0
        self.model.get_output_embeddings().register_forward_pre_hook(self._maybe_fail)  # once per step

    def generate_rows(self, prompts, settings, stop=None):  # every way of running goes through it
        self.calls = 0
        yield from super().generate_rows(prompts, settings, stop)

    def _maybe_fail(self, module, args):
        self.calls += 1
        if self.calls == FAULT_AT_STEP:
            raise self.fault


@pytest.fixture(scope="module")
def served(no_eos_model_dir):
    good = str(no_eos_model_dir)
    faults = {
        "raises": RuntimeError("injected failure in the model"),
        "out-of-memory": torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    }

    def load(source):
        if source in faults:
            return FaultyBackend(good, faults[source])
        if source == "broken":
            raise BackendError("Could not load broken as a DiffusionGemma model: injected load failure")
        return TransformersBackend(source, device="cpu")

    choices = [ModelChoice("Good", good, "transformers", True)] + [
        ModelChoice(name, name, "transformers", True) for name in (*faults, "broken")
    ]
    mode = hosting.Hosting(True, hosting.Limits.hosted(), tuple(choices))
    original_models = app_module.MODELS
    app_module.MODELS = LoadedModels(keep=4, load=load)
    with served_app(app_module.build_app(hosting_mode=mode)) as url:
        yield url
    app_module.MODELS = original_models


def generate(client, model, max_new_tokens=256, steps=8):
    return submit_generate(client, "Tell me a story.", model, max_new_tokens, steps)


def next_visitor_is_served(url):
    client = Client(url, verbose=False)
    text, message = finished_run(client, generate(client, "Good", steps=4))
    assert message == "" and text


def partial_run_is_viewable_and_exportable(client, frames_at_least=1):
    html, status, _ = client.predict(0, "standard", "grid", api_name="/show_frame")
    total = int(status.split("/")[1].split(" ")[0])
    assert status.startswith("Frame 1/") and total >= frames_at_least and "<" in html
    files, preview, message = client.predict(["gif"], "", 150, 2500, None, True, "standard", "grid", api_name="/export")
    assert message == "" and files[0].endswith(".gif")
    saved, message = client.predict(api_name="/save_trace")
    assert message == "" and saved[0].endswith(".json")


@pytest.mark.parametrize("model, expected", [
    ("raises", "Generation failed: RuntimeError: injected failure in the model"),
    ("out-of-memory", "Out of GPU memory during generation"),
])
def test_a_run_that_fails_midway_says_so_in_one_line_and_keeps_its_steps(served, model, expected):
    client = Client(served, verbose=False)
    _, message = finished_run(client, generate(client, model))
    assert message.startswith(expected) and "\n" not in message and "Traceback" not in message
    partial_run_is_viewable_and_exportable(client, frames_at_least=FAULT_AT_STEP - 2)
    next_visitor_is_served(served)


def test_a_client_that_leaves_mid_run_frees_the_model(served):
    client = Client(served, verbose=False)
    job = generate(client, "Good", max_new_tokens=512, steps=48)  # long: 96 steps
    while len(job.outputs()) < 3:
        time.sleep(0.02)
    job.cancel()  # what a closed tab does to its event
    client.close()
    for _ in range(400):  # the run's worker thread ends at its next step
        if not any(t.name == "diffusiongemma-generate" for t in threading.enumerate()):
            break
        time.sleep(0.05)
    assert not any(t.name == "diffusiongemma-generate" for t in threading.enumerate())
    next_visitor_is_served(served)


def test_a_cancelled_run_stays_viewable_for_its_visitor(served):
    client = Client(served, verbose=False)
    job = generate(client, "Good", max_new_tokens=512, steps=48)
    while len(job.outputs()) < 3:
        time.sleep(0.02)
    job.cancel()
    for _ in range(400):
        if not any(t.name == "diffusiongemma-generate" for t in threading.enumerate()):
            break
        time.sleep(0.05)
    partial_run_is_viewable_and_exportable(client)
    next_visitor_is_served(served)


def test_a_model_that_fails_to_load_leaves_the_app_serving(served):
    client = Client(served, verbose=False)
    with pytest.raises(AppError, match="^Could not load broken as a DiffusionGemma model: injected load failure$"):
        generate(client, "broken").result()  # the API client's call fails with the page's line (issue 58)
    assert run_message(client)[1] == "Could not load broken as a DiffusionGemma model: injected load failure"
    picked = client.predict("broken", api_name="/load_model")
    assert "injected load failure" in picked[2] and "vocab" in picked[1]  # the working model stays described
    next_visitor_is_served(served)
