"""The thinking channel: which positions of a run hold the model's thoughts rather than its answer.

Gemma 4 writes its reasoning in a channel before the answer when the chat template is rendered
with `enable_thinking=True`:

    <|channel>thought
    ...the thoughts...<channel|>the answer

The markers are taken from the libraries' own parsers, not from memory: transformers 5.23's
response parser for gemma4 (`transformers/cli/serving/utils.py`: reasoning_content opens with
"<|channel>thought\\n" and closes with "<channel|>") and mlx-vlm 0.7.10
(`mlx_vlm/models/diffusion_gemma/processing_diffusion_gemma.py`: `_CHANNEL_OPEN = "<|channel>"`,
`_CHANNEL_CLOSE = "<channel|>"`; `mlx_vlm/server/responses_state.py`: ("<|channel>thought",
"<channel|>")). Both markers are single tokens of the Gemma 4 tokenizer (mlx-vlm names them its
`soc_token` / `eoc_token`), so they are found by id: the ids whose piece is exactly a marker.

A thought position is any shown token from a "<|channel>" whose channel name is "thought" up to
and including the matching "<channel|>" (or the end of what is shown, while the channel is
still open); a channel spans blocks when it does. Other channels are not thoughts.

    mask = thought_mask(trace, token_ids)         # (blocks, canvas) bool, for ids as a frame shows them
    mask = run_thought_mask(trace)                # of the committed run
"""

from __future__ import annotations

import numpy as np

from .trace import Trace

CHANNEL_OPEN = "<|channel>"
CHANNEL_CLOSE = "<channel|>"
THOUGHT_CHANNEL = "thought"
NAME_LOOKAHEAD = 8  # tokens after "<|channel>" read to find the channel's name


def channel_marker_ids(trace: Trace) -> tuple[frozenset[int], frozenset[int]]:
    """(ids of "<|channel>", ids of "<channel|>") among the pieces this trace shows.

    Asked at every live step, so the answer is kept on the trace until new pieces arrive (a
    trace's pieces only grow)."""

    def find():
        opens = frozenset(i for i, p in trace.pieces.items() if p == CHANNEL_OPEN)
        closes = frozenset(i for i, p in trace.pieces.items() if p == CHANNEL_CLOSE)
        return opens, closes

    return trace.derived.get("channel_markers", find, version=len(trace.pieces))


def has_channel(trace: Trace) -> bool:
    return bool(channel_marker_ids(trace)[0])


def thought_mask(trace: Trace, token_ids: np.ndarray) -> np.ndarray:
    """Which shown tokens are thoughts. `token_ids` is (blocks, canvas) in run order, -1 where
    nothing is shown (noise, blocks not reached): those are never thoughts and do not break a channel."""
    opens, closes = channel_marker_ids(trace)
    mask = np.zeros(token_ids.shape, dtype=bool)
    if not opens:
        return mask
    flat_ids = token_ids.reshape(-1)
    if not np.isin(flat_ids, list(opens)).any():  # no channel opens: the common case, without a Python loop
        return mask
    shown = np.flatnonzero(flat_ids >= 0)
    flat = mask.reshape(-1)
    inside = False
    for k, index in enumerate(shown):
        token = int(flat_ids[index])
        if token in opens:
            inside = _channel_name(trace, flat_ids[shown[k + 1 : k + 1 + NAME_LOOKAHEAD]]).startswith(THOUGHT_CHANNEL)
            flat[index] = inside
        elif inside:
            flat[index] = True
            inside = token not in closes
    return mask


def run_thought_mask(trace: Trace) -> np.ndarray:
    """(committed blocks, canvas) thought mask of the finished run's committed tokens."""
    if not trace.blocks:
        return np.zeros((0, trace.canvas_length), dtype=bool)
    return thought_mask(trace, np.stack([b.tokens for b in trace.blocks]))


def _channel_name(trace: Trace, following: np.ndarray) -> str:
    return "".join(trace.piece(int(t)) for t in following).lstrip()


def block_thought_row(trace: Trace, block: int, tokens) -> np.ndarray:
    """(canvas,) thought mask of `block` while it holds `tokens` (its committed tokens, or its
    current argmax while live); the committed blocks before it tell whether a channel is open."""
    tokens = np.asarray(tokens)
    if not has_channel(trace):
        return np.zeros(tokens.shape, dtype=bool)
    before = [b.tokens for b in trace.blocks[:block]]
    return thought_mask(trace, np.stack([*before, tokens]))[-1]


def thoughts_and_answer(trace: Trace) -> tuple[str, str] | None:
    """(thoughts, answer) of the finished run's committed text when it holds a thought channel;
    None when it does not.  Read from the run's pieces (each token decoded alone), so the markers
    and the channel's name, which a tokenizer's skip_special_tokens would leave glued to the
    answer as "thought...", are left out, and the answer ends at its first EOS."""
    if not trace.blocks:
        return None
    tokens = np.stack([b.tokens for b in trace.blocks])
    thought = thought_mask(trace, tokens).reshape(-1)
    if not thought.any():
        return None
    opens, closes = channel_marker_ids(trace)
    eos, pad = set(trace.model.eos_token_ids), trace.model.pad_token_id
    thoughts, answer = [], []
    for token, in_thought in zip(tokens.reshape(-1).tolist(), thought.tolist()):
        if token in eos:  # the run's text ends at its first EOS
            break
        if token == pad or token in opens or token in closes:
            continue
        (thoughts if in_thought else answer).append(trace.piece(token))
    return "".join(thoughts).strip().removeprefix(THOUGHT_CHANNEL).strip(), "".join(answer).strip()


def committed_text(trace: Trace) -> str:
    """The run's committed text as the app shows it: with a thinking channel, the thoughts and the
    answer apart (the decoded text glues the channel's name and thoughts to the answer)."""
    split = thoughts_and_answer(trace)
    if split is None:
        return trace.end.text if trace.end else ""
    thoughts, answer = split
    return f"[thinking channel]\n{thoughts}\n\n[answer]\n{answer}"
