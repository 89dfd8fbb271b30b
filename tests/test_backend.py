"""The transformers backend: what it reports, how it refuses bad requests, how runs end."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import backends
from backends import BackendError, BackendUnavailable, load_backend
from backends.transformers_backend import TransformersBackend
from visualizer.records import BlockRecord, RunEnd, RunStart, StepRecord
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

ROOT = Path(__file__).resolve().parent.parent


def test_info_describes_the_model(random_backend):
    info = random_backend.info
    assert info.backend == "transformers" and info.device == "cpu" and info.dtype == "float32"
    assert info.canvas_length == 256
    assert info.vocab_size == len(random_backend.tokenizer)
    assert info.eos_token_ids == (1, 106) and info.pad_token_id == 0
    assert info.max_context == 2048 and info.parameters > 100_000


def test_defaults_come_from_the_checkpoint_generation_config(random_backend):
    d = random_backend.default_settings()
    assert (d.max_new_tokens, d.max_denoising_steps, d.entropy_bound, d.t_min, d.t_max) == (256, 48, 0.1, 0.4, 0.8)
    resolved = random_backend.resolve(GenerationSettings(max_denoising_steps=5))
    assert resolved.max_denoising_steps == 5 and resolved.entropy_bound == 0.1


def test_prompt_goes_through_the_chat_template(random_backend):
    ids = random_backend.prompt_ids("Hello")
    text = random_backend.tokenizer.decode(ids)
    assert text == "<bos><|turn>user\nHello<turn|>\n<|turn>model\n"


@pytest.mark.parametrize(
    "prompt, settings, message",
    [
        ("", GenerationSettings(), "empty"),
        ("   \n", GenerationSettings(), "empty"),
        ("word " * 3000, GenerationSettings(), "context"),
        ("hi", GenerationSettings(max_new_tokens=2000), "exceeds"),
        ("hi", GenerationSettings(max_denoising_steps=0), "max denoising steps"),
        ("hi", GenerationSettings(entropy_bound=-1.0), "entropy bound"),
        ("hi", GenerationSettings(t_min=0.9, t_max=0.5), "t_max must be larger"),
        ("hi", GenerationSettings(seed=-3), "seed"),
        ("hi", GenerationSettings(sampler="confidence-threshold"), "only has the entropy-bound"),
    ],
)
def test_bad_requests_raise_a_clear_error_before_any_record(random_backend, prompt, settings, message):
    with pytest.raises(BackendError, match=message):
        next(random_backend.generate(prompt, settings))


def test_models_that_do_not_load_give_a_message(tmp_path):
    with pytest.raises(BackendError, match="No model folder"):
        load_backend(str(tmp_path / "missing"))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "config.json").write_text("{not json")
    with pytest.raises(BackendError, match="Could not load"):
        load_backend(str(tmp_path / "junk"))
    with pytest.raises(BackendError, match="needs a CUDA GPU|GPU memory"):
        load_backend(backends.REAL_CHECKPOINT)


def test_mlx_models_without_mlx_say_what_to_install(monkeypatch):
    monkeypatch.setattr(backends.registry, "mlx_installed", lambda: False)
    with pytest.raises(BackendUnavailable, match="pip install"):
        load_backend(backends.REAL_CHECKPOINT_MLX)


def test_stop_ends_the_run_between_steps_and_keeps_every_record(no_eos_backend):
    stop = threading.Event()
    trace = Trace(model=no_eos_backend.info, prompt="p")
    for record in no_eos_backend.generate("Tell me a story.", GenerationSettings(max_new_tokens=512), stop):
        trace.append(record)
        if isinstance(record, StepRecord) and record.step == 2:
            stop.set()
    assert trace.end.finish_reason == "cancelled"
    assert 3 <= len(trace.steps) <= 4  # the step in flight when stop was set may still land
    assert trace.blocks == []
    assert Trace.from_json(trace.to_json()) == trace  # a stopped run is a valid, replayable trace


def worker_threads():
    return [t for t in threading.enumerate() if t.name == "diffusiongemma-generate"]


def test_closing_the_generator_early_stops_the_worker(no_eos_backend):
    records = no_eos_backend.generate("hello", GenerationSettings(max_new_tokens=768))
    assert isinstance(next(records), RunStart)
    assert isinstance(next(records), StepRecord)
    records.close()
    deadline = time.monotonic() + 60  # against a hang only: the loop ends as soon as the worker does (a loaded box is slow)
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker_threads() == []
    assert "_denoising_step" not in vars(no_eos_backend.model)


STASH_SPY = """
import sys, threading, torch
stashed_on = []
real_stash = torch._C._stash_obj_in_tls
def spy(key, value):
    stashed_on.append(threading.current_thread().name)
    return real_stash(key, value)
torch._C._stash_obj_in_tls = spy
from backends.transformers_backend import TransformersBackend
from visualizer.settings import GenerationSettings
backend = TransformersBackend(sys.argv[1], device="cpu")
for _ in backend.generate("hello", GenerationSettings(max_denoising_steps=3)):
    pass
print(sorted(set(stashed_on)))
"""


def test_no_python_objects_are_left_in_a_worker_threads_cxx_thread_locals(random_model_dir):
    # torch frees Python objects stashed in a thread's C++ thread-locals after that thread has left
    # Python; for a generation worker ending while the interpreter shuts down, that aborted the CLI
    # ("terminate called without an active exception").  A fresh interpreter, so that no earlier
    # test has imported the module that stashes them.
    out = subprocess.run(
        [sys.executable, "-c", STASH_SPY, str(random_model_dir)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "['MainThread']"


def test_a_failure_inside_the_model_ends_the_run_with_a_message(random_backend, monkeypatch):
    calls = {"n": 0}
    original = random_backend.model.forward

    def flaky_forward(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        return original(*args, **kwargs)

    monkeypatch.setattr(random_backend.model, "forward", flaky_forward)
    records = list(random_backend.generate("hi", GenerationSettings(max_new_tokens=256)))
    end = records[-1]
    assert isinstance(end, RunEnd) and end.finish_reason == "error"
    assert "Out of GPU memory" in end.error
    assert sum(isinstance(r, StepRecord) for r in records) == 3  # what ran before the failure is kept


def test_the_record_stream_has_the_documented_shape(random_backend):
    records = list(random_backend.generate("Name three colours.", GenerationSettings(max_new_tokens=256, max_denoising_steps=6)))
    assert isinstance(records[0], RunStart) and isinstance(records[-1], RunEnd)
    steps = [r for r in records if isinstance(r, StepRecord)]
    blocks = [r for r in records if isinstance(r, BlockRecord)]
    assert [s.step for s in steps] == list(range(len(steps)))
    assert [s.steps_remaining for s in steps] == list(range(6, 6 - len(steps), -1))
    assert len(blocks) == 1 and blocks[0].steps_used == len(steps)
    assert blocks[0].stop_reason == "out_of_steps"  # random weights never converge
    for s in steps:
        assert s.accepted.dtype == bool and s.canvas.dtype == np.int32 and s.entropy_nats.dtype == np.float32
        assert s.accepted.shape == s.canvas.shape == s.argmax.shape == (256,)
    assert records[0].max_blocks == 1
    trace = Trace(model=random_backend.info, prompt="Name three colours.")
    for r in records:
        trace.append(r)
    assert trace.displayed_ids() <= set(trace.pieces)


def test_dtype_can_be_chosen(random_model_dir):
    backend = TransformersBackend(str(random_model_dir), device="cpu", dtype="bfloat16")
    assert backend.info.dtype == "bfloat16"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_a_gpu_is_a_clear_error(random_model_dir):
    with pytest.raises(BackendError, match="no CUDA GPU"):
        TransformersBackend(str(random_model_dir), device="cuda")


def test_the_tokenizer_meets_the_backend_contract(random_backend):
    from backends.base import Tokenizer

    assert isinstance(random_backend.tokenizer, Tokenizer)  # what generate_rows and text.py call on it
    assert not isinstance(object(), Tokenizer)


def test_a_backend_around_a_model_built_elsewhere_runs_as_the_loaded_one(random_backend):
    """`TransformersBackend.from_model` (what the benchmarks use for a model no folder holds)."""
    from backends.transformers_backend import TransformersBackend

    settings = GenerationSettings(seed=4, max_new_tokens=256, max_denoising_steps=3)
    built = TransformersBackend.from_model(random_backend.model, random_backend.tokenizer, random_backend.info)
    ours, theirs = (list(b.generate("Name a colour.", settings))[-1] for b in (built, random_backend))
    assert ours.error is None and np.array_equal(ours.sequence, theirs.sequence)
    assert built.on_model_thread(lambda: 7).result() == 7
