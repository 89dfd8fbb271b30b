"""What the capture keeps of a step's logits: the entropy and the top-k candidates of every position.

Computed on the device from the processed float32 logits the sampler sees, and small enough to
copy every step: (canvas,) float32 entropies, (canvas, k) int32 ids and (canvas, k) float16
probabilities. The logits themselves never leave the device, and nothing here writes to them.

    summary = summarize_logits(logits, k=5)        # LogitSummary(entropy, topk_ids, topk_probs)

The entropy uses the max-shifted form  H = log s - t / s  with  s = sum exp(x - m),
t = sum exp(x - m) (x - m),  m = max x,  which stays exact where it matters (near-certain
positions, H close to 0) and needs no normalized copy of the logits. A -inf logit (a token a
processor masked) adds nothing to s or t; NaN or +inf in a row make its entropy NaN, as
`torch.distributions.Categorical` does.

Where it runs, by `compiled` (default: "on CUDA"):
- on CUDA with Triton installed and k <= TRITON_MAX_TOPK: two Triton kernels that read the
  logits once for the entropy and the top-k (`logit_summary_triton.py`; its candidates are those
  of a stable descending sort: torch.topk's values, the lowest ids among tied values);
- otherwise compiled: one `torch.compile`d function (Inductor fuses the entropy; the top-k is
  two-stage `torch.topk`: by default Inductor calls aten topk); the fallback when Triton is
  missing or its first launch fails;
- not compiled (CPU, MPS): the same formula eagerly: compiling for a small CPU model costs more
  than it saves.
benchmarks/bench_entropy.py times them on one real-shaped step and checks each against a float64
reference and torch.topk.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

TOPK_CHUNK = 1024  # the two-stage top-k's first stage works on vocabulary slices of this many ids
TRITON_MAX_TOPK = 16  # logit_summary_triton.MAX_TOPK: larger k goes to torch.compile


class LogitSummary(NamedTuple):
    entropy: torch.Tensor  # (batch, canvas) float32, nats
    topk_ids: torch.Tensor | None  # (batch, canvas, k) int32, most probable first; None when k == 0
    topk_probs: torch.Tensor | None  # (batch, canvas, k) float16
    log_partition: torch.Tensor | None = None  # (batch, canvas) float32 log sum exp, when asked: the shift's normalizer


def entropy_nats(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) over the last axis, in float32, from one max-shifted pass."""
    return _entropy_parts(logits.float())[2]


def _entropy_parts(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(max, sum of exp(x - max), entropy) of float32 logits x over the last axis."""
    peak = x.amax(dim=-1, keepdim=True)
    shifted = x - peak
    weights = shifted.exp()
    total = weights.sum(dim=-1)
    moment = torch.where(weights == 0, 0.0, weights * shifted)  # a -inf logit: 0 * -inf would be NaN; it adds 0
    return peak, total, total.log() - moment.sum(dim=-1) / total


def top_k(logits: torch.Tensor, k: int, *, two_stage: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, ids) of the k largest logits at every position, largest first.

    For a large vocabulary the search runs in two stages, each on short rows (the top k of
    every slice of TOPK_CHUNK ids, then the top k of those): the same candidates as one
    `torch.topk` over the whole row, found without its multi-pass radix select on 262,144 ids.
    """
    vocab = logits.shape[-1]
    if not two_stage or vocab % TOPK_CHUNK or vocab < 8 * TOPK_CHUNK:
        return torch.topk(logits, k, dim=-1)
    slices = logits.unflatten(-1, (vocab // TOPK_CHUNK, TOPK_CHUNK))
    values, inner = torch.topk(slices, k, dim=-1)  # (..., slices, k)
    offsets = torch.arange(0, vocab, TOPK_CHUNK, device=logits.device)[:, None]
    values, ids = values.flatten(-2), (inner + offsets).flatten(-2)
    best, where = torch.topk(values, k, dim=-1)
    return best, torch.gather(ids, -1, where)


def summarize_in_torch(logits: torch.Tensor, k: int, two_stage: bool = True, log_partition: bool = False) -> LogitSummary:
    """The summary in plain torch ops: what `summarize_logits` runs eagerly and what it compiles (the
    benchmark compiles it with other options)."""
    x = logits.float()
    peak, total, entropy = _entropy_parts(x)
    lse = peak[..., 0] + total.log() if log_partition else None
    if k == 0:
        return LogitSummary(entropy, None, None, lse)
    values, ids = top_k(x, k, two_stage=two_stage)
    probs = (values - peak).exp() / total[..., None]
    return LogitSummary(entropy, ids.to(torch.int32), probs.to(torch.float16), lse)


def _shift(logits: torch.Tensor, previous: torch.Tensor | None,
           log_partition: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(KL(p || q) per position in nats, log p) for p = softmax(logits), q = exp(previous); KL is 0 without q.
    `log_partition` (the summary's log sum exp of the same logits) spares the two reads that compute it."""
    x = logits.float()
    lse = torch.logsumexp(x, dim=-1) if log_partition is None else log_partition
    logp = x - lse[..., None]
    if previous is None:
        return torch.zeros(x.shape[:-1], device=x.device), logp
    p = logp.exp()
    # p = 0 adds nothing (also where q = 0: 0 * (-inf + inf) would be NaN); p > 0 where q = 0 is +inf, kept as the
    # largest float32 so that a trace (JSON, finite numbers only) can hold it
    kl = torch.where(p == 0, 0.0, p * (logp - previous)).sum(dim=-1)
    return kl.clamp(max=torch.finfo(torch.float32).max), logp


_compiled_shift = None


def shift_nats(logits: torch.Tensor, previous: torch.Tensor | None, *, log_partition: torch.Tensor | None = None,
               compiled: bool | None = None):
    """The step-to-step shift: (KL(p_t || p_t-1) of every position in float32 nats, log p_t to keep for the next step).

    `previous` is the log p of the step before (what this returned last), None at a block's first
    step. The kept log p is one float32 distribution per position: batch x canvas x vocab x 4 bytes
    (256 MiB a row at the real 256 x 262,144). Compiled on CUDA (Inductor fuses the passes) whatever
    the summary path, the Triton one included. Given `log_partition` (`summarize_logits(...,
    log_partition=True)`: the entropy's own max and sum, no extra read), this is one pass: read the
    logits and the previous log p, write log p, sum the KL; without it, two more reads for the log sum exp."""
    global _compiled_shift
    if compiled is None:
        compiled = logits.is_cuda
    if not compiled:
        return _shift(logits, previous, log_partition)
    if _compiled_shift is None:
        _compiled_shift = torch.compile(_shift, dynamic=False)
    return _compiled_shift(logits, previous, log_partition)


_compiled_summarize = None
_triton_summarize = None  # logit_summary_triton.summarize_triton once imported and launched once
_triton_state = "untried"  # "untried", "ok", or "off" (not installed, or its first launch failed)


def _try_triton(logits: torch.Tensor, k: int, log_partition: bool = False) -> LogitSummary | None:
    """The Triton summary, or None where it is not to be used: no Triton, or its first launch failed.

    Only the first launch is guarded (an old Triton or an unsupported GPU fails while compiling):
    the capture then falls back to torch.compile for the rest of the process, with one warning.
    Later errors are real ones and propagate."""
    global _triton_summarize, _triton_state
    if _triton_state == "off":
        return None
    if _triton_state == "ok":
        return LogitSummary(*_triton_summarize(logits, k, log_partition=log_partition))
    try:
        from .logit_summary_triton import summarize_triton

        summary = LogitSummary(*summarize_triton(logits, k, log_partition=log_partition))
    except Exception as error:  # noqa: BLE001 - any failure to import or compile means "use the fallback"
        _triton_state = "off"
        warnings.warn(f"Triton logit summary unavailable ({type(error).__name__}: {error}); using torch.compile",
                      RuntimeWarning, stacklevel=3)
        return None
    _triton_summarize, _triton_state = summarize_triton, "ok"
    return summary


def triton_in_use() -> bool:
    """Whether the Triton kernels summarize this process's logits (False before their first launch,
    and after a failed one: then torch.compile does)."""
    return _triton_state == "ok"


def summary_path(logits: torch.Tensor, k: int, compiled: bool | None = None) -> str:
    """Where `summarize_logits` computes this summary: "eager", "triton" or "compiled" ("triton" falls
    back to "compiled" where Triton is missing or its first launch failed)."""
    if compiled is None:
        compiled = logits.is_cuda
    if not compiled:
        return "eager"
    if logits.is_cuda and k <= min(TRITON_MAX_TOPK, logits.shape[-1]):
        return "triton"
    return "compiled"


def summarize_logits(logits: torch.Tensor, k: int, *, compiled: bool | None = None,
                     log_partition: bool = False) -> LogitSummary:
    """Entropy and top-k of the processed logits; `compiled` defaults to "on CUDA" (see the module docstring).
    `log_partition` also keeps each row's log sum exp, from the entropy's own max and sum (for `shift_nats`)."""
    global _compiled_summarize
    path = summary_path(logits, k, compiled)
    if path == "eager":
        return summarize_in_torch(logits, k, log_partition=log_partition)
    if path == "triton":
        summary = _try_triton(logits, k, log_partition)
        if summary is not None:
            return summary
    if _compiled_summarize is None:
        # Default mode, not "reduce-overhead": CUDA-graph outputs would be overwritten at the next
        # replay, and these are read after the step. Shapes are fixed for a run, so no dynamic shapes.
        _compiled_summarize = torch.compile(summarize_in_torch, dynamic=False)
    return _compiled_summarize(logits, k, log_partition=log_partition)
