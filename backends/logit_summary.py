"""What the capture keeps of a step's logits: the entropy and the top-k candidates of every position.

Computed on the device from the processed float32 logits the sampler sees, and small enough to
copy every step: (canvas,) float32 entropies, (canvas, k) int32 ids and (canvas, k) float16
probabilities. The logits themselves never leave the device.

    summary = summarize_logits(logits, k=5)        # LogitSummary(entropy, topk_ids, topk_probs)

The entropy uses the max-shifted form  H = log s - t / s  with  s = sum exp(x - m),
t = sum exp(x - m) (x - m),  m = max x,  which stays exact where it matters (near-certain
positions, H close to 0) and needs no normalized copy of the logits. A -inf logit (a token a
processor masked) adds nothing; NaN or +inf in a row make its entropy NaN, as Categorical does.
On CUDA the whole summary is one `torch.compile`d function, so Inductor fuses the reductions and materializes no
full-vocabulary tensor (benchmarks/bench_entropy.py measures it against
`torch.distributions.Categorical`, the sampler's own formula). Elsewhere (CPU, MPS) the same
formula runs eagerly: compiling for a small CPU model costs more than it saves.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

TOPK_CHUNK = 1024  # the two-stage top-k's first stage works on vocabulary slices of this many ids


class LogitSummary(NamedTuple):
    entropy: torch.Tensor  # (batch, canvas) float32, nats
    topk_ids: torch.Tensor | None  # (batch, canvas, k) int32, most probable first; None when k == 0
    topk_probs: torch.Tensor | None  # (batch, canvas, k) float16


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


def _summarize(logits: torch.Tensor, k: int, two_stage: bool = True) -> LogitSummary:
    x = logits.float()
    peak, total, entropy = _entropy_parts(x)
    if k == 0:
        return LogitSummary(entropy, None, None)
    values, ids = top_k(x, k, two_stage=two_stage)
    probs = (values - peak).exp() / total[..., None]
    return LogitSummary(entropy, ids.to(torch.int32), probs.to(torch.float16))


_compiled_summarize = None


def summarize_logits(logits: torch.Tensor, k: int, *, compiled: bool | None = None) -> LogitSummary:
    """Entropy and top-k of the processed logits; `compiled` defaults to "on CUDA"."""
    global _compiled_summarize
    if compiled is None:
        compiled = logits.is_cuda
    if not compiled:
        return _summarize(logits, k)
    if _compiled_summarize is None:
        # Default mode, not "reduce-overhead": CUDA-graph outputs would be overwritten at the next
        # replay, and these are read after the step. Shapes are fixed for a run, so no dynamic shapes.
        _compiled_summarize = torch.compile(_summarize, dynamic=False)
    return _compiled_summarize(logits, k)
