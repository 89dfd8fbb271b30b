"""The Triton logit summary against a float64 and stable-sort reference: on a GPU if there is one, else on
the CPU through Triton's interpreter.

The kernels (backends/logit_summary_triton.py) are what the capture runs on CUDA. Without a GPU,
tests/conftest.py sets TRITON_INTERPRET=1 before anything imports triton (torch.compile does), and
`triton.jit` then runs them as numpy on CPU tensors. The interpreter runs Python, not the compiler,
so the last test also compiles the kernels for an H100 (sm_90a cubin, no GPU needed) in a fresh
process without the interpreter. Skipped where Triton is not installed (requirements-test.txt has
it on Linux x86_64).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

from backends.logit_summary import TRITON_MAX_TOPK, LogitSummary, summarize_in_torch  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# numpy evaluates both sides of every tl.where: the guarded -inf * 0 and log(0) warn, harmlessly.
pytestmark = [pytest.mark.model, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(scope="module")
def kernels():
    if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("no GPU, and TRITON_INTERPRET=1 was not set before triton was imported (tests/conftest.py sets it)")
    from backends import logit_summary_triton

    return logit_summary_triton


def awkward_logits(rows: int, vocab: int, seed: int) -> torch.Tensor:
    """Real-like rows (softcapped, tempered) and the rows that break naive kernels: masked (-inf)
    rows, rows with fewer finite logits than k, ties (also of -0.0 and 0.0), near-one-hot rows,
    and one row each holding +inf and NaN."""
    g = torch.Generator().manual_seed(seed)
    scale = torch.logspace(-1, 1.5, rows)[:, None]
    x = torch.tanh(torch.randn(rows, vocab, generator=g) * scale / 30) * 30 / 0.4
    x[0, vocab // 3] += 40  # nearly sure of one token
    x[1, : vocab - vocab // 10] = -float("inf")  # a processor masked most of the vocabulary
    x[2] = -float("inf")
    x[2, [vocab - 1, vocab // 2, 0]] = torch.tensor([1.0, 2.0, 1.0])  # three finite logits: the rest of the top-k is -inf
    x[3] = torch.randint(-3, 3, (vocab,), generator=g).float()  # six values: ties everywhere
    x[4] = x[4].to(torch.bfloat16).float()  # coarse values: many ties near the top
    x[4, [5, vocab - 2, vocab // 2]] = x[4].max() + 1  # a tied best across slices
    x[5] = -1.0
    x[5, [vocab - 1, 1]] = 0.0
    x[5, vocab // 2] = -0.0  # -0.0 ties with 0.0 (torch.topk compares them equal)
    x[6, vocab // 4] = float("inf")
    x[7, vocab // 5] = float("nan")
    return x


def reference(x: torch.Tensor, k: int):
    """float64 entropy (NaN where the row holds NaN or +inf), the first k of a stable descending sort, their probabilities."""
    entropy = torch.distributions.Categorical(logits=x.double(), validate_args=False).entropy()
    ids = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :k]
    probs = torch.softmax(x.double(), dim=-1).gather(-1, ids)
    return entropy, ids, probs


def poisoned_outputs(rows: int, k: int):
    """Outputs filled with values the kernels never write, so a slot left unwritten shows."""
    return (torch.full((rows,), float("nan"), device=DEVICE), torch.full((rows, k), -7, dtype=torch.int32, device=DEVICE),
            torch.full((rows, k), float("nan"), dtype=torch.float16, device=DEVICE))


def check(x: torch.Tensor, k: int, entropy, ids, probs) -> None:
    entropy, ids, probs = entropy.cpu(), ids.cpu(), probs.cpu()
    truth, expected_ids, expected_probs = reference(x, k)
    finite = ~torch.isnan(truth)
    assert torch.equal(torch.isnan(entropy), ~finite)  # NaN exactly where Categorical gives NaN: NaN, +inf, all -inf
    ours = entropy.double()[finite]
    assert torch.all((ours - truth[finite]).abs() <= 1e-6 * (1 + truth[finite].abs()))
    assert torch.equal(ids.long(), expected_ids)  # every row, NaN and +inf rows too
    torch.testing.assert_close(x.gather(-1, ids.long()), torch.topk(x, k).values, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(probs.double()[finite], expected_probs[finite], rtol=1e-3, atol=1e-5)


def run_into(kernels, x: torch.Tensor, k: int, **plan):
    outputs = poisoned_outputs(x.shape[0], k)
    kernels.summarize_into(x.to(DEVICE), k, *outputs, **plan)
    return outputs


@pytest.mark.parametrize("k", range(1, TRITON_MAX_TOPK + 1))
def test_every_k_matches_the_reference_on_awkward_rows(kernels, k):
    """5,000 ids in chunks of 512 over 4 slices: the last chunk of every slice is partial."""
    x = awkward_logits(10, 5000, seed=k)
    check(x, k, *run_into(kernels, x, k, block=512, slices=4))


@pytest.mark.parametrize("vocab, block, slices", [(1, 512, 4), (3, 512, 4), (17, 8, 3), (777, 64, 1), (4096, 256, 16), (6000, 1024, 64)])
def test_tiny_and_odd_rows(kernels, vocab, block, slices):
    """From one id to rows split in more slices than fit (the plan uses fewer), and one slice per row."""
    g = torch.Generator().manual_seed(vocab)
    x = torch.randn(3, vocab, generator=g) * 4
    if vocab > 1:
        x[1, ::2] = -float("inf")
    x[2] = -float("inf")  # nothing finite: NaN entropy, as Categorical gives
    k = min(5, vocab)
    check(x, k, *run_into(kernels, x, k, block=block, slices=slices))


def test_summary_has_the_api_types_and_leaves_the_logits_alone(kernels):
    base = (torch.randn(2, 6, 3000) * 5).to(DEVICE)
    logits = base[:, 1:, :2500]  # a view: row stride 3000, not 2500
    before = logits.clone()
    summary = LogitSummary(*kernels.summarize_triton(logits, 5, block=256, slices=4))
    assert torch.equal(logits, before)  # nothing written to what the model reads
    assert summary.entropy.shape == (2, 5) and summary.entropy.dtype == torch.float32
    assert summary.topk_ids.shape == (2, 5, 5) and summary.topk_ids.dtype == torch.int32
    assert summary.topk_probs.shape == (2, 5, 5) and summary.topk_probs.dtype == torch.float16
    assert summary.entropy.device == logits.device
    eager = summarize_in_torch(logits, 5)
    torch.testing.assert_close(summary.entropy, eager.entropy, rtol=0, atol=2e-6)
    assert torch.equal(summary.topk_ids, eager.topk_ids)  # no ties in random normal logits
    torch.testing.assert_close(summary.topk_probs, eager.topk_probs, rtol=2e-3, atol=0)
    off = LogitSummary(*kernels.summarize_triton(logits, 0, block=256, slices=4))
    assert off.topk_ids is None and off.topk_probs is None
    torch.testing.assert_close(off.entropy, summary.entropy, rtol=0, atol=0)
    half = logits.to(torch.bfloat16)  # read as it is, no float32 copy
    expected = torch.sort(half.float(), dim=-1, descending=True, stable=True).indices[..., :5]
    assert torch.equal(kernels.summarize_triton(half, 5, block=256, slices=4)[1].long(), expected)
    assert kernels.MAX_TOPK == TRITON_MAX_TOPK
    with pytest.raises(ValueError):
        kernels.summarize_triton(logits, TRITON_MAX_TOPK + 1)


def test_the_launch_plan_covers_the_vocabulary_once(kernels):
    for vocab, block, slices in [(262_144, 4096, 16), (262_144, 2048, 32), (5000, 512, 4), (3, 4096, 16), (6000, 1024, 64)]:
        block_used, slice_len, parts = kernels.launch_plan(vocab, block=block, slices=slices)
        assert slice_len % block_used == 0 and parts <= slices
        assert (parts - 1) * slice_len < vocab <= parts * slice_len  # no empty slice, no id left out
    assert kernels.launch_plan(262_144) == (2048, 16_384, 16)  # the default: 8 chunks per program


COMPILE_FOR_H100 = textwrap.dedent('''
    import sys
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from backends import logit_summary_triton as kernels

    assert isinstance(kernels._slice_kernel, triton.runtime.JITFunction)  # not the interpreter's
    block, slice_len, parts = kernels.launch_plan(262_144)
    for k in (0, 5, 16):
        kp = triton.next_power_of_2(max(k, 1))
        slice_kernel = ASTSource(kernels._slice_kernel, signature={
            "logits_ptr": "*fp32", "row_stride": "i32", "vocab": "i32", "slice_len": "i32", "peak_ptr": "*fp32",
            "total_ptr": "*fp32", "moment_ptr": "*fp32", "cand_ptr": "*i64",
            "K": "constexpr", "KP": "constexpr", "BLOCK": "constexpr", "CHUNKS": "constexpr",
        }, constexprs={"K": k, "KP": kp, "BLOCK": block, "CHUNKS": slice_len // block})
        combine_kernel = ASTSource(kernels._combine_kernel, signature={
            "peak_ptr": "*fp32", "total_ptr": "*fp32", "moment_ptr": "*fp32", "cand_ptr": "*i64",
            "entropy_ptr": "*fp32", "ids_ptr": "*i32", "probs_ptr": "*fp16", "parts": "i32",
            "K": "constexpr", "KP": "constexpr", "PARTS": "constexpr",
        }, constexprs={"K": k, "KP": kp, "PARTS": triton.next_power_of_2(parts)})
        for source, warps in ((slice_kernel, kernels.NUM_WARPS), (combine_kernel, 4)):
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            assert len(compiled.asm["cubin"]) > 1000
            print("compiled", source.fn.__name__, "k", k)
''')


@pytest.mark.processes
def test_kernels_compile_for_an_h100_without_a_gpu(tmp_path):
    """The interpreter never runs Triton's compiler: compile both kernels to sm_90a cubins (Triton's
    own LLVM and ptxas, no driver needed) at the real shape, with the default plan and k = 0, 5, 16."""
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    root = str(Path(__file__).resolve().parent.parent)
    env |= {"TRITON_CACHE_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", COMPILE_FOR_H100], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("compiled") == 6


def test_the_log_partition_for_the_shift_is_the_rows_log_sum_exp(kernels):
    """Asked for it, the combine kernel also writes each row's log sum exp from the entropy's max and sum (what
    `shift_nats` normalizes with, sparing it a read of the logits); -inf for a row with nothing finite."""
    x = awkward_logits(8, 3000, seed=3)[:7]  # without the NaN row
    x[6] = -float("inf")  # in place of the +inf row (NaN either way): nothing finite
    summary = kernels.summarize_triton(x.to(DEVICE), 5, block=256, slices=4, log_partition=True)
    assert len(summary) == 4 and summary[3].shape == (7,) and summary[3].dtype == torch.float32
    expected = torch.logsumexp(x.double(), -1)
    torch.testing.assert_close(summary[3].cpu().double()[:6], expected[:6], rtol=1e-6, atol=1e-6)
    assert summary[3][6] == -float("inf")
    assert len(kernels.summarize_triton(x.to(DEVICE), 5, block=256, slices=4)) == 3  # not asked: as before
