"""Tokenizer helpers shared by every backend (no torch, no mlx: any backend can import them).

    ids = chat_prompt_ids(tokenizer, "Why is the sky blue?")
    pieces = PieceTable(tokenizer); pieces.new(step_ids)   # {id: text} for ids not sent before
    pieces = PieceTable(decoder=backend_decoder)           # decoded texts shared by every run of a backend
"""

from __future__ import annotations

import threading

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


class PieceDecoder:
    """Each token id's text, decoded once per tokenizer and kept: every run of a backend shares one.

    A batch of 8 rows with the top-5 candidates shows ~1,500 ids a row a step; decoding them afresh
    for every run was most of the host-side cost of a batched step at the real vocabulary (262,144
    ids). Where the tokenizer is a fast (Rust) one that does not clean up spaces, its `decode_batch`
    gives exactly what `batch_decode` gives, without transformers' Python per id
    (tests/test_pieces.py checks it over the built-in model's whole vocabulary); any other tokenizer
    goes through `batch_decode`. The runs of several sessions may read it at once: one lock."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._texts = np.empty(0, object)  # indexed by id; grown to the largest id seen
        self._known = np.zeros(0, bool)
        self._lock = threading.Lock()
        rust = getattr(tokenizer, "backend_tokenizer", None)
        self._rust = rust if rust is not None and getattr(tokenizer, "clean_up_tokenization_spaces", None) is False else None

    def texts_of(self, ids: np.ndarray) -> list[str]:
        """The texts of `ids` (a 1-D integer array), in order."""
        with self._lock:
            return self._texts_of(ids)

    def _texts_of(self, ids: np.ndarray) -> list[str]:
        if ids.size:
            self._texts = _grown(self._texts, int(ids.max()) + 1, None)
            self._known = _grown(self._known, int(ids.max()) + 1, False)
        missing = ids[~self._known[ids]].tolist()
        if missing:
            singles = [[i] for i in missing]
            if self._rust is not None:
                decoded = self._rust.decode_batch(singles, skip_special_tokens=False)
            else:
                decoded = self.tokenizer.batch_decode(singles, skip_special_tokens=False)
            self._texts[missing] = decoded
            self._known[missing] = True
        return self._texts[ids].tolist()


class PieceTable:
    """One run's pieces: records carry only the texts of ids that run has not sent before."""

    def __init__(self, tokenizer=None, *, decoder: PieceDecoder | None = None):
        self.decoder = decoder if decoder is not None else PieceDecoder(tokenizer)
        self._sent = np.zeros(0, bool)  # indexed by id

    def new(self, ids) -> dict[int, str]:
        """The pieces of `ids` not sent before, by id in ascending order.  Called for every row of
        every step on the reading thread, whose interpreter time the model's thread waits for: the
        ids already sent are dropped by one lookup before anything is sorted."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not ids.size:
            return {}
        self._sent = _grown(self._sent, int(ids.max()) + 1, False)
        unsent = ids[~self._sent[ids]]
        if not unsent.size:
            return {}
        fresh = np.unique(unsent)  # sorted
        self._sent[fresh] = True
        return dict(zip(fresh.tolist(), self.decoder.texts_of(fresh)))


def _grown(array: np.ndarray, size: int, fill) -> np.ndarray:
    """`array` with at least `size` entries (doubling, so growing costs little over a run), new ones `fill`."""
    if size <= array.size:
        return array
    extra = max(size, 2 * array.size) - array.size
    return np.concatenate([array, np.full(extra, fill, dtype=array.dtype)])
