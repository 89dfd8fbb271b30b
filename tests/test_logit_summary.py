"""The capture's summary of the logits: the sampler's entropy to float32 rounding, the exact top-k."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from backends.logit_summary import TOPK_CHUNK, TRITON_MAX_TOPK, entropy_nats, summarize_logits, summary_path, top_k


def sampler_entropy(logits: torch.Tensor) -> torch.Tensor:
    """What transformers' EntropyBoundSampler thresholds (float32 Categorical)."""
    return torch.distributions.Categorical(logits=logits, validate_args=False).entropy()


def real_like_logits(rows: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """Logits shaped like the real model's: softcapped at 30, divided by a schedule temperature,
    from near-certain rows (one huge logit) to nearly flat ones."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-1, 1.5, rows)[:, None]
    logits = torch.tanh(torch.randn(rows, vocab, generator=g) * scale / 30) * 30
    logits[::3, 7] += 40  # some positions are nearly sure of their token
    return logits / 0.4


def test_entropy_matches_the_samplers_own_within_1e5_nats():
    logits = real_like_logits(48, 3072)
    ours, theirs = entropy_nats(logits), sampler_entropy(logits)
    assert ours.dtype == torch.float32
    assert (theirs < 0.01).any() and (theirs > 5).any()  # from near-certain to nearly flat
    assert torch.all((ours - theirs).abs() <= 1e-5)


def test_entropy_is_exact_at_the_real_vocabulary():
    """At 262,144 tokens the sampler's own float32 value on the CPU is off the float64 truth by up
    to 1.5e-4 nats here (the CPU softmax's fast exp: its probabilities sum to 1 + 2.6e-5); ours
    stays within float32 rounding of the truth. On CUDA both are close to the truth:
    benchmarks/bench_entropy.py prints the largest difference to the sampler's value there."""
    logits = real_like_logits(24, 262144)
    truth = torch.distributions.Categorical(logits=logits.double(), validate_args=False).entropy()
    ours = entropy_nats(logits).double()
    assert torch.all((ours - truth).abs() <= 1e-6 * (1 + truth))


def test_two_stage_top_k_finds_the_same_candidates_as_one_topk():
    vocab = 16 * TOPK_CHUNK
    logits = real_like_logits(40, vocab, seed=3)
    logits[5, 100:110] = logits[5].max() + 1  # ties inside one slice
    values, ids = top_k(logits, 5)
    expected_values, expected_ids = torch.topk(logits, 5)
    assert torch.equal(values, expected_values)
    rows_without_ties = [r for r in range(40) if r != 5]
    assert torch.equal(ids[rows_without_ties], expected_ids[rows_without_ties])
    assert torch.all(logits.gather(-1, ids) == expected_values)  # a tie may pick another id of equal logit


def test_summary_probabilities_are_the_softmax_of_the_candidates():
    logits = real_like_logits(12, 3072)[None]
    summary = summarize_logits(logits, 5)
    assert summary.topk_ids.dtype == torch.int32 and summary.topk_probs.dtype == torch.float16
    assert summary.topk_ids.shape == (1, 12, 5)
    softmax = torch.softmax(logits, dim=-1)
    expected = softmax.gather(-1, summary.topk_ids.long())
    torch.testing.assert_close(summary.topk_probs.float(), expected, rtol=1e-3, atol=1e-4)
    assert torch.all(summary.topk_probs[..., :-1] >= summary.topk_probs[..., 1:])  # best first
    assert torch.equal(summary.topk_ids[..., 0].long(), logits.argmax(-1))
    off = summarize_logits(logits, 0)
    assert off.topk_ids is None and torch.equal(off.entropy, summary.entropy)


@pytest.mark.model
def test_compiled_summary_equals_the_eager_one():
    """The CUDA path compiles the same function; compiled here on the CPU to check it agrees."""
    logits = real_like_logits(8, 8 * TOPK_CHUNK, seed=5)[None]
    eager = summarize_logits(logits, 5, compiled=False)
    compiled = summarize_logits(logits, 5, compiled=True)
    torch.testing.assert_close(compiled.entropy, eager.entropy, rtol=0, atol=2e-6)
    assert torch.equal(compiled.topk_ids, eager.topk_ids)
    np.testing.assert_allclose(compiled.topk_probs.float().numpy(), eager.topk_probs.float().numpy(), rtol=2e-3)


def test_masked_logits_add_nothing_to_the_entropy():
    """A processor's -inf (a masked token) is a zero-probability token, not a NaN: the entropy is the
    sampler's over the tokens left. NaN or +inf in a row give NaN, as the sampler's Categorical does."""
    logits = real_like_logits(6, 3072, seed=2)
    logits[1, 100:] = -float("inf")
    logits[2, 5] = float("inf")
    logits[3, 9] = float("nan")
    ours, theirs = entropy_nats(logits), sampler_entropy(logits)
    assert torch.equal(torch.isnan(ours), torch.tensor([False, False, True, True, False, False]))
    assert torch.equal(torch.isnan(theirs), torch.isnan(ours))
    fine = ~torch.isnan(ours)
    assert torch.all((ours[fine] - theirs[fine]).abs() <= 1e-5)
    summary = summarize_logits(logits, 5)
    assert torch.equal(summary.topk_ids.long(), torch.topk(logits, 5).indices)  # NaN ranks first, as in torch.topk


def test_the_summary_runs_where_compiled_says():
    """Triton only for CUDA tensors and k up to TRITON_MAX_TOPK; compiled=False is always eager."""
    from types import SimpleNamespace

    cuda = SimpleNamespace(is_cuda=True, shape=(1, 256, 262_144))
    cpu = SimpleNamespace(is_cuda=False, shape=(1, 256, 262_144))
    assert summary_path(cuda, 5) == "triton" and summary_path(cuda, 0) == "triton"
    assert summary_path(cuda, TRITON_MAX_TOPK + 1) == "compiled"
    assert summary_path(SimpleNamespace(is_cuda=True, shape=(1, 4)), 5) == "compiled"  # k > vocab: torch.topk's error
    assert summary_path(cuda, 5, compiled=False) == "eager"
    assert summary_path(cpu, 5) == "eager" and summary_path(cpu, 5, compiled=True) == "compiled"


def test_without_triton_the_summary_falls_back_to_torch_compile_with_one_warning(monkeypatch):
    import sys

    import backends.logit_summary as module

    monkeypatch.setattr(module, "_triton_state", "untried")
    monkeypatch.setitem(sys.modules, "backends.logit_summary_triton", None)  # import fails as without triton
    logits = real_like_logits(4, 2048)
    with pytest.warns(RuntimeWarning, match="Triton logit summary unavailable"):
        assert module._try_triton(logits, 5) is None
    assert module._triton_state == "off"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert module._try_triton(logits, 5) is None  # no second warning, no second try


def test_a_failing_first_launch_falls_back_and_a_working_one_stays(monkeypatch):
    import sys
    import types

    import backends.logit_summary as module

    calls = []

    def broken(logits, k, **options):
        calls.append(k)
        raise RuntimeError("ptxas: no such GPU")

    fake = types.SimpleNamespace(summarize_triton=broken)
    monkeypatch.setitem(sys.modules, "backends.logit_summary_triton", fake)
    monkeypatch.setattr(module, "_triton_state", "untried")
    with pytest.warns(RuntimeWarning, match=r"\(RuntimeError: ptxas: no such GPU\); using torch.compile"):  # says what failed
        assert module._try_triton(real_like_logits(2, 64), 5) is None
    assert module._try_triton(real_like_logits(2, 64), 5) is None and calls == [5]

    fake.summarize_triton = lambda logits, k, **options: module.summarize_in_torch(logits, k)
    monkeypatch.setattr(module, "_triton_state", "untried")
    monkeypatch.setattr(module, "_triton_summarize", None)
    first = module._try_triton(real_like_logits(2, 64), 3)
    assert module._triton_state == "ok" and first.topk_ids.shape == (2, 3)
    assert module._try_triton(real_like_logits(2, 64), 3) is not None

    def later_failure(logits, k, **options):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(module, "_triton_summarize", later_failure)  # once it worked, errors are real ones
    with pytest.raises(RuntimeError, match="out of memory"):
        module._try_triton(real_like_logits(2, 64), 3)
    assert module._triton_state == "ok"


def test_top_k_of_a_vocabulary_the_slices_do_not_divide_is_one_topk():
    """Two stages need whole slices: a vocabulary past 8 slices that is not a multiple of TOPK_CHUNK
    (or k = 1, or two_stage off) must still give torch.topk's candidates."""
    logits = real_like_logits(6, 8 * TOPK_CHUNK + 1, seed=4)
    for k in (1, 5):
        values, ids = top_k(logits, k)
        expected_values, expected_ids = torch.topk(logits, k)
        assert torch.equal(values, expected_values) and torch.equal(ids, expected_ids)
    two = real_like_logits(3, 8 * TOPK_CHUNK, seed=6)
    assert torch.equal(top_k(two, 3, two_stage=False)[1], torch.topk(two, 3).indices)
    one = summarize_logits(two[None], 1)  # one candidate: the argmax, with its probability
    assert one.topk_ids.shape == (1, 3, 1) and torch.equal(one.topk_ids[0, :, 0].long(), two.argmax(-1))
    torch.testing.assert_close(one.topk_probs[0, :, 0].float(), torch.softmax(two, -1).amax(-1), rtol=1e-3, atol=1e-4)


def test_the_triton_path_is_taken_up_to_its_largest_k_and_when_the_canvas_is_shorter():
    """k is compared with the vocabulary (the last axis), never with the canvas."""
    from types import SimpleNamespace

    cuda = SimpleNamespace(is_cuda=True, shape=(1, 4, 262_144))  # a canvas of 4, shorter than k
    assert summary_path(cuda, TRITON_MAX_TOPK) == "triton" and summary_path(cuda, 5) == "triton"


@pytest.mark.model
def test_summarize_logits_uses_triton_where_it_runs_else_compiles_once(monkeypatch):
    """The dispatch, without a GPU: Triton's summary is returned as is; where Triton gives None the
    summary comes from one torch.compile of `summarize_in_torch` (fixed shapes: dynamic=False), reused."""
    import backends.logit_summary as module

    logits = real_like_logits(2, 64)[None]
    triton_summary = module.LogitSummary(torch.zeros(1, 2), None, None)
    answers = [triton_summary, None, None]
    asked, compiled = [], []

    def fake_try_triton(x, k, log_partition=False):
        asked.append((x, k))
        return answers[len(asked) - 1]

    def fake_compile(fn, **options):
        compiled.append((fn, options))
        return lambda x, k, **options: ("compiled", x, k)

    paths = []
    monkeypatch.setattr(module, "summary_path", lambda x, k, compiled=None: paths.append((x, k, compiled)) or "triton")
    monkeypatch.setattr(module, "_try_triton", fake_try_triton)
    monkeypatch.setattr(module, "_compiled_summarize", None)
    monkeypatch.setattr(module.torch, "compile", fake_compile)
    assert module.summarize_logits(logits, 5) is triton_summary
    assert compiled == []
    assert module.summarize_logits(logits, 5) == ("compiled", logits, 5)
    assert module.summarize_logits(logits, 3, compiled=True) == ("compiled", logits, 3)
    assert paths == [(logits, 5, None), (logits, 5, None), (logits, 3, True)]  # the caller's k and choice
    assert [k for _, k in asked] == [5, 5, 3] and all(x is logits for x, _ in asked)
    assert compiled == [(module.summarize_in_torch, {"dynamic": False})]


def test_on_the_cpu_nothing_is_compiled_unless_asked(monkeypatch):
    """compiled=None means "on CUDA": a CPU (or MPS) run stays eager, as compiling costs it more than it saves."""
    import backends.logit_summary as module

    def no_compile(*args, **kwargs):
        raise AssertionError("torch.compile was called for CPU logits")

    monkeypatch.setattr(module, "_compiled_summarize", None)
    monkeypatch.setattr(module.torch, "compile", no_compile)
    logits = real_like_logits(3, 64)[None]
    summary = module.summarize_logits(logits, 2)
    assert torch.equal(summary.topk_ids[0].long(), torch.topk(logits[0], 2).indices)


def test_shift_equals_float64_kl_with_masked_tokens():
    """`shift_nats`: KL(p || q) per position against float64, with -inf logits in p, in q and in both."""
    from backends.logit_summary import shift_nats

    torch.manual_seed(0)
    before, now = torch.randn(3, 7, 50) * 3, torch.randn(3, 7, 50) * 3
    before[0, 0, :10] = float("-inf")  # q = 0 where p = 0 too: adds nothing
    now[0, 0, :10] = float("-inf")
    now[1, 1, 5:] = float("-inf")  # p = 0 on most tokens
    first, logq = shift_nats(before, None, compiled=False)
    assert torch.equal(first, torch.zeros(3, 7))
    kl, logp = shift_nats(now, logq, compiled=False)
    p, q = torch.log_softmax(now.double(), -1), torch.log_softmax(before.double(), -1)
    expected = torch.where(p.exp() == 0, 0.0, p.exp() * (p - q)).sum(-1)
    torch.testing.assert_close(kl.double(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logp, torch.log_softmax(now, -1), rtol=1e-6, atol=1e-6)  # what the next step compares with
    before[2, 3, 0] = float("-inf")  # p > 0 where q = 0: infinite, kept as float32's largest (a trace holds finite numbers)
    _, logq = shift_nats(before, None, compiled=False)
    kl, _ = shift_nats(now, logq, compiled=False)
    assert kl[2, 3] == torch.finfo(torch.float32).max and torch.isfinite(kl).all()


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.model)], ids=["eager", "compiled"])
def test_the_shift_given_the_summarys_log_partition_is_the_same_kl(compiled):
    """The capture hands the shift the summary's log sum exp (from the entropy's own max and sum): one pass over
    the logits instead of three, the same KL against float64, masked tokens included."""
    from backends.logit_summary import shift_nats

    torch.manual_seed(1)
    before, now = real_like_logits(9, 4096, seed=2)[None], real_like_logits(9, 4096, seed=3)[None]
    now[0, 0, 5:] = float("-inf")
    first = summarize_logits(before, 5, compiled=compiled, log_partition=True)
    _, logq = shift_nats(before, None, log_partition=first.log_partition, compiled=compiled)
    summary = summarize_logits(now, 5, compiled=compiled, log_partition=True)
    torch.testing.assert_close(summary.log_partition, torch.logsumexp(now, -1), rtol=0, atol=2e-6)
    kl, logp = shift_nats(now, logq, log_partition=summary.log_partition, compiled=compiled)
    p, q = torch.log_softmax(now.double(), -1), torch.log_softmax(before.double(), -1)
    expected = torch.where(p.exp() == 0, 0.0, p.exp() * (p - q)).sum(-1)
    torch.testing.assert_close(kl.double(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logp.double(), p, rtol=1e-6, atol=4e-6)  # float32 ulps
    assert summarize_logits(now, 5, compiled=compiled).log_partition is None  # not asked, not computed
