"""Inside the network and a hand on the canvas (docs/layers-and-pins.md), on the random model (CPU).

- the layer hooks leave nothing on the model after success, an error and a stop;
- the recorded RMS and logit lens equal a separate forward with `output_hidden_states` on the same inputs;
- the recorded shift equals a float64 recomputation from the processed logits;
- pins hold at every step and are committed; a pinned run replays from its seed and pins;
- recording layers and the shift leaves the run bit-identical to stock (the no-pin identity tests are
  tests/test_capture.py's, which run with the shift on, its default).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from backends.base import BackendError
from backends.capture import capture_steps
from backends.layer_capture import LayerTaps, decoder_layers, lens_logits
from tests.spies import spy_on_decoder_inputs, spy_on_summaries
from visualizer.records import BlockRecord, RunEnd, StepRecord
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

PROMPT = "Write a six-line poem about the ocean."


def _hooks_left(model) -> list[int]:
    """Decoder layers that still hold one of the capture's hooks. Only ours: the first forward with
    `output_hidden_states` makes transformers install its own inactive recording hooks for good."""
    return [i for i, layer in enumerate(decoder_layers(model))
            if any(getattr(hook, "_layer_tap", False) for hook in layer._forward_hooks.values())]


def _wrappers_left(model) -> list[str]:
    names = ("_prepare_logits_processor", "_prepare_denoiser_inputs", "_denoising_step", "_finalize_canvas", "forward")
    return [n for n in names if n in vars(model)]


def _plain(backend, settings):
    resolved = backend.resolve(settings)
    ids = backend.prompt_ids(PROMPT)
    torch.manual_seed(resolved.seed)
    out = backend.model.generate(torch.tensor([ids]), **backend.generate_kwargs(resolved))
    return out.sequences[0, len(ids):].numpy()


# ---- the hooks leave no trace ---------------------------------------------------------------------
def test_layer_hooks_leave_nothing_after_success_error_and_stop(random_backend):
    model = random_backend.model
    layers = (0, random_backend.info.layers - 1)
    with LayerTaps(model, layers):
        assert _hooks_left(model) == list(layers)
    assert _hooks_left(model) == []

    with pytest.raises(RuntimeError, match="boom"):
        with capture_steps(model, lambda s: None, lambda b: None, layers=layers, shift=True, pins=((3, 50),)):
            assert _hooks_left(model) == list(layers)
            raise RuntimeError("boom")
    assert _hooks_left(model) == [] and _wrappers_left(model) == []

    def explode(step):
        raise ValueError("consumer failed")

    with pytest.raises(ValueError):
        with capture_steps(model, explode, lambda b: None, layers=layers):
            model.generate(torch.tensor([[2, 105, 200, 106]]), max_new_tokens=256, max_denoising_steps=3)
    assert _hooks_left(model) == [] and _wrappers_left(model) == []

    stop = threading.Event()
    settings = GenerationSettings(seed=0, max_new_tokens=256, max_denoising_steps=6, layers=layers, pins=((4, "sea"),))
    records = []
    for record in random_backend.generate(PROMPT, settings, stop):
        records.append(record)
        if isinstance(record, StepRecord) and record.step == 1:
            stop.set()
    assert records[-1].finish_reason == "cancelled"
    assert _hooks_left(model) == [] and _wrappers_left(model) == []

    records = list(random_backend.generate(PROMPT, settings.replace(max_denoising_steps=2)))
    assert records[-1].finish_reason in ("eos", "length")
    assert _hooks_left(model) == [] and _wrappers_left(model) == []


def test_a_tapped_layer_refuses_a_second_tap(random_backend):
    model = random_backend.model
    with LayerTaps(model, (1,)):
        with pytest.raises(RuntimeError, match="already tapped"):
            with LayerTaps(model, (0, 1)):
                pass
        assert _hooks_left(model) == [1]  # the refused one removed what it had added (layer 0)
    assert _hooks_left(model) == []


# ---- the values ----------------------------------------------------------------------------------
def test_rms_and_lens_equal_a_separate_forward_with_hidden_states(no_eos_backend, monkeypatch):
    """Spy on every decoder forward's inputs, then run the model again on each with output_hidden_states.

    transformers' hidden_states are the embeddings, layers 0..n-2, then the *final norm's* output for
    layer n-1: the RMS is compared for layers before the last; the lens for every layer (the last one's
    lens is the model's own raw logits)."""
    backend = no_eos_backend
    model = backend.model
    n = backend.info.layers
    layers = tuple(sorted({0, n // 2, n - 1}))  # the random model has 2 layers: (0, 1)
    inputs = spy_on_decoder_inputs(monkeypatch, model)
    settings = GenerationSettings(seed=5, max_new_tokens=256, max_denoising_steps=5, layers=layers)
    records = list(backend.generate(PROMPT, settings))
    monkeypatch.undo()
    steps = [r for r in records if isinstance(r, StepRecord)]
    block = next(r for r in records if isinstance(r, BlockRecord))
    assert len(steps) == len(inputs) == 5 and block.lens_ranks.shape == (5, len(layers), 256)
    assert block.lens_top_ids.shape == block.lens_top_probs.shape == block.lens_ranks.shape
    tokens = torch.from_numpy(block.tokens.astype(np.int64))
    with torch.no_grad():
        for t, (record, kwargs) in enumerate(zip(steps, inputs)):
            out = model.forward(**kwargs, output_hidden_states=True)
            hidden = out.hidden_states
            assert len(hidden) == n + 1
            for i, layer in enumerate(layers):
                if layer < n - 1:
                    h = hidden[layer + 1][0]
                    np.testing.assert_array_equal(record.layer_rms[i], h.float().pow(2).mean(-1).sqrt().numpy())
                    logits = lens_logits(model, h)
                else:  # the last entry is already through the final norm: the head and softcap alone
                    logits = model.lm_head(hidden[-1][0]).float()
                    cap = model.final_logit_softcapping
                    logits = torch.tanh(logits / cap) * cap
                    np.testing.assert_array_equal(logits.numpy(), out.logits[0].numpy())
                np.testing.assert_array_equal(block.lens_top_ids[t, i], logits.argmax(-1).numpy())
                probs = torch.softmax(logits.double(), -1).max(-1).values.numpy()
                np.testing.assert_allclose(block.lens_top_probs[t, i].astype(np.float64), probs, rtol=2e-3, atol=1e-4)
                mine = logits.gather(-1, tokens[:, None])
                np.testing.assert_array_equal(block.lens_ranks[t, i], (logits > mine).sum(-1).numpy())
    # the last layer's lens at the last step puts first the argmax the block commits, as the model does
    assert np.all(block.lens_ranks[-1, -1][steps[-1].argmax == block.tokens] == 0)


class _HeadIsIdentity:
    """A stand-in model whose 'layer outputs' are already the head's raw logits: final norm and head are identities."""

    def __init__(self, cap):
        self.final_logit_softcapping = cap
        self.lm_head = torch.nn.Identity()
        self.model = type("Inner", (), {"decoder": type("Decoder", (), {"norm": torch.nn.Identity()})()})()


def _raw_logits_with_ties(dtype, rows=64, vocab=3000):
    """16-bit raw logits where the softcap makes ties the raw values do not have: in some rows several distinct
    raw values past tanh's float32 saturation (about 9 x the cap) all cap to exactly the cap, the largest raw one
    last, so the capped argmax (the first of them) is not the raw argmax; plus the ties 16-bit values have anyway."""
    torch.manual_seed(0)
    raw = (torch.randn(rows, vocab) * 6).to(dtype)
    for row in range(0, rows, 2):
        raw[row, [row + 5, row + 90, 2000 + row]] = torch.tensor([300.0, 400.0, 900.0 if dtype == torch.bfloat16 else 600.0], dtype=dtype)
        raw[row, 2500 + row] = -500.0  # saturates at -cap too
    return raw[None]  # (batch 1, rows as canvas positions, vocab)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("cap", [30.0, None], ids=["softcap", "no-softcap"])
def test_the_fast_lens_equals_the_reference_with_softcap_and_ties(dtype, cap):
    """block_lens on a 16-bit head (`CapTable`: order taken on the raw logits) gives exactly the ids and ranks of
    the definition computed on float32 capped logits, ties included; probabilities to float16."""
    from backends.layer_capture import block_lens, block_lens_reference, cap_table

    model = _HeadIsIdentity(cap)
    raw = _raw_logits_with_ties(dtype)
    assert cap_table(dtype, "cpu", cap) is not None  # the table is non-decreasing: the fast path ran
    # committed tokens: the saturated ids, ordinary ones and ids whose raw value others share
    tokens = torch.randint(0, raw.shape[-1], raw.shape[:2])
    tokens[0, 0::2] = torch.arange(0, raw.shape[1], 2) + 90  # the middle of three saturated ties
    tokens[0, 1::4] = raw[0, 1::4].float().argmin(-1)  # ranks near the vocabulary size
    (ids, probs, ranks), reference = block_lens(model, [raw, raw], tokens), block_lens_reference(model, [raw, raw], tokens)
    assert torch.equal(ids, reference[0]) and torch.equal(ranks, reference[2])
    assert ids.dtype == ranks.dtype == torch.int32 and probs.dtype == torch.float16 and ids.shape == (1, 2, raw.shape[1])
    np.testing.assert_allclose(probs.float().numpy(), reference[1].float().numpy(), rtol=1e-3)
    if cap:  # the ties are real: on the raw logits the argmax and those ranks would differ
        assert not torch.equal(raw[0].float().argmax(-1).to(torch.int32), reference[0][0, 0])
        raw_ranks = (raw[0] > raw[0].gather(-1, tokens[0, :, None])).sum(-1)
        assert not torch.equal(raw_ranks.to(torch.int32), ranks[0, 0])


def test_the_fast_lens_equals_the_reference_on_a_bf16_model(random_model_dir):
    """The same through the random model's own final norm, tied head and softcap, loaded in bf16 (as on a GPU)."""
    from transformers import DiffusionGemmaForBlockDiffusion

    from backends.layer_capture import block_lens, block_lens_reference, cap_table

    model = DiffusionGemmaForBlockDiffusion.from_pretrained(random_model_dir, dtype=torch.bfloat16).eval()
    assert model.final_logit_softcapping and cap_table(torch.bfloat16, "cpu", model.final_logit_softcapping) is not None
    torch.manual_seed(1)
    hiddens = [torch.randn(2, 256, model.config.text_config.hidden_size, dtype=torch.bfloat16) * s for s in (1, 40)]
    tokens = torch.randint(0, model.config.text_config.vocab_size, (2, 256))
    (ids, probs, ranks), reference = block_lens(model, hiddens, tokens), block_lens_reference(model, hiddens, tokens)
    assert torch.equal(ids, reference[0]) and torch.equal(ranks, reference[2])
    np.testing.assert_allclose(probs.float().numpy(), reference[1].float().numpy(), rtol=1e-3)


def test_recorded_shift_equals_a_float64_recomputation(random_backend, monkeypatch):
    import backends.capture as capture_module

    seen = spy_on_summaries(monkeypatch, capture_module)
    settings = GenerationSettings(seed=3, max_new_tokens=256, max_denoising_steps=6)
    steps = [r for r in random_backend.generate("Name three rivers.", settings) if isinstance(r, StepRecord)]
    assert len(steps) == len(seen) == 6
    assert steps[0].kl_nats is None  # nothing before a block's first step
    for t in range(1, 6):
        p = torch.log_softmax(seen[t][0].double(), -1)
        q = torch.log_softmax(seen[t - 1][0].double(), -1)
        expected = (p.exp() * (p - q)).sum(-1).numpy()
        assert steps[t].kl_nats.dtype == np.float32
        np.testing.assert_allclose(steps[t].kl_nats, expected, rtol=1e-4, atol=2e-5)
        assert expected.max() > 0.01  # random weights shift: the comparison is not of zeros


def test_shift_off_records_none(random_backend):
    settings = GenerationSettings(seed=3, max_new_tokens=256, max_denoising_steps=3, record_shift=False)
    steps = [r for r in random_backend.generate("Hi", settings) if isinstance(r, StepRecord)]
    assert [s.kl_nats for s in steps] == [None] * 3 and all(s.layer_rms is None for s in steps)


def test_layers_and_shift_leave_the_run_bit_identical(no_eos_backend):
    settings = GenerationSettings(seed=7, max_new_tokens=700, entropy_bound=1.0, max_denoising_steps=6,
                                  layers=(0, 1), record_shift=True)
    records = list(no_eos_backend.generate(PROMPT, settings))
    end = records[-1]
    assert isinstance(end, RunEnd) and end.error is None
    np.testing.assert_array_equal(end.sequence, _plain(no_eos_backend, settings))
    blocks = [r for r in records if isinstance(r, BlockRecord)]
    assert len(blocks) == 3 and all(b.lens_ranks.shape == b.lens_top_ids.shape == (b.steps_used, 2, 256) for b in blocks)


# ---- pins ---------------------------------------------------------------------------------------------
def test_pins_hold_at_every_step_and_are_committed(no_eos_backend):
    backend = no_eos_backend
    pins = ((3, "ocean waves"), (40, "}"))
    settings = GenerationSettings(seed=11, max_new_tokens=512, max_denoising_steps=8, pins=pins)
    records = list(backend.generate(PROMPT, settings))
    start, end = records[0], records[-1]
    expected = [(3 + i, t) for i, t in enumerate(backend.tokenizer.encode("ocean waves", add_special_tokens=False))]
    expected += [(40, backend.tokenizer.encode("}", add_special_tokens=False)[0])]
    assert start.pins == tuple(expected) and len(expected) >= 3
    where, ids = np.array([p for p, _ in expected]), np.array([t for _, t in expected])
    steps = [r for r in records if isinstance(r, StepRecord)]
    first = [s for s in steps if s.block == 0]
    assert len(first) == 8
    for s in first:
        assert s.accepted[where].all()
        np.testing.assert_array_equal(s.canvas[where], ids)
        np.testing.assert_array_equal(s.argmax[where], ids)
        assert np.all(s.entropy_nats[where] == 0)
    blocks = [r for r in records if isinstance(r, BlockRecord)]
    np.testing.assert_array_equal(blocks[0].tokens[where], ids)
    second = [s for s in steps if s.block == 1]  # pins are the first block's: the second runs stock
    assert second and not all(s.accepted[where].all() for s in second)
    assert end.error is None


def test_a_pinned_run_replays_from_its_seed_and_pins(no_eos_backend, tmp_path):
    settings = GenerationSettings(seed=4, max_new_tokens=256, max_denoising_steps=6, pins=((10, "sea"),), layers=(1,))

    def run():
        trace = Trace(model=no_eos_backend.info, prompt=PROMPT)
        for record in no_eos_backend.generate(PROMPT, settings):
            trace.append(record)
        return trace

    first, again = run(), run()
    np.testing.assert_array_equal(first.end.sequence, again.end.sequence)
    for a, b in zip(first.steps, again.steps):
        np.testing.assert_array_equal(a.canvas, b.canvas)
        np.testing.assert_array_equal(a.kl_nats if a.kl_nats is not None else [], b.kl_nats if b.kl_nats is not None else [])
    loaded = Trace.load(first.save(tmp_path / "pinned.json"))
    assert loaded == first and loaded.settings.pins == ((10, "sea"),) and loaded.start.pins == first.start.pins
    assert loaded.to_json() == first.to_json()
    # and the pinned run differs from the stock one: the pins did something
    stock = list(no_eos_backend.generate(PROMPT, settings.replace(pins=())))
    assert not np.array_equal(stock[-1].sequence, first.end.sequence)


@pytest.mark.parametrize(
    "pins, message",
    [
        (((256, "x"),), "outside the canvas"),
        (((0, ""),), "empty text"),
        (((250, "the ocean waves are rolling in and out of the bay"),), "more than the 6 position"),
        (((0, "wave " * 2000),), r"is \d+ tokens \('wave wave wave wave wave wave wave wa\.\.\.'\): more than the 256 position\(s\) left in the canvas of 256$"),
        (((3, "sea"), (3, "sky")), "must not overlap"),
        (((-1, "x"),), "outside the canvas"),
    ],
)
def test_bad_pins_are_refused_in_one_line(random_backend, pins, message):
    with pytest.raises(BackendError, match=message) as info:
        random_backend.check(PROMPT, GenerationSettings(pins=pins))
    assert "\n" not in str(info.value)


def test_a_layer_the_model_lacks_is_refused(random_backend):
    with pytest.raises(BackendError, match="does not exist"):
        random_backend.check(PROMPT, GenerationSettings(layers=(random_backend.info.layers,)))
    resolved = random_backend.resolve(GenerationSettings(layers="all"))
    assert resolved.layers == tuple(range(random_backend.info.layers))


def test_compiled_layers_cost_a_recompile_and_change_nothing(no_eos_model_dir):
    """The compiled path (static cache, torch.compile): a stock run through the backend first, which compiles the
    decoder on the backend's worker thread; then a run with layers (the hooks are guarded, so the decoder compiles
    once more and they run), then stock again on the graph without them.

    On a backend of its own, so that the first compile is this test's, on a worker thread: dynamo's config is
    thread-local since torch 2.12, and before every capture set the hook guard in its own thread, a decoder first
    compiled there had no hook guards and the layers run refused ("the hooks ... did not run"); in the full suite
    that happened whenever an earlier test had first compiled the shared backend's model on a worker thread.

    The model is float32 here, so the taps move no rounding; in bf16 they do (`visualizer.settings.COMPILED_LAYERS_NOTE`,
    test_cli.py: the command says so)."""
    from backends.transformers_backend import TransformersBackend

    no_eos_backend = TransformersBackend(str(no_eos_model_dir), device="cpu")
    settings = GenerationSettings(seed=7, max_new_tokens=256, max_denoising_steps=6, compiled=True)
    first = list(no_eos_backend.generate(PROMPT, settings))  # compiles on the backend's worker thread
    stock = _plain(no_eos_backend, settings)
    np.testing.assert_array_equal(first[-1].sequence, stock)
    records = list(no_eos_backend.generate(PROMPT, settings.replace(layers=(0, 1))))
    assert records[-1].error is None
    np.testing.assert_array_equal(records[-1].sequence, stock)
    steps = [r for r in records if isinstance(r, StepRecord)]
    assert all(s.layer_rms.shape == (2, 256) and s.layer_rms.min() > 0 for s in steps)
    assert _hooks_left(no_eos_backend.model) == []
    np.testing.assert_array_equal(list(no_eos_backend.generate(PROMPT, settings))[-1].sequence, stock)
    # pins on the compiled path: held at every step, and the run replays
    pinned = settings.replace(pins=((5, "sea"),))
    first, again = (list(no_eos_backend.generate(PROMPT, pinned)) for _ in range(2))
    np.testing.assert_array_equal(first[-1].sequence, again[-1].sequence)
    (position, token), = first[0].pins
    assert all(s.accepted[position] and s.canvas[position] == token for s in first if isinstance(s, StepRecord))
    assert first[-1].sequence[position] == token
    no_eos_backend.close()


def test_every_capture_guards_module_hooks_in_its_own_thread(random_backend):
    """dynamo's config is thread-local since torch 2.12 (a new thread starts from torch's defaults, which guard no
    hooks): the capture sets the guard in the thread that runs `generate`, before anything compiles there."""
    seen = {}

    def worker():
        with capture_steps(random_backend.model, lambda s: None, lambda b: None):
            seen["inside"] = torch._dynamo.config.skip_nnmodule_hook_guards

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"inside": False}


def test_backends_without_the_hooks_refuse_pins_and_layers_in_one_line(random_backend):
    """A backend declares what its capture can do (`Capabilities.knobs`); MLX's names neither, diffusers' both."""
    import dataclasses

    from backends.base import Capabilities

    class Without(type(random_backend)):
        capabilities = dataclasses.replace(random_backend.capabilities, knobs=random_backend.capabilities.knobs - {"pins", "layers"})

    backend = object.__new__(Without)
    backend.__dict__.update(random_backend.__dict__)
    for settings, what in ((GenerationSettings(pins=((1, "a"),)), "cannot pin tokens"), (GenerationSettings(layers=(0,)), "cannot record layers")):
        with pytest.raises(BackendError, match=what):
            backend.check(PROMPT, settings)
    from backends.diffusers_backend import CAPABILITIES as DIFFUSERS
    from backends.mlx_backend import CAPABILITIES as MLX

    assert isinstance(DIFFUSERS, Capabilities) and {"pins", "layers"} <= DIFFUSERS.knobs
    assert not {"pins", "layers"} & MLX.knobs


def test_diffusers_records_the_shift_of_the_distribution_it_summarizes(random_model_dir, monkeypatch):
    """diffusers' pipeline hands its callback the logits: the shift is recorded there too (float64 check);
    its layers and pins are tested in tests/test_diffusers_backend.py."""
    import backends.diffusers_capture as capture_module
    from backends.diffusers_backend import DiffusersBackend

    seen = spy_on_summaries(monkeypatch, capture_module)
    backend = DiffusersBackend(str(random_model_dir), device="cpu")
    settings = GenerationSettings(seed=2, max_new_tokens=256, max_denoising_steps=4)
    steps = [r for r in backend.generate("Name three rivers.", settings) if isinstance(r, StepRecord)]
    assert len(steps) == len(seen) >= 3 and steps[0].kl_nats is None
    for t in range(1, len(steps)):
        p = torch.log_softmax(seen[t][0].double(), -1)
        q = torch.log_softmax(seen[t - 1][0].double(), -1)
        np.testing.assert_allclose(steps[t].kl_nats, (p.exp() * (p - q)).sum(-1).numpy(), rtol=1e-4, atol=2e-5)
