"""Hosted mode, launched for real and driven through gradio_client as a visitor would: the
allowlist, the caps, the check that runs before the model queue, and the end of a session."""

from __future__ import annotations

import http.server
import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError, ValidationError

from webapp import app as app_module
from webapp import app_run, hosting
from backends import REAL_CHECKPOINT, ModelChoice
from backends.lookup import forget_answers, source_problem
from tests.app_api import finished_run, served_app, submit_generate
from tests.app_api import submit_generate as generate  # 256 tokens, 4 steps: hosted caps are low

pytestmark = pytest.mark.app


LIMITS = hosting.Limits(knob_caps={"max_new_tokens": 512, "max_denoising_steps": 8, "layers": 2, "pins": 2}, max_upload_mb=1, max_export_frames=5, max_prompt_chars=2000)


def refusal(job) -> str:
    """The message of a request refused before the queue, by the app's validator (HTTP 422, which gradio_client
    raises with the message; the generate event leaves Gradio's own checks, a bare 400 there, to it: hosting.py)."""
    try:
        job.result()
    except ValidationError as exc:
        return str(exc)
    raise AssertionError("the request was not refused")


@pytest.fixture(scope="module")
def hosted(no_eos_model_dir):
    os.environ["GRADIO_HEARTBEAT_INTERVAL"] = "0.5"  # a closed client is noticed in a second, not 15 s
    label = "Test model (built in)"
    mode = hosting.Hosting(True, LIMITS, (ModelChoice(label, str(no_eos_model_dir), "transformers", True),))
    with served_app(app_module.build_app(hosting_mode=mode), max_file_size=LIMITS.max_file_size) as url:
        yield url, label
    del os.environ["GRADIO_HEARTBEAT_INTERVAL"]


def test_paths_and_unknown_ids_are_refused_at_once_while_a_valid_run_goes_on(hosted, tmp_path):
    url, label = hosted
    visitor, attacker = Client(url, verbose=False), Client(url, verbose=False)
    running = generate(visitor, "Tell me a long story.", label, max_new_tokens=512, steps=8)
    while not running.outputs():
        time.sleep(0.02)
    for hostile in ("/etc", str(tmp_path), "../../secrets", "google/gemma-2b", "someone/400B-model", "", "x" * 5000):
        assert "This server runs only the models in its list" in refusal(generate(attacker, "hi", hostile))
        assert not running.done()  # refused without waiting for the model queue, which the run holds
    text, message = finished_run(visitor, running)
    assert message == "" and text


def test_the_picker_offers_only_the_allowlist(hosted, no_eos_model_dir):
    url, label = hosted
    client = Client(url, verbose=False)
    with pytest.raises(AppError, match="not in the list of choices"):  # Gradio's own dropdown check
        client.predict("/etc/passwd", api_name="/load_model")
    handlers = app_module.Handlers(hosting.Hosting(True, LIMITS, (ModelChoice(label, str(no_eos_model_dir), "transformers", True),)))
    assert "runs only the models in its list" in handlers.select_model("/etc/passwd", label)["model_message"]  # the app's own
    assert client.predict(label, api_name="/load_model")[2] == ""


def test_caps_are_refused_with_a_message(hosted):
    url, label = hosted
    client = Client(url, verbose=False)
    for tokens, steps, message in ((4096, 4, "caps max new tokens at 512"), (256, 200, "caps max denoising steps at 8")):
        assert message in refusal(generate(client, "hi", label, max_new_tokens=tokens, steps=steps))  # the sliders' maximum
    # a megabyte of prompt: refused by the validator, by its length, before the queue and the tokenizer
    assert "prompts of up to 2,000 characters (this one has 1,000,000)" in refusal(generate(client, "x" * 10**6, label))
    list(generate(client, "Name a colour.", label, max_new_tokens=256, steps=8))  # 8 steps: more than 5 frames
    files, preview, message = client.predict(["gif"], "", 150, 2500, None, True, "standard", "grid", api_name="/export")
    assert files is None and "at most 5 frames" in message
    list(generate(client, "Name a colour.", label, max_new_tokens=256, steps=3))
    files, preview, message = client.predict(["gif"], "", 150, 2500, None, True, "standard", "grid", api_name="/export")
    assert message == "" and files[0].endswith(".gif")


def test_layers_and_pins_over_the_caps_are_refused_before_the_queue(hosted):
    url, label = hosted
    client = Client(url, verbose=False)
    over = {
        "at most 2 layers a run (asked: '0,1,2')": dict(layers="0,1,2"),
        "at most 2 layers a run (asked: 'all')": dict(layers="all"),  # every layer of a model unknown before the queue
        "at most 2 pins a run": dict(pins="1=a\n2=b\n3=c"),
        "pins of up to 2,000 characters (these have 100,004)": dict(pins="0=" + "x" * 10**5 + "\n\n"),
    }
    for message, knobs in over.items():
        assert message in refusal(submit_generate(client, "hi", label, 256, 4, **knobs)), knobs
    text, message = finished_run(client, submit_generate(client, "Name a colour.", label, 256, 4, layers="0,1", pins="2=blue\n9=sea"))
    assert message == "" and text  # at the caps: runs
    assert "layers up to 2" in hosting.hosted_note(LIMITS) and "pins up to 2" in hosting.hosted_note(LIMITS)


def test_uploads_over_the_limit_are_refused_by_the_server(hosted, tmp_path):
    """A raw HTTP upload, as any script can send it: gradio_client refuses a big file on its own side
    before sending anything, so only a raw request shows that the server itself holds the cap."""
    url, _ = hosted
    cap = LIMITS.max_upload_mb * 1024 * 1024  # Gradio counts "1mb" as 1 MiB

    def upload(size: int) -> httpx.Response:
        return httpx.post(f"{url}gradio_api/upload", files={"files": ("big.json", b" " * size, "application/json")}, timeout=120)

    over = upload(cap + 10)
    assert over.status_code == 413 and "maximum" in over.text.lower(), (over.status_code, over.text[:200])
    under = upload(cap - 4096)  # the same request under the cap goes through: it was the size that was refused
    assert under.status_code == 200 and under.json()[0].endswith("big.json")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (cap + 10))
    with pytest.raises(Exception, match="(?i)file size|too large|413|exceeds"):  # and the Python client says so too
        Client(url, verbose=False).predict(handle_file(str(big)), api_name="/load_trace")


def test_a_closed_session_frees_its_run_and_folder(hosted):
    url, label = hosted
    client = Client(url, verbose=False)
    list(generate(client, "Name a colour.", label))
    client.predict(api_name="/save_trace")
    sessions = dict(app_module.SESSIONS._sessions)
    session = sessions[client.session_hash]
    folder = Path(session.files.name)
    assert session.trace is not None and any(folder.iterdir())
    client.close()  # ends the heartbeat: Gradio runs demo.unload
    for _ in range(600):
        if not folder.exists():
            break
        time.sleep(0.05)
    assert not folder.exists() and session.trace is None
    assert client.session_hash not in app_module.SESSIONS._sessions


# ---- the mode itself ---------------------------------------------------------------------------
def test_hosted_mode_turns_on_on_a_space_and_takes_the_owners_models(monkeypatch):
    monkeypatch.delenv("DV_HOSTED", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert not hosting.Hosting.from_environment().hosted
    monkeypatch.setenv("SPACE_ID", "someone/diffusion-visualizer")
    monkeypatch.setenv("DV_EXTRA_MODELS", "My fine-tune=someone/dg-finetune, other/model")
    mode = hosting.Hosting.from_environment()
    assert mode.hosted and mode.limits.knob_caps == {"max_new_tokens": 1024, "max_denoising_steps": 64, "pins": 8, "layers": 4, "kl_to_final": 0}  # the knob table's caps
    labels = {c.label: c.source for c in mode.choices}
    assert labels["My fine-tune"] == "someone/dg-finetune" and labels["other/model"] == "other/model"
    assert REAL_CHECKPOINT not in labels.values()  # this machine (no 70 GB GPU) cannot run it
    assert mode.choice_for("/etc") is None and mode.choice_for("third/party") is None
    monkeypatch.setenv("DV_MAX_NEW_TOKENS", "lots")
    with pytest.raises(SystemExit, match="DV_MAX_NEW_TOKENS"):
        hosting.Limits.hosted()


def test_trust_remote_code_is_never_passed(monkeypatch, random_model_dir, mlx_models):
    """Every from_pretrained / mlx-vlm load the backends make goes through these entry points."""
    import mlx_vlm.utils
    import transformers

    from backends import load_backend

    calls = []

    def spy(owner, name):
        original = getattr(owner, name)

        def recording(*args, **kwargs):
            calls.append((name, kwargs))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recording)

    for owner in (transformers.AutoTokenizer, transformers.AutoProcessor, transformers.DiffusionGemmaForBlockDiffusion,
                  transformers.AutoConfig):
        spy(owner, "from_pretrained")
    spy(mlx_vlm.utils, "load_processor")
    load_backend(str(random_model_dir))
    load_backend(str(mlx_models["float32"])).close()
    assert {name for name, _ in calls} >= {"from_pretrained", "load_processor"}
    assert not any(kwargs.get("trust_remote_code") for _, kwargs in calls), calls
    source = "\n".join(p.read_text() for p in Path(__file__).resolve().parent.parent.glob("backends/*.py"))
    assert source.count("trust_remote_code") == source.count("trust_remote_code=False")


# ---- the model check before the queue ----------------------------------------------------------
class CountingHub(http.server.BaseHTTPRequestHandler):
    """A stand-in Hugging Face Hub: every repo is unknown; counts the requests it gets."""

    requests: list[str] = []

    def do_HEAD(self):  # noqa: N802
        CountingHub.requests.append(self.path)
        self.send_response(404)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("X-Error-Message", "Repository not found")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_an_unknown_hub_id_costs_one_head_request_and_is_remembered(monkeypatch):
    from huggingface_hub import constants

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    forget_answers()
    CountingHub.requests.clear()
    try:
        for _ in range(8):  # a burst of the same bad request
            assert "No model nobody/nothing" in source_problem("nobody/nothing")
        assert len(CountingHub.requests) == 1 and CountingHub.requests[0].endswith("/config.json")
    finally:
        server.shutdown()
        forget_answers()


def test_offline_means_no_network_at_all(monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # would refuse, if it were asked
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    forget_answers()
    assert "HF_HUB_OFFLINE" in source_problem("someone/uncached-model")
    assert "No model folder" in source_problem("/no/such/folder")
    assert "neither a model folder" in source_problem("not a valid id!")
    forget_answers()


# ---- ZeroGPU ------------------------------------------------------------------------------------
def test_on_zero_gpu_records_cross_a_process_boundary_and_stop_works_from_here(monkeypatch, no_eos_backend):
    """On ZeroGPU the run happens in `spaces.GPU`'s forked worker: its arguments and records are
    pickled, and it cannot see this process's stop event.  Simulated here with a pickling round trip."""
    import pickle

    from backends.base import BackendError
    from visualizer.records import RunEnd, StepRecord
    from visualizer.settings import GenerationSettings
    from visualizer.trace import Trace

    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setattr(app_run, "MODELS", app_run.LoadedModels(load=lambda source, **options: no_eos_backend))
    worker = app_run._generate_on_gpu

    def through_the_worker(*args):
        for record in worker(*pickle.loads(pickle.dumps(args))):
            yield pickle.loads(pickle.dumps(record))

    monkeypatch.setattr(app_run, "_generate_on_gpu", through_the_worker)
    settings = GenerationSettings(max_new_tokens=512, max_denoising_steps=8)
    stop = threading.Event()
    trace = Trace(model=no_eos_backend.info, prompt="Tell me a story.")
    for batch in app_run.run_live(no_eos_backend, "the-model", "Tell me a story.", settings, trace=trace, stop=stop):
        if any(isinstance(record, StepRecord) and record.step == 2 for record in batch):
            stop.set()  # Stop pressed: the stream is closed and the run ends here
    assert isinstance(trace.end, RunEnd) and trace.end.finish_reason == "cancelled"
    assert 3 <= len(trace.steps) < 16  # the steps recorded before Stop are kept; the worker ran no further
    with pytest.raises(BackendError, match="empty"):  # a bad request is refused here, not in the worker
        app_run.run_live(no_eos_backend, "the-model", " ", settings, trace=Trace(no_eos_backend.info, " "), stop=stop)
    with pytest.raises(BackendError, match="torch.compile"):
        app_run.run_live(no_eos_backend, "the-model", "hi", settings.replace(compiled=True), trace=Trace(no_eos_backend.info, "hi"), stop=stop)


def test_the_hosted_note_names_only_the_caps_that_are_set():
    note = hosting.hosted_note(hosting.Limits(knob_caps={"max_new_tokens": 256}))  # the other caps unset: no "None" shown
    assert "max new tokens up to 256" in note and "None" not in note and "characters" not in note
    assert "prompts up to 8,000 characters" in hosting.hosted_note(hosting.Limits.hosted())
    assert "no record distance to final" in hosting.hosted_note(hosting.Limits.hosted())  # a switch capped at 0


def test_a_switch_capped_at_zero_is_refused_and_allowed_when_the_owner_lifts_it(monkeypatch):
    # --kl-to-final runs the model twice: a public server does not, unless its owner says so (DV_KL_TO_FINAL=1)
    limits = hosting.Limits.hosted()
    assert limits.knob_problem("kl_to_final", True) == (
        "This server does not record the KL to the final step: a self-hosted copy does.")
    assert limits.knob_problem("kl_to_final", False) is None
    monkeypatch.setenv("DV_KL_TO_FINAL", "1")
    assert hosting.Limits.hosted().knob_problem("kl_to_final", True) is None


def test_a_public_server_offers_other_backends_samplers_for_its_built_in_models_only(no_eos_model_dir):
    """Another backend is a second copy of the weights: fine for the small built-in models, not for the 26B."""
    from backends import ModelChoice

    small = ModelChoice("Small", str(no_eos_model_dir), "transformers", True)
    big = ModelChoice("Big", str(no_eos_model_dir), "transformers", False)
    handlers = app_module.Handlers(hosting.Hosting(True, LIMITS, (small, big)))
    assert handlers.samplers_for(small) == {"entropy-bound": None, "discrete-ddim": "diffusers", "block-refinement": "diffusers"}
    assert handlers.samplers_for(big) == {"entropy-bound": None}
    desktop = app_module.Handlers(hosting.Hosting(False, LIMITS, (small, big)))
    assert "discrete-ddim" in desktop.samplers_for(big)
