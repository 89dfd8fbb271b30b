"""training/routing.py: the gathered per-expert scale computes what transformers' router does."""

from __future__ import annotations

import pytest
import torch
from transformers import DiffusionGemmaForBlockDiffusion

from backends.small_models import small_config
from training.data import TaskBatches
from training.objective import diffusion_loss, to_device
from training.routing import routers, use_gather_routing, use_stock_routing

TOKENIZER_DIR = "assets/tokenizer"


def loss_and_gradients(model, parts):
    model.zero_grad(set_to_none=True)
    generator = torch.Generator().manual_seed(3)
    losses = []
    for part in parts:
        loss, _ = diffusion_loss(model, part, self_condition=True, self_correction=1.0,
                                 self_correction_max_entropy=0.1, generator=generator, normalizer=1000.0)
        loss.backward()
        losses.append(float(loss.detach()))
    return losses, {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(scope="module")
def model_and_batch():
    torch.manual_seed(0)
    model = DiffusionGemmaForBlockDiffusion(small_config(4096, "test")).train()
    with torch.no_grad():  # scales of their own, so a mixed-up expert id changes the result
        for router in routers(model):
            router.per_expert_scale.copy_(torch.linspace(0.5, 1.5, router.per_expert_scale.numel()))
    parts = [to_device(part, "cpu") for part in TaskBatches(TOKENIZER_DIR, 12, seed=0, short_canvas=64)[0]]
    return model, parts


def test_router_outputs_are_transformers_bit_for_bit(model_and_batch):
    model, _ = model_and_batch
    router = routers(model)[0]
    hidden = torch.randn(40, model.config.text_config.hidden_size, generator=torch.Generator().manual_seed(1))
    stock = router(hidden)
    use_gather_routing(model)
    try:
        gathered = router(hidden)
    finally:
        use_stock_routing(model)
    for a, b in zip(stock, gathered, strict=True):
        assert torch.equal(a, b)


def test_loss_is_the_same_and_gradients_agree(model_and_batch):
    model, parts = model_and_batch
    stock_losses, stock = loss_and_gradients(model, parts)
    use_gather_routing(model)
    try:
        losses, gradients = loss_and_gradients(model, parts)
    finally:
        use_stock_routing(model)
    assert losses == stock_losses
    assert gradients.keys() == stock.keys()
    scales = [name for name in gradients if name.endswith("per_expert_scale")]
    assert scales and all(stock[name].abs().sum() > 0 for name in scales)
    for name, grad in gradients.items():
        torch.testing.assert_close(grad, stock[name], rtol=1e-5, atol=1e-7, msg=name)


def test_stock_routing_puts_the_class_forward_back(model_and_batch):
    model, _ = model_and_batch
    use_gather_routing(model)
    assert all("forward" in vars(router) for router in routers(model))
    use_stock_routing(model)
    assert not any("forward" in vars(router) for router in routers(model))
