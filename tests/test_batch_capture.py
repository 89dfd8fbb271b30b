"""Batched capture changes nothing either: each row of a captured batch is the stock batched
`generate`'s row, bit for bit, and a trace of its own (`backends.run.record_batch`).

The stock run is spied on with a bare wrapper of `_denoising_step` (not the capture), so the
per-row bookkeeping (which rows are still denoising, which have finished) is checked against
transformers' own tensors. Runs are kept short (few steps, one or two blocks): CPU only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from backends.base import BackendError
from backends.capture import capture_steps
from backends.run import record_batch, record_trace
from backends.transformers_backend import batch_inputs
from visualizer.records import BlockRecord, RunEnd, StepRecord, frozen_array
from visualizer.settings import GenerationSettings
from visualizer.trace_format import parse_trace, trace_to_dict

pytestmark = pytest.mark.model


BUILTIN = Path(__file__).resolve().parent.parent / "assets" / "models" / "diffusiongemma-tiny-demo"
PROMPTS = ["Why is the sky blue?", "Write a haiku about rain on a tin roof at night.", "What is 2 + 3?"]


@pytest.fixture(scope="module")
def builtin_backend():
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(str(BUILTIN), device="cpu")


def stock_batched(backend, prompts, settings):
    """The stock batched `generate` (same padding, mask and seed as the backend), with a spy that
    keeps each step's next canvas and finished-denoising mask as transformers returns them."""
    resolved = backend.resolve(settings)
    input_ids, mask = batch_inputs([backend.prompt_ids(p) for p in prompts], backend.info.pad_token_id, "cpu")
    kwargs = backend.generate_kwargs(resolved)
    if mask is not None:
        kwargs["attention_mask"] = mask
    model, spied = backend.model, []
    real = model._denoising_step

    def spy(*args, **kw):
        out = real(*args, **kw)
        spied.append((out[0].clone().numpy(), out[3].clone().numpy()))
        return out

    model._denoising_step = spy
    try:
        torch.manual_seed(resolved.seed)
        out = model.generate(input_ids, **kwargs)
    finally:
        del model._denoising_step
    return out.sequences[:, input_ids.shape[1] :].numpy(), spied


def without_times(record):
    """A record with its wall-clock time zeroed: the only field two identical runs differ in."""
    if isinstance(record, (StepRecord, RunEnd)):
        return dataclasses.replace(record, wall_time_s=0.0)
    return record


def assert_rows_match_stock(backend, traces, prompts, settings):
    sequences, spied = stock_batched(backend, prompts, settings)
    pad = backend.info.pad_token_id
    for row, trace in enumerate(traces):
        assert trace.start.batch == ({"size": len(prompts), "row": row} if len(prompts) > 1 else None)
        assert isinstance(trace.end, RunEnd) and trace.end.error is None
        generated = len(trace.end.sequence)
        np.testing.assert_array_equal(trace.end.sequence, sequences[row, :generated])
        assert np.all(sequences[row, generated:] == pad)  # blocks after the row finished: all pad, unrecorded
        np.testing.assert_array_equal(np.concatenate([b.tokens for b in trace.blocks]), trace.end.sequence)
        # Replay the stock steps block by block: a row is recorded at a step while it is still denoising.
        steps, index = iter(trace.steps), 0
        for block in trace.blocks:
            for t in range(block.steps_used):
                canvas, finished = spied[index + t]
                step = next(steps)
                assert (step.block, step.step) == (block.block, t)
                np.testing.assert_array_equal(step.canvas, canvas[row])
                settled = bool(finished[row])
                assert settled == (t == block.steps_used - 1 and block.stop_reason == "converged")
            index += _steps_run(spied, index, backend.resolve(settings).max_denoising_steps)
        assert next(steps, None) is None


def _steps_run(spied, start, max_steps):
    """How many steps the batch ran in the block starting at spied[start]: until every row settled."""
    for t in range(max_steps):
        if spied[start + t][1].all():
            return t + 1
    return max_steps


def test_batched_capture_equals_stock_batched_generate(builtin_backend):
    """Prompts of different lengths (left-padded with a mask), the built-in model."""
    settings = GenerationSettings(seed=5, max_new_tokens=256, max_denoising_steps=6)
    traces = record_batch(builtin_backend, PROMPTS, settings)
    assert len({len(t.start.prompt_ids) for t in traces}) == 3  # three lengths: padding is exercised
    # This seed has one row settle (converge) at step 2 while the others run all 6 steps.
    assert sorted(t.blocks[0].steps_used for t in traces) == [2, 6, 6]
    assert_rows_match_stock(builtin_backend, traces, PROMPTS, settings)


def test_rows_that_hit_eos_in_different_blocks(random_backend):
    """Random weights: the rows commit an EOS in blocks 1, 3 and 2 of 3 at this seed. A finished
    row gets no records after its EOS block, though transformers goes on computing it."""
    settings = GenerationSettings(seed=3, max_new_tokens=768, max_denoising_steps=3)
    traces = record_batch(random_backend, PROMPTS, settings)
    assert [len(t.blocks) for t in traces] == [1, 3, 2]
    assert [t.end.finish_reason for t in traces] == ["eos", "length", "eos"]
    for trace in traces:
        assert len(trace.steps) == sum(b.steps_used for b in trace.blocks) == 3 * len(trace.blocks)
        last = trace.blocks[-1]
        if trace.end.finish_reason == "eos":
            assert last.eos_position is not None
            assert np.all(last.tokens[last.eos_position + 1 :] == random_backend.info.pad_token_id)
    assert_rows_match_stock(random_backend, traces, PROMPTS, settings)


def test_left_padding_is_what_the_model_expects(builtin_backend):
    """From the same starting canvas, a padded row's first step sees what its prompt alone gives:
    the same argmax and the same entropies up to float32 rounding (right padding would not)."""
    model, canvas_length = builtin_backend.model, builtin_backend.info.canvas_length
    kwargs = builtin_backend.generate_kwargs(builtin_backend.resolve(GenerationSettings(max_new_tokens=256, max_denoising_steps=1)))
    ids = [builtin_backend.prompt_ids(p) for p in PROMPTS[:2]]
    assert len(ids[0]) < len(ids[1])
    canvas = torch.randint(0, builtin_backend.info.vocab_size, (1, canvas_length), generator=torch.Generator().manual_seed(0))

    def first_step(input_ids, mask):
        steps = []
        extra = {} if mask is None else {"attention_mask": mask}
        with capture_steps(model, steps.append, lambda block: None):
            model.generate(input_ids, decoder_input_ids=canvas.repeat(len(input_ids), 1), **kwargs, **extra)
        return steps[0]  # row 0's step

    alone = first_step(torch.tensor(ids[:1]), None)
    padded = first_step(*batch_inputs(ids, builtin_backend.info.pad_token_id, "cpu"))
    np.testing.assert_array_equal(padded.argmax, alone.argmax)
    np.testing.assert_allclose(padded.entropy_nats, alone.entropy_nats, atol=1e-4)
    # The same prompts padded on the right put pad between the prompt and its canvas: not the same.
    input_ids, mask = batch_inputs(ids, builtin_backend.info.pad_token_id, "cpu")
    gap = len(ids[1]) - len(ids[0])
    right_ids, right_mask = input_ids.clone(), mask.clone()
    right_ids[0] = torch.roll(input_ids[0], -gap)
    right_mask[0] = torch.roll(mask[0], -gap)
    right = first_step(right_ids, right_mask)
    assert np.abs(right.entropy_nats - alone.entropy_nats).max() > 0.1


def test_a_batch_of_one_is_record_trace(builtin_backend):
    settings = GenerationSettings(seed=2, max_new_tokens=256, max_denoising_steps=4)
    alone = record_trace(builtin_backend, PROMPTS[0], settings)
    (batched,) = record_batch(builtin_backend, PROMPTS[:1], settings)
    assert batched.start.batch is None
    a = [alone.start, *alone.steps, *alone.blocks, alone.end]
    b = [batched.start, *batched.steps, *batched.blocks, batched.end]
    assert len(a) == len(b) and len(alone.steps) > 0
    for x, y in zip(a, b):
        assert without_times(x) == without_times(y)
    assert alone.pieces == batched.pieces


def test_each_row_saves_loads_and_replays(random_backend, tmp_path):
    from visualizer.states import frame_refs, frame_state
    from visualizer.trace import Trace

    settings = GenerationSettings(seed=3, max_new_tokens=512, max_denoising_steps=2, record_topk=3)
    traces = record_batch(random_backend, PROMPTS[:2], settings)
    for row, trace in enumerate(traces):
        loaded = Trace.load(trace.save(tmp_path / f"row{row}.json"))  # loading checks every displayed id has a piece
        assert loaded.start.batch == {"size": 2, "row": row}
        assert loaded.end.sequence.tolist() == trace.end.sequence.tolist()
        assert [s.canvas.tolist() for s in loaded.steps] == [s.canvas.tolist() for s in trace.steps]
        refs = frame_refs(loaded)
        assert len(refs) >= len(trace.steps)
        frame_state(loaded, len(refs) - 1, refs)  # the last frame draws from the loaded trace
    # The single-prompt file has no batch entry at all: its format is unchanged.
    assert "batch" not in record_trace(random_backend, PROMPTS[0], settings).to_dict()


def test_a_malformed_batch_entry_is_refused(random_backend):
    from visualizer.trace import Trace, TraceError

    (trace, _) = record_batch(random_backend, PROMPTS[:2], GenerationSettings(seed=0, max_new_tokens=256, max_denoising_steps=1))
    data = trace.to_dict()
    for bad, message in [({"size": 2, "row": 2}, "batch.row"), ({"size": 0, "row": 0}, "batch.size"), ({"size": 2}, "missing 'row'"), ("2", "must be an object")]:
        with pytest.raises(TraceError, match=message):
            Trace.from_dict({**data, "batch": bad})


def test_frozen_array_refuses_a_batch_of_rows():
    with pytest.raises(ValueError, match="1-D"):
        frozen_array(np.zeros((2, 4)), np.int32)
    assert frozen_array(np.arange(4), np.int32).shape == (4,)
    assert frozen_array([], np.int32).shape == (0,)


def test_one_capture_at_a_time_per_model(random_backend):
    """The hooks sit on the model instance: a second run on it while one is recording ends with
    one clear line, and the first capture's hooks are left alone."""
    settings = GenerationSettings(seed=0, max_new_tokens=256, max_denoising_steps=1)
    with capture_steps(random_backend.model, lambda s: None, lambda b: None):
        traces = record_batch(random_backend, PROMPTS[:2], settings)
        assert "_denoising_step" in vars(random_backend.model)
    for trace in traces:
        assert trace.end.finish_reason == "error"
        assert trace.end.error.startswith("capture_steps is already active on this model")
        assert "\n" not in trace.end.error


def test_bad_batches_are_refused_with_one_line(random_backend, monkeypatch):
    settings = GenerationSettings(seed=0, max_new_tokens=256, max_denoising_steps=1)
    with pytest.raises(BackendError, match="No prompts"):
        record_batch(random_backend, [], settings)
    with pytest.raises(BackendError, match=r"^Prompt 2 of 3: The prompt is empty"):
        record_batch(random_backend, ["hi", " ", "ho"], settings)
    # A backend that runs one prompt at a time (MLX) says so before any work.
    one = dataclasses.replace(random_backend.capabilities, max_batch=1)
    monkeypatch.setattr(random_backend, "capabilities", one)
    with pytest.raises(BackendError, match="at most 1 prompt"):
        record_batch(random_backend, PROMPTS[:2], settings)


def test_a_stop_ends_every_row_with_what_it_recorded(random_backend, monkeypatch):
    import threading

    stop = threading.Event()
    settings = GenerationSettings(seed=0, max_new_tokens=512, max_denoising_steps=3)
    model_class, steps = type(random_backend.model), []
    real = model_class._denoising_step

    def count(self, *args, **kwargs):  # sets the stop during the batch's second step
        steps.append(1)
        if len(steps) == 2:
            stop.set()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(model_class, "_denoising_step", count)
    traces = record_batch(random_backend, PROMPTS[:2], settings, stop=stop)
    for trace in traces:
        assert trace.end.finish_reason == "cancelled"
        assert [s.step for s in trace.steps] == [0, 1] and trace.blocks == []
