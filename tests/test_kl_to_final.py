"""KL to the final step (`--kl-to-final`, backends/kl_to_final.py): exact against a float64 recomputation,
zero at each block's last step, the run unchanged, absent when off, in the trace and refused where not built."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backends import BackendError
from tests.spies import spy_on_summaries
from visualizer.records import BlockRecord, RunEnd, StepRecord
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace
from visualizer.trace_format import TraceError


def _records(backend, settings, prompt="Name three rivers."):
    return list(backend.generate(prompt, settings))


def test_kl_to_final_equals_a_float64_recomputation_and_is_zero_at_the_end(no_eos_backend, monkeypatch):
    import backends.capture as capture_module

    seen = spy_on_summaries(monkeypatch, capture_module)  # both passes' logits: pass 1's first
    settings = GenerationSettings(seed=3, max_new_tokens=512, max_denoising_steps=5, kl_to_final=True)
    records = _records(no_eos_backend, settings)
    steps = [r for r in records if isinstance(r, StepRecord)]
    assert len(steps) == 10 and len(seen) == 20
    for first, second in zip(seen[:10], seen[10:]):  # the two passes saw the same logits, bit for bit
        assert torch.equal(first, second)
    seen = seen[10:]
    for block in (0, 1):
        mine = [(s, logits) for s, logits in zip(steps, seen) if s.block == block]
        final = torch.log_softmax(mine[-1][1][0].double(), -1)
        for s, logits in mine:
            p_t = torch.log_softmax(logits[0].double(), -1)
            expected = (final.exp() * (final - p_t)).sum(-1).numpy()
            assert s.kl_to_final_nats.dtype == np.float32
            np.testing.assert_allclose(s.kl_to_final_nats, expected, rtol=1e-4, atol=2e-5)
        assert np.all(mine[-1][0].kl_to_final_nats == 0)  # the final distribution against itself: exactly 0
        assert mine[0][0].kl_to_final_nats.max() > 0.01  # random weights move: not a comparison of zeros


def test_kl_to_final_leaves_the_run_as_it_was(no_eos_backend):
    base = GenerationSettings(seed=5, max_new_tokens=256, max_denoising_steps=4)
    plain, with_kl = _records(no_eos_backend, base), _records(no_eos_backend, base.replace(kl_to_final=True))
    assert np.array_equal(plain[-1].sequence, with_kl[-1].sequence)
    for a, b in zip([r for r in plain if isinstance(r, StepRecord)], [r for r in with_kl if isinstance(r, StepRecord)]):
        assert np.array_equal(a.canvas, b.canvas) and np.array_equal(a.entropy_nats, b.entropy_nats)
        assert a.kl_to_final_nats is None and b.kl_to_final_nats is not None


def test_off_the_trace_is_unchanged_and_on_it_round_trips(random_backend):
    settings = GenerationSettings(seed=2, max_new_tokens=256, max_denoising_steps=3)
    off = Trace(random_backend.info, "Hi")
    for r in random_backend.generate("Hi", settings):
        off.append(r)
    assert "kl_to_final" not in off.start.settings and "kl_to_final_nats" not in off.to_json()
    on = Trace(random_backend.info, "Hi")
    for r in random_backend.generate("Hi", settings.replace(kl_to_final=True)):
        on.append(r)
    again = Trace.from_json(on.to_json())
    assert again == on and again.steps[0].kl_to_final_nats is not None
    data = on.to_dict()
    del data["steps"][0]["kl_to_final_nats"]
    with pytest.raises(TraceError, match="no kl_to_final_nats though settings.kl_to_final is on"):
        Trace.from_dict(data)
    data = off.to_dict()
    data["steps"][0]["kl_to_final_nats"] = [0.0] * off.canvas_length
    with pytest.raises(TraceError, match="kl_to_final is off"):
        Trace.from_dict(data)


def test_a_second_pass_that_differs_is_refused(no_eos_backend, monkeypatch):
    """Pass 2 must commit what pass 1 did; a run that is not bit-identical is refused, never recorded."""
    import backends.transformers_backend as tb

    real = tb.check_block
    monkeypatch.setattr(tb, "check_block", lambda on_block, first: real(on_block, [
        type(b)(**{**b.__dict__, "tokens": b.tokens + 1}) for b in first]))
    records = _records(no_eos_backend, GenerationSettings(seed=1, max_new_tokens=256, max_denoising_steps=2, kl_to_final=True))
    end = records[-1]
    assert isinstance(end, RunEnd) and end.finish_reason == "error" and "not bit-identical" in end.error
    assert not [r for r in records if isinstance(r, BlockRecord)]


def test_other_backends_refuse_it_in_one_line(random_model_dir):
    from backends.diffusers_backend import DiffusersBackend

    backend = DiffusersBackend(str(random_model_dir), device="cpu")
    with pytest.raises(BackendError, match="cannot record the KL to the final step"):
        backend.check("Hi", GenerationSettings(kl_to_final=True))
