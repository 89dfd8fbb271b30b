"""The MoE router's per-expert scale, looked up with `gather` instead of advanced indexing.

transformers' `DiffusionGemmaTextRouter.forward` ends with
`top_k_weights * self.per_expert_scale[top_k_index]`: every token's two expert ids index a
parameter of 8 values.  The backward of that indexing is `index_put_(accumulate=True)`, which
CUDA runs as a sort-based kernel, here summing hundreds of thousands of values into 8 slots.  On
an H100 (`benchmarks/bench_train_step.py --profile --top-ops 8`, batch 1,024, short canvas 64,
2026-11-25) those kernels took 3.9 ms a call, about 86 ms of a 625 ms training step.
`gather` on the scale expanded to (tokens, experts) reads the same values, and its backward is a
scatter-add into a (tokens, experts) buffer, two values a row, summed over tokens.  The forward is
exactly transformers' (tests/test_routing.py checks it, and the gradients, on CPU); the summation
order of the scale's gradient differs.  Measured on an H100 (`bench_train_step.py --batch-sizes 1024
--short-canvas 64 --routing stock gather --steps 4 --rounds 2`, 2026-11-25, both in one run): 666-678
against 541-566 ms a step, 1.23x the examples a second.  So training uses it (`--routing gather`, the
default; `--routing stock` is transformers' own).

    use_gather_routing(model)
"""

from __future__ import annotations

import types

import torch
from torch import nn
from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaTextRouter


def gather_routing_forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`DiffusionGemmaTextRouter.forward` (transformers 5.23) with the per-expert scale gathered."""
    hidden_states = self.norm(hidden_states)
    hidden_states = hidden_states * self.scale * self.scalar_root_size
    expert_scores = self.proj(hidden_states)
    router_probabilities = nn.functional.softmax(expert_scores, dim=-1, dtype=torch.float32)
    top_k_weights, top_k_index = torch.topk(router_probabilities, k=self.config.top_k_experts, dim=-1)
    top_k_weights /= top_k_weights.sum(dim=-1, keepdim=True)
    scale = self.per_expert_scale.expand(top_k_index.shape[0], -1).gather(1, top_k_index)
    return router_probabilities, top_k_weights * scale, top_k_index


def routers(model) -> list[DiffusionGemmaTextRouter]:
    """The routers whose forward gather_routing_forward copies: transformers' class, not any module named so."""
    return [module for module in model.modules() if isinstance(module, DiffusionGemmaTextRouter)]


def use_gather_routing(model) -> None:
    """Every router of `model` looks its per-expert scale up with gather (an instance attribute: the class is untouched)."""
    for router in routers(model):
        router.forward = types.MethodType(gather_routing_forward, router)


def use_stock_routing(model) -> None:
    for router in routers(model):
        router.__dict__.pop("forward", None)
