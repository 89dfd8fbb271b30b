"""The diffusers backend: captured runs equal the stock DiffusionGemmaPipeline bit for bit, for each
scheduler, and the records say what each scheduler did (and nothing it did not report).

Each stock run builds the pipeline as a new user would (the model's tokenizer as the processor, a
text prompt, a seeded generator); the backend's run hands the pipeline its own prompt ids.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from backends.base import BackendError
from backends.diffusers_backend import DiffusersBackend, IdsProcessor
from backends.diffusers_capture import CALLBACK_TENSORS, capture_pipeline
from visualizer.accept_budget import accept_budget
from visualizer.records import BlockRecord, RunEnd, RunStart, StepRecord
from visualizer.samplers import AcceptRule
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace
from tests.spies import spy_on_decoder_inputs

pytestmark = pytest.mark.model


PROMPT = "What is 18 plus 24?"
# Every scheduler with knobs away from their defaults, so a knob that was dropped shows.
CASES = {
    "entropy-bound": dict(entropy_bound=0.5, t_min=0.3, t_max=0.9),
    "discrete-ddim": dict(temperature=0.7, corrector_steps=2, corrector_k=3),
    "block-refinement": dict(temperature=0.7, refine_threshold=0.6, editing_threshold=0.9),
}


@pytest.fixture(scope="module")
def builtin():
    from backends import BUILTIN_MODEL_DIR

    return DiffusersBackend(str(BUILTIN_MODEL_DIR), device="cpu")


@pytest.fixture(scope="module")
def no_eos(no_eos_model_dir):
    return DiffusersBackend(str(no_eos_model_dir), device="cpu")


def stock_sequence(backend, prompt: str, settings: GenerationSettings) -> np.ndarray:
    """The stock pipeline's answer, with the pad after the first EOS that a trace's blocks carry."""
    resolved = backend.resolve(settings)
    pipe = backend.pipeline(resolved, backend.tokenizer)
    sequence = pipe(prompt=prompt, **backend.call_kwargs(resolved)).sequences[0].numpy().copy()
    canvas = backend.info.canvas_length
    for start in range(0, len(sequence), canvas):
        block = sequence[start:start + canvas]
        eos = np.flatnonzero(np.isin(block, backend.info.eos_token_ids))
        if eos.size:
            block[eos[0] + 1:] = backend.info.pad_token_id
    return sequence


# What each diffusers scheduler takes (its constructor and the pipeline's call), as diffusers 0.42 defines them.
SCHEDULER_KNOBS = {
    "entropy-bound": {"entropy_bound", "t_min", "t_max"},
    "discrete-ddim": {"temperature", "corrector_steps", "corrector_k"},
    "block-refinement": {"temperature", "refine_threshold", "editing_threshold"},
}


def run(backend, prompt, settings):
    records = list(backend.generate(prompt, settings))
    steps = [r for r in records if isinstance(r, StepRecord)]
    blocks = [r for r in records if isinstance(r, BlockRecord)]
    return records, steps, blocks, records[-1]


@pytest.mark.parametrize("sampler", list(CASES))
def test_captured_run_equals_the_stock_pipeline_on_the_builtin_model(builtin, sampler):
    settings = GenerationSettings(seed=3, sampler=sampler, max_denoising_steps=12, **CASES[sampler])
    records, steps, blocks, end = run(builtin, PROMPT, settings)

    assert isinstance(end, RunEnd) and end.error is None
    np.testing.assert_array_equal(end.sequence, stock_sequence(builtin, PROMPT, settings))
    np.testing.assert_array_equal(np.concatenate([b.tokens for b in blocks]), end.sequence)
    assert sum(b.steps_used for b in blocks) == len(steps)
    start = records[0]
    assert isinstance(start, RunStart)
    for knob, value in CASES[sampler].items():
        assert start.settings[knob] == value
    unread = set().union(*SCHEDULER_KNOBS.values()) - SCHEDULER_KNOBS[sampler]
    assert all(start.settings[knob] is None for knob in unread)  # never a knob that did nothing
    assert all(start.settings[knob] is not None for knob in SCHEDULER_KNOBS[sampler] - {"editing_threshold"})


@pytest.mark.parametrize("sampler", list(CASES))
def test_captured_run_equals_the_stock_pipeline_over_three_full_blocks(no_eos, sampler):
    """No EOS, no early stop on random weights: three blocks of every step, block ends read from the encoder."""
    settings = GenerationSettings(seed=5, sampler=sampler, max_new_tokens=700, max_denoising_steps=6, **CASES[sampler])
    _, steps, blocks, end = run(no_eos, "Write a poem about the sea.", settings)

    np.testing.assert_array_equal(end.sequence, stock_sequence(no_eos, "Write a poem about the sea.", settings))
    # DDIM's corrector sweeps take their share of the 6 forwards: (6 - 1) // 3 = 1 corrected step, 4 predictor steps.
    per_block = 4 if sampler == "discrete-ddim" else 6
    assert [b.block for b in blocks] == [0, 1, 2] and len(steps) == 3 * per_block
    for b in blocks:
        last = [s for s in steps if s.block == b.block][-1]
        assert last.steps_remaining == 1
        # The pipeline commits the last canvas unless it converged (then the argmax).
        expected = last.argmax if b.stop_reason == "converged" else last.canvas
        np.testing.assert_array_equal(b.tokens, expected)


def test_the_pipeline_gets_the_ids_the_tokenizer_gives_it(builtin):
    ids = builtin.prompt_ids(PROMPT)
    stock = builtin.tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    given = IdsProcessor(builtin.tokenizer, ids).apply_chat_template([], add_generation_prompt=True)["input_ids"]
    assert torch.equal(given, stock)


def test_each_scheduler_records_what_it_reports(no_eos):
    base = dict(seed=1, max_new_tokens=256, max_denoising_steps=8)
    _, eb, _, _ = run(no_eos, PROMPT, GenerationSettings(sampler="entropy-bound", **base))
    _, ddim, _, _ = run(no_eos, PROMPT, GenerationSettings(sampler="discrete-ddim", **base))
    _, br, _, _ = run(no_eos, PROMPT, GenerationSettings(sampler="block-refinement", **base))
    # Block refinement: commits accumulate, every position by the last step (an even quota).
    for before, after in zip(br, br[1:]):
        assert np.all(after.accepted >= before.accepted)
    assert br[-1].accepted.all() and br[0].sample_probability is not None
    # DDIM: 'accepted' is the canvas holding the step's x0; the last step takes x0 everywhere.
    assert ddim[-1].accepted.all() and ddim[0].sample_probability is None
    # Entropy-bound renoises: somewhere a position accepted at one step is noise at the next.
    assert any((a.accepted & ~b.accepted).any() for a, b in zip(eb, eb[1:]))


def test_entropy_bound_records_the_scaled_entropy_its_decision_replays_from(builtin):
    settings = GenerationSettings(seed=0, sampler="entropy-bound", entropy_bound=2.0, max_denoising_steps=10)
    trace = Trace(model=builtin.info, prompt=PROMPT)
    for record in builtin.generate("Write a haiku about rain.", settings):
        trace.append(record)
    assert trace.sampler_rule == AcceptRule(True, True, "entropy-bound", "scaled")
    assert "entropy" not in trace.start.sampler_rule  # scaled: written as before
    for step in range(len(trace.block_steps(0))):
        assert accept_budget(trace, 0, step).agrees


def test_raw_entropy_is_said_in_the_trace_and_survives_a_round_trip(builtin, tmp_path):
    trace = Trace(model=builtin.info, prompt=PROMPT)
    for record in builtin.generate(PROMPT, GenerationSettings(seed=0, sampler="discrete-ddim", max_denoising_steps=4)):
        trace.append(record)
    path = tmp_path / "ddim.json"
    trace.save(path)
    loaded = Trace.load(path)
    assert loaded.sampler_rule.entropy == "raw" and loaded.sampler_rule.budget is None
    assert loaded.settings.sampler == "discrete-ddim"


def test_a_sampler_it_cannot_run_is_refused_with_one_line(builtin):
    with pytest.raises(BackendError, match="must be one of entropy-bound, discrete-ddim, block-refinement"):
        list(builtin.generate(PROMPT, GenerationSettings(sampler="confidence-threshold")))


def _installed(pipe) -> bool:
    layer_taps = [h for layer in pipe.model.model.decoder.layers for h in layer._forward_hooks.values()
                  if getattr(h, "_layer_tap", False)]
    return ("step" in vars(pipe.scheduler) or bool(pipe.model.model.encoder._forward_pre_hooks)
            or bool(pipe.model._forward_pre_hooks) or bool(layer_taps))


@pytest.mark.parametrize("how", ["success", "error", "stop"])
def test_capture_always_undoes_itself(builtin, how):
    settings = builtin.resolve(GenerationSettings(seed=0, max_denoising_steps=3))
    ids = builtin.prompt_ids(PROMPT)
    pipe = builtin.pipeline(settings, IdsProcessor(builtin.tokenizer, ids))
    steps = []

    def on_step(step):
        steps.append(step)
        if how == "error":
            raise ValueError("boom")

    options = dict(topk=0, scaled_entropy=True, eos_ids=(1,), pad_id=0, layers=(0, 1), pins=((3, 50),), shift=True)
    with pytest.raises(Exception) if how != "success" else _nothing():
        with capture_pipeline(pipe, on_step, lambda block: None, lambda: how == "stop" and bool(steps), **options) as c:
            assert _installed(pipe)
            assert "generator" in inspect.signature(pipe.scheduler.step).parameters
            out = pipe(prompt="", callback_on_step_end=c.callback, callback_on_step_end_tensor_inputs=CALLBACK_TENSORS,
                       **builtin.call_kwargs(settings))
            c.finish(out.sequences)
    assert not _installed(pipe)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_pipeline_details_the_capture_relies_on():
    """diffusers 0.42.1's private details named in backends/diffusers_capture.py: if one moves, this fails."""
    from diffusers import DiffusionGemmaPipeline

    assert DiffusionGemmaPipeline._callback_tensor_inputs == CALLBACK_TENSORS
    source = inspect.getsource(DiffusionGemmaPipeline.__call__)
    assert "self.scheduler.step(" in source and "return_dict=True" in source
    assert "inspect.signature(self.scheduler.step).parameters" in source  # hence the wrap keeps the signature
    assert source.index("self.scheduler.step(") < source.index("callback_on_step_end(self, global_step, step_idx")
    assert "self.model.model.encoder(\n                input_ids=cur_input_ids[:, cached_len:]" in source
    assert "if bool(finished_denoising.all()):\n                        break" in source


def test_two_samplers_compare_on_the_same_prompt_and_seed(builtin):
    """What "Compare two runs" shows for one prompt and seed under two samplers: steps aligned, labels naming each."""
    from visualizer.compare import align, compare_html, run_labels

    traces = []
    for sampler in ("entropy-bound", "block-refinement"):
        trace = Trace(model=builtin.info, prompt=PROMPT)
        for record in builtin.generate(PROMPT, GenerationSettings(seed=4, sampler=sampler, max_denoising_steps=6)):
            trace.append(record)
        traces.append(trace)
    label_a, label_b = run_labels(*traces)
    assert "sampler entropy-bound" in label_a and "sampler block-refinement" in label_b
    assert "entropy bound 0.1" in label_a and "refine threshold 0.95" in label_b  # each run's own knobs
    aligned = align(*traces)
    assert len(aligned) == max(len(t.steps) for t in traces) + 1
    assert "sampler block-refinement" in compare_html(*traces, len(aligned) - 1)


# ---- layers and pins (docs/layers-and-pins.md): the pipeline drives the same model, so both run here too ----
@pytest.mark.parametrize("sampler", list(CASES))
def test_pins_hold_at_every_step_of_every_scheduler(no_eos, sampler):
    """Placed before the first step, held at every step: on the canvas, accepted (or committed), the argmax,
    entropy 0 and no shift; committed with the block; the second block runs as the scheduler would."""
    pins = ((3, "ocean waves"), (40, "}"))
    settings = GenerationSettings(seed=2, sampler=sampler, max_new_tokens=512, max_denoising_steps=6, pins=pins,
                                  **CASES[sampler])
    records, steps, blocks, end = run(no_eos, PROMPT, settings)
    assert end.error is None and len(records[0].pins) >= 3
    where, ids = np.array([p for p, _ in records[0].pins]), np.array([t for _, t in records[0].pins])
    first = [s for s in steps if s.block == 0]
    assert len(first) == (4 if sampler == "discrete-ddim" else 6)
    for s in first:
        assert s.accepted[where].all()
        np.testing.assert_array_equal(s.canvas[where], ids)
        np.testing.assert_array_equal(s.argmax[where], ids)
        assert np.all(s.entropy_nats[where] == 0)
        assert s.kl_nats is None or np.all(s.kl_nats[where] == 0)
    np.testing.assert_array_equal(blocks[0].tokens[where], ids)
    second = [s for s in steps if s.block == 1]
    assert second and not all(s.accepted[where].all() and np.all(s.canvas[where] == ids) for s in second)
    # a pinned run replays from its seed and pins, and differs from the unpinned one
    np.testing.assert_array_equal(run(no_eos, PROMPT, settings)[3].sequence, end.sequence)
    assert not np.array_equal(run(no_eos, PROMPT, settings.replace(pins=()))[3].sequence, end.sequence)


@pytest.mark.parametrize("sampler", list(CASES))
def test_layers_leave_the_run_bit_identical_and_read_the_steps_own_forward(no_eos, sampler):
    """With layers the run is still the stock pipeline's; the last layer's lens is the model's own logits of the
    step (its top id is the step's argmax: DDIM's corrector forwards, which come after, are not what is read)."""
    settings = GenerationSettings(seed=5, sampler=sampler, max_new_tokens=256, max_denoising_steps=6, layers=(0, 1),
                                  **CASES[sampler])
    _, steps, blocks, end = run(no_eos, PROMPT, settings)
    np.testing.assert_array_equal(end.sequence, stock_sequence(no_eos, PROMPT, settings))
    assert all(s.layer_rms.shape == (2, 256) for s in steps)
    assert blocks[0].lens_top_ids.shape == blocks[0].lens_ranks.shape == (len(steps), 2, 256)
    for t, s in enumerate(steps):
        np.testing.assert_array_equal(blocks[0].lens_top_ids[t, 1], s.argmax)


def test_diffusers_layers_equal_a_separate_forward_with_hidden_states(no_eos, monkeypatch):
    """As tests/test_layers_and_pins.py checks the transformers path: every decoder forward's inputs kept, the
    model run again on each with output_hidden_states; the recorded RMS, lens and ranks equal the definition."""
    from backends.layer_capture import lens_logits

    model = no_eos.model
    inputs = spy_on_decoder_inputs(monkeypatch, model)
    settings = GenerationSettings(seed=6, sampler="entropy-bound", max_new_tokens=256, max_denoising_steps=4, layers=(0, 1))
    _, steps, blocks, _ = run(no_eos, PROMPT, settings)
    monkeypatch.undo()
    assert len(steps) == len(inputs) == 4
    tokens = torch.from_numpy(blocks[0].tokens.astype(np.int64))
    with torch.no_grad():
        for t, (record, kwargs) in enumerate(zip(steps, inputs)):
            hidden = model.forward(**kwargs, output_hidden_states=True).hidden_states
            h = hidden[1][0]  # layer 0's output (the last entry is the final norm's, not layer 1's)
            np.testing.assert_array_equal(record.layer_rms[0], h.float().pow(2).mean(-1).sqrt().numpy())
            logits = lens_logits(model, h)
            np.testing.assert_array_equal(blocks[0].lens_top_ids[t, 0], logits.argmax(-1).numpy())
            np.testing.assert_allclose(blocks[0].lens_top_probs[t, 0].astype(np.float64),
                                       torch.softmax(logits.double(), -1).max(-1).values.numpy(), rtol=2e-3, atol=1e-4)
            np.testing.assert_array_equal(blocks[0].lens_ranks[t, 0], (logits > logits.gather(-1, tokens[:, None])).sum(-1).numpy())
