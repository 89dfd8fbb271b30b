"""The MLX backend: records, traces and states like the transformers backend; its thread, stop
and close; its errors; the converter behind its test models.

Runs on Linux CPU with mlx[cpu]==0.32.4 and mlx-vlm==0.7.10 on the small MLX models that
test_mlx_capture builds (the project's random model, embeddings sharpened, float32 and 4-bit).
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading

import numpy as np
import pytest

from backends import is_mlx_model, load_backend
from backends.base import BackendError
from backends.mlx_backend import MLXBackend
from visualizer.records import RunEnd, RunStart, StepRecord
from visualizer.settings import GenerationSettings
from visualizer.states import State, frame_refs, frame_state
from visualizer.trace import Trace

from tests.command_line import cli

pytestmark = pytest.mark.model


PROMPT = "Write a six-line poem about the ocean."
FAST = GenerationSettings(seed=0, max_denoising_steps=6, max_new_tokens=256)


@pytest.fixture(scope="module")
def backend(mlx_models):
    backend = load_backend(str(mlx_models["float32"]), backend="mlx")
    yield backend
    backend.close()


def record(backend, settings, prompt=PROMPT, stop=None) -> Trace:
    trace = Trace(model=backend.info, prompt=prompt)
    for item in backend.generate(prompt, settings, stop):
        trace.append(item)
    return trace


def entropy_bound_accepts(entropy: np.ndarray, bound: float) -> np.ndarray:
    """transformers' / mlx-vlm's rule, written out in numpy."""
    order = np.argsort(entropy, kind="stable")
    sorted_entropy = entropy[order]  # float32 throughout, as the sampler computes it
    keep = np.cumsum(sorted_entropy, dtype=np.float32) - np.maximum.accumulate(sorted_entropy) <= np.float32(bound)
    accepted = np.zeros_like(keep)
    accepted[order] = keep
    return accepted


# ---- records, traces, states ---------------------------------------------------------------
def test_recorded_trace_saves_loads_and_classifies(backend, tmp_path):
    trace = record(backend, FAST.replace(max_new_tokens=3 * 256, seed=1))
    path = trace.save(tmp_path / "run.json")
    loaded = Trace.load(path)  # validates order, sizes, pieces, EOS/pad layout, sequence
    assert loaded.to_dict()["steps"] == trace.to_dict()["steps"]
    assert loaded.settings.sampler == "entropy-bound" and loaded.settings.temperature == 1.0
    assert loaded.max_blocks == 3 and len(loaded.blocks) >= 1
    refs = frame_refs(loaded)
    assert len(refs) == len(loaded.steps) + len(loaded.blocks)
    for i, ref in enumerate(refs):
        state = frame_state(loaded, i, refs)
        if ref.kind == "commit":
            assert np.all(state.states[ref.block] == State.COMMITTED)
            assert np.array_equal(state.token_ids[ref.block], loaded.blocks[ref.index].tokens)
    assert np.array_equal(loaded.end.sequence, np.concatenate([b.tokens for b in loaded.blocks]))
    assert loaded.end.text == backend.tokenizer.decode(loaded.end.sequence.tolist(), skip_special_tokens=True)


def test_steps_hold_what_the_entropy_bound_sampler_decided(backend):
    settings = FAST.replace(entropy_bound=0.5)
    trace = record(backend, settings)
    steps = trace.block_steps(0)
    assert [s.steps_remaining for s in steps] == list(range(6, 6 - len(steps), -1))
    vocab = backend.info.vocab_size
    for s in steps:
        assert np.all(s.entropy_nats >= 0) and np.all(s.entropy_nats <= math.log(vocab) + 1e-3)
        assert s.wall_time_s > 0
    for s in steps[:-1]:  # the last step samples nothing (below)
        # The recorded entropy is the one the sampler thresholded: its rule gives the recorded mask.
        assert np.array_equal(s.accepted, entropy_bound_accepts(s.entropy_nats, 0.5))
    last, before = steps[-1], steps[-2]
    assert last.steps_remaining == 1
    assert np.array_equal(last.accepted, before.accepted) and np.array_equal(last.canvas, before.canvas)
    block = trace.blocks[0]
    committed = last.argmax.copy()
    if block.eos_position is not None:
        committed[block.eos_position + 1 :] = backend.info.pad_token_id
    assert np.array_equal(block.tokens, committed)
    assert block.stop_reason == "out_of_steps" and block.steps_used == len(steps)
    refs = frame_refs(trace)
    remasked = sum(frame_state(trace, i, refs).count(State.REMASKED) for i in range(len(refs)))
    assert remasked > 0  # entropy-bound recomputes its set: accepted tokens do turn back into noise


def test_greedy_steps_accept_the_argmax(backend):
    trace = record(backend, FAST.replace(temperature=0.0))
    for s in trace.steps:
        if s.steps_remaining > 1:  # the last step repeats the previous decision
            assert np.array_equal(s.canvas[s.accepted], s.argmax[s.accepted])


def test_confidence_threshold_reveals_accumulate_and_never_remask(backend):
    budget = 32  # this model reveals every position in about 20 steps
    trace = record(backend, FAST.replace(sampler="confidence-threshold", max_denoising_steps=budget, max_new_tokens=512))
    assert any(b.stop_reason == "converged" for b in trace.blocks)  # every position revealed early
    for block in trace.blocks:
        steps = trace.block_steps(block.block)
        for before, now in zip(steps, steps[1:]):
            assert np.all(now.accepted[before.accepted])  # cumulative
            assert np.array_equal(now.canvas[before.accepted], before.canvas[before.accepted])  # fixed tokens
        if block.stop_reason == "converged":
            assert steps[-1].accepted.all() and block.steps_used < budget
    refs = frame_refs(trace)
    assert all(frame_state(trace, i, refs).count(State.REMASKED) == 0 for i in range(len(refs)))


def test_mlx_trace_matches_a_transformers_trace_of_the_same_model(backend, mlx_models):
    from backends.transformers_backend import TransformersBackend

    transformers = TransformersBackend(str(mlx_models["transformers"]))
    try:
        assert backend.prompt_ids(PROMPT) == transformers.prompt_ids(PROMPT)
        ours, theirs = record(backend, FAST), record(transformers, FAST)
    finally:
        transformers.close()
    assert ours.start.settings.keys() == theirs.start.settings.keys()
    assert np.array_equal(ours.start.prompt_ids, theirs.start.prompt_ids)
    for field in ("canvas_length", "vocab_size", "eos_token_ids", "pad_token_id", "max_context"):
        assert getattr(ours.model, field) == getattr(theirs.model, field), field
    assert ours.max_blocks == theirs.max_blocks
    assert Trace.from_json(ours.to_json()).to_dict().keys() == Trace.from_json(theirs.to_json()).to_dict().keys()
    # and the records say the same things: step for step the same counters and arrays (shape and
    # dtype), the same candidates per position, every entropy a valid one, the block committing its
    # last argmax. (The tokens themselves differ: the two libraries draw different random canvases.)
    assert [(s.block, s.step, s.steps_remaining) for s in ours.steps] == [(s.block, s.step, s.steps_remaining) for s in theirs.steps]
    assert [(b.block, b.steps_used) for b in ours.blocks] == [(b.block, b.steps_used) for b in theirs.blocks]
    for trace in (ours, theirs):
        for step in trace.steps:
            for name in ("accepted", "canvas", "argmax", "entropy_nats", "topk_ids", "topk_probs"):
                mine, other = getattr(step, name), getattr(theirs.steps[0], name)
                assert (mine.shape, mine.dtype) == (other.shape, other.dtype), (trace.model.backend, name)
            assert np.all(step.entropy_nats >= 0) and np.all(step.entropy_nats <= np.log(trace.model.vocab_size) + 1e-3)
            np.testing.assert_array_equal(step.topk_ids[:, 0], step.argmax)
        for block in trace.blocks:
            np.testing.assert_array_equal(trace.block_steps(block.block)[-1].argmax[: len(block.tokens)], block.tokens)


def test_model_info_and_defaults(mlx_models, backend):
    info = backend.info
    assert (info.backend, info.device, info.dtype, info.canvas_length) == ("mlx", "cpu", "float32", 256)
    from backends.random_model import load_project_tokenizer

    assert info.vocab_size == len(load_project_tokenizer())
    assert info.eos_token_ids == (1, 106) and info.pad_token_id == 0 and info.max_context == 2048
    defaults = backend.default_settings()
    assert (defaults.max_new_tokens, defaults.max_denoising_steps, defaults.entropy_bound) == (256, 48, 0.1)
    assert (defaults.t_min, defaults.t_max, defaults.sampler, defaults.temperature) == (0.4, 0.8, "entropy-bound", 1.0)
    quantized = MLXBackend(str(mlx_models["4-bit"]))
    try:
        assert quantized.info.dtype == "4-bit"
        assert quantized.info.parameters == info.parameters > 0  # counted unpacked, scales left out
    finally:
        quantized.close()
    names = [spec.name for spec in backend.capabilities.samplers]
    assert names == ["entropy-bound", "confidence-threshold"] and all(spec.note for spec in backend.capabilities.samplers)


def test_settings_record_what_was_used(backend):
    trace = record(backend, FAST.replace(compiled=True, max_new_tokens=300))
    assert trace.start.settings["compiled"] is False  # a transformers option: not used here
    assert trace.max_blocks == 2  # 300 tokens round up to whole canvases, as on transformers


# ---- the worker thread, stop and close --------------------------------------------------------
def test_all_mlx_work_runs_on_the_backends_one_thread(backend, monkeypatch):
    threads = []
    original = backend.model.diffusion_decoder_logits

    def spy(*args, **kwargs):
        threads.append(threading.get_ident())
        return original(*args, **kwargs)

    monkeypatch.setattr(backend.model, "diffusion_decoder_logits", spy)
    callers = [threading.Thread(target=lambda: record(backend, FAST.replace(max_denoising_steps=2))) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert len(threads) == 4 and set(threads) == {backend._worker.ident}
    assert backend._worker.ident not in {c.ident for c in callers} | {threading.get_ident()}


def test_stop_event_cancels_between_steps_and_keeps_the_steps(backend):
    stop = threading.Event()
    trace = Trace(model=backend.info, prompt=PROMPT)
    for item in backend.generate(PROMPT, FAST.replace(max_denoising_steps=20), stop):
        trace.append(item)
        if isinstance(item, StepRecord) and item.step == 2:
            stop.set()
    assert trace.end.finish_reason == "cancelled" and trace.end.error is None
    assert 3 <= len(trace.steps) < 20 and not trace.blocks
    Trace.from_json(trace.to_json())  # a cancelled trace still loads
    assert record(backend, FAST).end.finish_reason in ("eos", "length")  # the worker serves the next run


def test_closing_the_generator_early_stops_the_run(backend, monkeypatch):
    calls = []
    original = backend.model.diffusion_decoder_logits
    monkeypatch.setattr(backend.model, "diffusion_decoder_logits", lambda *a, **k: calls.append(1) or original(*a, **k))
    run = backend.generate(PROMPT, FAST.replace(max_denoising_steps=100, max_new_tokens=4 * 256))
    assert isinstance(next(run), RunStart) and isinstance(next(run), StepRecord)
    run.close()  # returns once the worker has left the run
    done = len(calls)
    assert done < 100  # 400 steps were asked for; the bounded queue holds at most 64
    assert record(backend, FAST.replace(max_denoising_steps=2)).end.finish_reason in ("eos", "length")
    assert len(calls) == done + 2  # nothing of the closed run ran on afterwards


def test_an_error_in_the_run_ends_it_with_a_message(backend, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("[metal] kernel failed\nsecond line")

    monkeypatch.setattr(backend.model, "diffusion_decoder_logits", broken)
    records = list(backend.generate(PROMPT, FAST))
    assert isinstance(records[0], RunStart) and isinstance(records[-1], RunEnd)
    assert records[-1].finish_reason == "error"
    assert records[-1].error == "Generation failed: RuntimeError: [metal] kernel failed"


def test_close_ends_the_worker_thread(mlx_models):
    backend = MLXBackend(str(mlx_models["float32"]))
    worker = backend._worker._thread
    backend.close()
    assert not worker.is_alive() and backend.model is None
    with pytest.raises(BackendError, match="closed"):
        next(backend.generate(PROMPT, FAST))
    backend.close()  # twice is harmless


# ---- errors a user can cause ------------------------------------------------------------------
def test_bad_requests_raise_one_line_backend_errors(backend):
    for prompt, settings, message in [
        ("  ", FAST, "prompt is empty"),
        (PROMPT, FAST.replace(sampler="greedy"), "sampler must be one of"),
        (PROMPT, FAST.replace(temperature=-1.0), "temperature must be"),
        (PROMPT, FAST.replace(max_new_tokens=4096), "exceeds this model's context"),
    ]:
        with pytest.raises(BackendError, match=message) as error:
            next(backend.generate(prompt, settings))
        assert "\n" not in str(error.value)


def test_loading_errors_say_what_to_do(mlx_models, tmp_path):
    with pytest.raises(BackendError, match="No model folder at"):
        MLXBackend(str(tmp_path / "missing"))
    with pytest.raises(BackendError, match="convert it first: python -m training.convert_mlx"):
        MLXBackend(str(mlx_models["transformers"]))
    with pytest.raises(BackendError, match="Could not load mlx-community/not-a-model-anywhere") as error:
        MLXBackend("mlx-community/not-a-model-anywhere")  # no hub here: "not reachable"; with one: not found
    assert "\n" not in str(error.value)


def test_registry_recognises_converted_folders(mlx_models):
    assert is_mlx_model(str(mlx_models["float32"])) and is_mlx_model(str(mlx_models["4-bit"]))
    assert not is_mlx_model(str(mlx_models["transformers"]))
    assert is_mlx_model("mlx-community/diffusiongemma-26B-A4B-it-4bit")
    backend = load_backend(str(mlx_models["4-bit"]))
    try:
        assert isinstance(backend, MLXBackend)
    finally:
        backend.close()


def test_cli_records_an_mlx_trace(mlx_models, tmp_path):
    run = tmp_path / "run.json"
    done = cli("record", "--backend", "mlx", "--model", mlx_models["4-bit"], "--demo", "acrostic", "--seed", "0",
               "--steps", "4", "--out", run)
    assert done.returncode == 0, done.stderr
    trace = Trace.load(run)
    assert trace.model.backend == "mlx" and trace.model.dtype == "4-bit"
    assert trace.prompt.startswith("Write a six-line poem") and trace.settings.max_denoising_steps == 4
    assert trace.end.finish_reason in ("eos", "length") and len(trace.steps) == sum(b.steps_used for b in trace.blocks)
    last = frame_state(trace, len(frame_refs(trace)) - 1)  # the recorded run replays to its committed end
    assert last.kind == "commit" and last.block == trace.blocks[-1].block
    np.testing.assert_array_equal(last.token_ids[last.block], trace.blocks[-1].tokens)


# ---- the converter -------------------------------------------------------------------------
def test_converted_model_computes_the_transformers_logits(mlx_models):
    import mlx.core as mx
    import torch
    from mlx_vlm import load
    from transformers import DiffusionGemmaForBlockDiffusion

    rng = np.random.default_rng(0)
    prompt, canvas = rng.integers(0, 600, (1, 24)), rng.integers(0, 600, (1, 256))
    reference = DiffusionGemmaForBlockDiffusion.from_pretrained(str(mlx_models["transformers"])).eval()
    with torch.no_grad():
        expected = reference(input_ids=torch.tensor(prompt), decoder_input_ids=torch.tensor(canvas)).logits.numpy()
    for name, tolerance in (("float32", 1e-4), ("4-bit", None)):
        model, _ = load(str(mlx_models[name]))
        cache = model.diffusion_prefill_cache(
            mx.array(prompt), attention_mask=None, cache=model.make_cache(), pixel_values=None,
            mm_token_type_ids=None, prefill_step_size=None, chunk_prefill=False,
        )
        masks = model.diffusion_decoder_masks(mx.array(canvas), cache, None)
        logits = np.array(model.diffusion_decoder_logits(mx.array(canvas), cache=cache, decoder_attention_mask=masks))
        if tolerance:
            assert np.abs(logits - expected).max() < tolerance * np.abs(expected).max()
        else:  # quantized: the same function, approximately (measured: correlation 0.989, argmax 96 % equal)
            assert not np.array_equal(logits, expected)
            assert np.corrcoef(logits.ravel(), expected.ravel())[0, 1] > 0.95
            assert (logits.argmax(-1) == expected.argmax(-1)).mean() > 0.8


def test_convert_cli_reports_bad_input_in_one_line(tmp_path, mlx_models):
    for args, message in [
        (["--model", str(tmp_path / "nope"), "--out", str(tmp_path / "a")], "no config.json"),
        (["--model", str(mlx_models["transformers"]), "--out", str(mlx_models["float32"])], "already exists"),
        (["--model", str(mlx_models["transformers"]), "--out", str(tmp_path / "b"), "--bits", "7"], "bits must be"),
    ]:
        done = subprocess.run([sys.executable, "-m", "training.convert_mlx", *args], capture_output=True, text=True)
        assert done.returncode != 0
        assert done.stderr.strip().count("\n") == 0 and message in done.stderr and "Traceback" not in done.stderr


def test_mlx_records_the_candidates_and_the_confidence_it_thresholds(backend):
    """Top-k as transformers records it; the confidence-threshold sampler's reveals follow its
    recorded sample probabilities: each newly revealed position reached the threshold, unless the
    step revealed none that did and forced the single most confident one."""
    from mlx_vlm.generate.diffusion import DEFAULT_DIFFUSION_CONFIDENCE_THRESHOLD as threshold

    eb = record(backend, FAST.replace(record_topk=3))
    for s in eb.steps:
        assert s.topk == 3 and s.topk_probs.dtype == np.float16 and s.sample_probability is None
        np.testing.assert_array_equal(s.topk_ids[:, 0], s.argmax)
        assert np.all(np.diff(s.topk_probs.astype(np.float32), axis=1) <= 0)
    assert Trace.from_json(eb.to_json()) == eb

    ct = record(backend, FAST.replace(sampler="confidence-threshold", record_topk=0, max_denoising_steps=12))
    steps = ct.block_steps(0)
    assert all(s.topk_ids is None for s in steps)
    previous = np.zeros(ct.canvas_length, bool)
    for s in steps:
        if s.steps_remaining == 1:  # the last step samples nothing
            assert s.sample_probability is None
            break
        fresh = s.accepted & ~previous
        probability = s.sample_probability
        passed = ~previous & (probability >= threshold)
        if passed.any():
            assert np.array_equal(fresh, passed)
        else:
            assert fresh.sum() == 1 and np.argmax(np.where(previous, -1, probability)) == np.flatnonzero(fresh)[0]
        previous = s.accepted
    assert Trace.from_json(ct.to_json()) == ct


def test_the_librarys_confidence_threshold_is_mlx_vlms():
    from mlx_vlm.generate.diffusion import DEFAULT_DIFFUSION_CONFIDENCE_THRESHOLD

    from visualizer.settings import CONFIDENCE_THRESHOLD

    assert CONFIDENCE_THRESHOLD == DEFAULT_DIFFUSION_CONFIDENCE_THRESHOLD

def test_explicit_nulls_in_the_generation_config_mean_the_defaults(mlx_models, tmp_path):
    """save_pretrained writes null for every knob a fresh model leaves unset; transformers reads null
    as "use the default", and so must the MLX backend: the CLI records a run from such a folder."""
    import json
    import shutil

    folder = tmp_path / "nulls"
    shutil.copytree(mlx_models["float32"], folder)
    config_path = folder / "generation_config.json"
    config = json.loads(config_path.read_text())
    for key in ("t_min", "t_max", "max_new_tokens", "max_denoising_steps", "confidence_threshold", "stability_threshold"):
        config[key] = None
    config["sampler_config"] = {"_cls_name": "EntropyBoundSamplerConfig", "entropy_bound": None}
    config_path.write_text(json.dumps(config))

    out_file = tmp_path / "run.json"
    out = cli("record", "--backend", "mlx", "--model", folder, "--prompt", "hi", "--steps", "3", "--out", out_file,
              "--quiet")
    assert out.returncode == 0, out.stderr
    settings = Trace.load(out_file).settings
    assert (settings.t_min, settings.t_max, settings.entropy_bound, settings.max_new_tokens) == (0.4, 0.8, 0.1, 256)
