"""The capture changes nothing: captured runs equal plain `model.generate`, bit for bit.

Each case runs stock generation first and the captured backend second on the same model, so on
the compiled path the second run also exercises the compiled `accept_canvas` that stays bound to
the first run's sampler.  Eager and compiled runs differ from each other for the same seed (the
compiled kernels round differently), so each is compared on its own path. The backend records the
top-5 candidates of every position by default (`record_topk`), so every equality here holds with
the candidates recorded.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backends.capture import capture_steps
from tests.spies import spy_on_summaries
from visualizer.records import BlockRecord, RunEnd, StepRecord
from visualizer.settings import GenerationSettings


def plain_sequence(backend, prompt: str, settings: GenerationSettings) -> np.ndarray:
    resolved = backend.resolve(settings)
    ids = backend.prompt_ids(prompt)
    torch.manual_seed(resolved.seed)
    out = backend.model.generate(torch.tensor([ids]), **backend.generate_kwargs(resolved))
    return out.sequences[0, len(ids):].numpy()


def captured(backend, prompt: str, settings: GenerationSettings):
    records = list(backend.generate(prompt, settings))
    assert all(r.topk == settings.record_topk for r in records if isinstance(r, StepRecord))
    return records, records[-1]


CASES = {
    "one block": dict(max_new_tokens=256, entropy_bound=0.1),
    "three blocks": dict(max_new_tokens=700, entropy_bound=1.0, max_denoising_steps=12),
}


# Compiled, the three blocks only: each compile costs ~15 s on CPU, and a one-block run takes the compiled path of
# their first block (the same capture, a smaller static cache). The eager one-block case stays: it is cheap.
@pytest.mark.parametrize("case, compiled", [("one block", False), ("three blocks", False), ("three blocks", True)],
                         ids=["one block-eager", "three blocks-eager", "three blocks-compiled"])
def test_captured_sequence_equals_plain_generate(no_eos_backend, case, compiled):
    settings = GenerationSettings(seed=7, compiled=compiled, **CASES[case])
    prompt = "Write a six-line poem about the ocean."
    expected = plain_sequence(no_eos_backend, prompt, settings)
    records, end = captured(no_eos_backend, prompt, settings)

    assert isinstance(end, RunEnd) and end.error is None
    np.testing.assert_array_equal(end.sequence, expected)
    blocks = [r for r in records if isinstance(r, BlockRecord)]
    assert len(blocks) == -(-settings.max_new_tokens // 256)
    # The record stream describes that same run: committed tokens are the sequence, block by block.
    np.testing.assert_array_equal(np.concatenate([b.tokens for b in blocks]), expected)
    steps = [r for r in records if isinstance(r, StepRecord)]
    assert sum(b.steps_used for b in blocks) == len(steps)
    # The last step's argmax of a block is what the block commits (no EOS here, so no pad either).
    for b in blocks:
        last = [s for s in steps if s.block == b.block][-1]
        np.testing.assert_array_equal(last.argmax, b.tokens)


def test_capture_matches_stock_with_eos_and_padding(random_backend):
    """Random weights put an EOS in some canvases (about one in seven with the 3,072-token
    vocabulary): the pad after it must match too."""
    prompt = "Why is the sky blue?"
    for seed in range(40):  # the first seed whose run holds an EOS; about two in five runs of 3 blocks do
        settings = GenerationSettings(seed=seed, max_new_tokens=768, max_denoising_steps=4)
        records, end = captured(random_backend, prompt, settings)
        if end.finish_reason == "eos":
            break
    assert end.finish_reason == "eos", "no seed of 40 produced an EOS: the random model changed"
    np.testing.assert_array_equal(end.sequence, plain_sequence(random_backend, prompt, settings))
    block = [r for r in records if isinstance(r, BlockRecord)][-1]  # the run ends with the block holding the EOS
    assert block.eos_position is not None
    assert block.tokens[block.eos_position] in random_backend.info.eos_token_ids
    assert np.all(block.tokens[block.eos_position + 1 :] == random_backend.info.pad_token_id)


def test_recorded_entropy_is_the_samplers_entropy(random_backend):
    """The entropy the sampler thresholds decides acceptance: recompute the rule from the record."""
    bound = 30.0  # random weights give ~6.4 nats a position: several positions fit under this bound
    settings = GenerationSettings(seed=1, max_new_tokens=256, entropy_bound=bound, max_denoising_steps=6)
    for record in random_backend.generate("Count to ten.", settings):
        if isinstance(record, StepRecord):
            order = np.argsort(record.entropy_nats, kind="stable")
            sorted_entropy = record.entropy_nats[order]
            selected = np.cumsum(sorted_entropy, dtype=np.float32) - sorted_entropy <= np.float32(bound)
            k = int(selected.sum())
            assert k > 1
            assert set(np.flatnonzero(record.accepted)) == set(order[:k].tolist())
            assert np.all(record.entropy_nats >= 0) and np.all(record.entropy_nats <= np.log(random_backend.info.vocab_size) + 1e-4)


def _leftover_wrappers(model):
    names = ("_prepare_logits_processor", "_prepare_denoiser_inputs", "_denoising_step", "_finalize_canvas")
    return [n for n in names if n in vars(model)]


def test_no_wrapper_survives_success_error_or_stop(random_backend):
    model = random_backend.model
    with capture_steps(model, lambda s: None, lambda b: None):
        assert len(_leftover_wrappers(model)) == 4
    assert _leftover_wrappers(model) == []

    with pytest.raises(RuntimeError, match="boom"):
        with capture_steps(model, lambda s: None, lambda b: None):
            raise RuntimeError("boom")
    assert _leftover_wrappers(model) == []

    def explode(step):
        raise ValueError("consumer failed")

    with pytest.raises(ValueError):
        with capture_steps(model, explode, lambda b: None):
            model.generate(torch.tensor([[2, 105, 200, 106]]), max_new_tokens=256, max_denoising_steps=3)
    assert _leftover_wrappers(model) == []

    records = list(random_backend.generate("hello", GenerationSettings(max_new_tokens=256)))
    assert records[-1].finish_reason in ("eos", "length")
    assert _leftover_wrappers(model) == []


def test_capture_refuses_to_nest(random_backend):
    model = random_backend.model
    with capture_steps(model, lambda s: None, lambda b: None):
        with pytest.raises(RuntimeError, match="already active"):
            with capture_steps(model, lambda s: None, lambda b: None):
                pass
    assert _leftover_wrappers(model) == []


def test_recorded_candidates_and_entropy_are_those_of_the_samplers_logits(random_backend, monkeypatch):
    """Spy on the logits the appended processor summarizes (the processed logits the sampler
    sees): the record holds their top-k and, within 1e-5 nats, the sampler's own entropy."""
    import backends.capture as capture_module

    seen = spy_on_summaries(monkeypatch, capture_module)
    settings = GenerationSettings(seed=3, max_new_tokens=256, max_denoising_steps=5, record_topk=4)
    steps = [r for r in random_backend.generate("Name three rivers.", settings) if isinstance(r, StepRecord)]
    assert len(steps) == len(seen) == 5
    for record, logits in zip(steps, seen):
        assert record.topk == 4 and record.topk_ids.shape == (256, 4) and record.topk_probs.dtype == np.float16
        values, ids = torch.topk(logits[0].float(), 4)
        np.testing.assert_array_equal(record.topk_ids, ids.numpy())
        probs = torch.softmax(logits[0].float(), -1).gather(-1, ids).numpy()
        np.testing.assert_allclose(record.topk_probs.astype(np.float32), probs, rtol=1e-3, atol=1e-4)
        sampler = torch.distributions.Categorical(logits=logits[0]).entropy().numpy()
        assert np.max(np.abs(record.entropy_nats - sampler)) <= 1e-5
        np.testing.assert_array_equal(record.topk_ids[:, 0], record.argmax)  # the best candidate is the argmax


def test_top_k_off_records_no_candidates(random_backend):
    settings = GenerationSettings(seed=3, max_new_tokens=256, max_denoising_steps=3, record_topk=0)
    steps = [r for r in random_backend.generate("hi", settings) if isinstance(r, StepRecord)]
    assert steps and all(s.topk_ids is None and s.topk == 0 for s in steps)
