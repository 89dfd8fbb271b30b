"""Tokenizer helpers shared by every backend (no torch, no mlx: any backend can import them).

    ids = chat_prompt_ids(tokenizer, "Why is the sky blue?")
    pieces = PieceTable(tokenizer); pieces.new(step_ids)   # {id: text} for ids not sent before
"""

from __future__ import annotations

import numpy as np


def chat_prompt_ids(tokenizer, prompt: str) -> list[int]:
    """One user turn through the model's chat template, generation prompt added.

    Ids, never a string, go to the model: a templated string tokenized again got a second BOS.
    """
    out = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True)
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
