"""A spy on the logits a capture summarizes: the processed logits the sampler sees (or diffusers' callback's).

    seen = spy_on_summaries(monkeypatch, backends.capture)   # list: a clone of every summarized logits tensor
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
