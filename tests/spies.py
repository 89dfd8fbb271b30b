"""A spy on the logits a capture summarizes: the processed logits the sampler sees (or diffusers' callback's).

    seen = spy_on_summaries(monkeypatch, backends.capture)   # list: a clone of every summarized logits tensor
    inputs = spy_on_decoder_inputs(monkeypatch, model)       # list: every decoder forward's keyword inputs
"""

from __future__ import annotations


def spy_on_summaries(monkeypatch, module) -> list:
    """Wrap `module.summarize_logits` for the test: each call's logits are cloned into the returned list,
    then summarized as before (the record is what the real function gives)."""
    seen = []
    real = module.summarize_logits

    def spy(logits, k, **options):
        seen.append(logits.detach().clone())
        return real(logits, k, **options)

    monkeypatch.setattr(module, "summarize_logits", spy)
    return seen


def spy_on_decoder_inputs(monkeypatch, model) -> list:
    """Wrap `model.forward` for the test: the keyword inputs of every forward that runs the decoder (tensors
    cloned) go into the returned list, so a test can run the model again on exactly those inputs."""
    import torch

    inputs = []
    real_forward = model.forward

    def spy(**kwargs):
        if kwargs.get("decoder_input_ids") is not None:
            inputs.append({k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()})
        return real_forward(**kwargs)

    monkeypatch.setattr(model, "forward", spy)
    return inputs
