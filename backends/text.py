"""Tokenizer helpers shared by every backend (no torch, no mlx: any backend can import them).

    ids = chat_prompt_ids(tokenizer, "Why is the sky blue?")
    pieces = PieceTable(tokenizer); pieces.new(step_ids)   # {id: text} for ids not sent before
"""

from __future__ import annotations

import numpy as np


class NoThinkingMode(ValueError):
    """The model's chat template has no `enable_thinking` switch."""


def supports_thinking(tokenizer) -> bool:
    """Whether the chat template reads `enable_thinking` (Gemma 4's switch for its thinking channel)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    templates = template.values() if isinstance(template, dict) else [template]
    return any("enable_thinking" in t for t in templates)


def chat_prompt_ids(tokenizer, prompt: str, *, thinking: bool = False) -> list[int]:
    """One user turn through the model's chat template, generation prompt added.

    `thinking` renders the template with `enable_thinking=True`, as transformers and mlx-vlm pass
    it to Gemma 4's template; a template without that switch raises NoThinkingMode.  Without it
    nothing is passed, so the ids are exactly the plain template's.
    Ids, never a string, go to the model: a templated string tokenized again got a second BOS.
    """
    extra = {}
    if thinking:
        if not supports_thinking(tokenizer):
            raise NoThinkingMode("this model's chat template has no thinking mode (it never reads enable_thinking)")
        extra["enable_thinking"] = True
    out = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True, **extra
    )
    if hasattr(out, "keys") and "input_ids" in out:  # transformers 5 returns a BatchEncoding
        out = out["input_ids"]
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(i) for i in out]


class PieceTable:
    """Decodes each displayed id once per run, so records carry only the pieces not sent before."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.seen: set[int] = set()

    def new(self, ids) -> dict[int, str]:
        fresh = sorted({int(i) for i in np.asarray(ids).reshape(-1)} - self.seen)
        if not fresh:
            return {}
        self.seen.update(fresh)
        texts = self.tokenizer.batch_decode([[i] for i in fresh], skip_special_tokens=False)
        return dict(zip(fresh, texts))
