"""Shared fixtures: small real DiffusionGemma models built on the fly (nothing is downloaded)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _no_gpu() -> bool:
    import torch

    return not torch.cuda.is_available()


# Without a GPU, Triton's interpreter runs the capture's CUDA kernels on CPU tensors
# (tests/test_logit_summary_triton.py). It works only if it is on when triton is first imported, and
# torch.compile imports triton wherever it is installed, so it is switched on here, before any test runs.
if _no_gpu():
    os.environ.setdefault("TRITON_INTERPRET", "1")


# ---- what a test needs (the markers in pyproject.toml): the fast loop leaves out models, browsers and processes ----
# A test that takes one of these fixtures runs a model or starts processes, whatever its file says.
MODEL_FIXTURES = {"random_model_dir", "no_eos_model_dir", "random_backend", "no_eos_backend", "mlx_models"}
PROCESS_FIXTURES = {"no_leftover_processes"}
KINDS = {"model", "app", "browser", "processes"}


def pytest_collection_modifyitems(items):
    for item in items:
        if MODEL_FIXTURES & set(item.fixturenames):
            item.add_marker("model")
        if PROCESS_FIXTURES & set(item.fixturenames):
            item.add_marker("processes")
        if not KINDS & {mark.name for mark in item.iter_markers()}:
            item.add_marker("unit")


@pytest.fixture(scope="session", autouse=True)
def _two_threads():
    import torch

    # CI and this machine have two cores; more threads only add noise. Mutation testing asks for one
    # (tools/mutation.py): on cores other work shares, two threads wait on each other.
    torch.set_num_threads(int(os.environ.get("TEST_TORCH_THREADS", "2")))


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory):
    """The deterministic random-weight model (backends/random_model.py)."""
    from backends.random_model import build_random_model

    return build_random_model(tmp_path_factory.mktemp("random-tiny"))


@pytest.fixture(scope="session")
def no_eos_model_dir(tmp_path_factory):
    """The random model with its EOS logits pinned to zero, so runs always fill every block.

    Random weights put an EOS somewhere in about half of all 256-token canvases; tests that need
    several blocks need control over that, so the tied embedding rows of the EOS ids are zeroed.
    """
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    from backends.random_model import build_random_model
    from training.tokenizer import EOS_TOKEN_IDS

    folder = build_random_model(tmp_path_factory.mktemp("random-no-eos"))
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(folder)
    with torch.no_grad():
        model.get_output_embeddings().weight[EOS_TOKEN_IDS] = 0.0
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def random_backend(random_model_dir):
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(str(random_model_dir), device="cpu")


@pytest.fixture(scope="session")
def no_eos_backend(no_eos_model_dir):
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(str(no_eos_model_dir), device="cpu")


@pytest.fixture(scope="module")
def page(no_eos_model_dir):
    """The app on the no-EOS random model in headless Chromium (tests/browser.py), one per test module: a
    module that needs another model or a first click overrides it (test_browser_samplers, test_browser_layers)."""
    from tests.browser import app_in_chromium

    with app_in_chromium(no_eos_model_dir) as page:
        yield page


def build_mlx_models(base):
    """The transformers source and its float32 and 4-bit MLX folders, built once per test session."""
    from safetensors.numpy import load_file, save_file

    from backends.random_model import build_random_model
    from training.convert_mlx import convert_to_mlx

    folders = {"transformers": base / "transformers", "float32": base / "float32", "4-bit": base / "4bit"}
    if all((f / "config.json").is_file() for f in folders.values()):
        return folders
    source = build_random_model(folders["transformers"])
    weights = load_file(source / "model.safetensors")
    weights["model.decoder.embed_tokens.weight"] *= 60  # tied to the output: 60x sharper predictions
    save_file(weights, source / "model.safetensors", metadata={"format": "pt"})
    convert_to_mlx(source, folders["float32"])
    convert_to_mlx(source, folders["4-bit"], bits=4)
    return folders


@pytest.fixture(scope="session")
def mlx_models(tmp_path_factory):
    return build_mlx_models(tmp_path_factory.getbasetemp() / "mlx-models")


# ---- tests that start processes (torchrun, the app): each ends with nothing of its own left running ----
PROCESS_TAG_ENV = "VISUALIZER_TEST_PROCESS_TAG"


def _tagged(tag: str) -> list:
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(PROCESS_TAG_ENV) == tag:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture
def no_leftover_processes(monkeypatch, request):
    """Fails a test that leaves a process it started running, and ends it, so no later test meets it.

    Every process the test starts inherits a tag in its environment (also the ones torchrun starts,
    and any that outlive their parent and are re-parented), so a leftover is found by the tag, not by
    the process tree. A process is given 15 s to finish exiting after the test."""
    import psutil

    tag = f"{request.node.nodeid}:{os.getpid()}"
    monkeypatch.setenv(PROCESS_TAG_ENV, tag)
    yield
    left = _tagged(tag)
    _, alive = psutil.wait_procs(left, timeout=15)
    named = []
    for process in alive:
        try:
            named.append(" ".join(process.cmdline()[:8]))
            process.kill()
        except psutil.NoSuchProcess:
            pass
    assert not named, f"the test left processes running: {named}"
