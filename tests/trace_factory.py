"""Build real `Trace` objects from hand-written accepted masks, for tests that need known answers.

    trace = trace_from_commit_steps([[0, 0, 1, 2, None]])   # one block; None = never accepted
    trace = trace_from_masks([[mask_step0, mask_step1]], content_lengths=[3])

Every record is a real `visualizer.records` class appended with `Trace.append`, so the trace
validates, saves and loads like one a backend made.  Defaults: token ids 10.. for content, EOS
(id 1) at `content_length` and pad (id 0) after it, the argmax equal to the committed tokens at
every step, entropy 0.5 nats everywhere.
"""

from __future__ import annotations

import numpy as np

from visualizer.records import (
    FINISH_CANCELLED,
    FINISH_EOS,
    FINISH_LENGTH,
    STOP_CONVERGED,
    BlockRecord,
    ModelInfo,
    RunEnd,
    RunStart,
    StepRecord,
    frozen_array,
)
from visualizer.trace import Trace

EOS_ID, END_TURN_ID, PAD_ID = 1, 3, 0
VOCAB = 80


def model_info(canvas_length: int) -> ModelInfo:
    return ModelInfo(
        name="hand-built", source="tests", backend="transformers", device="cpu", dtype="float32",
        canvas_length=canvas_length, vocab_size=VOCAB, eos_token_ids=(EOS_ID, END_TURN_ID),
        pad_token_id=PAD_ID, max_context=4096, builtin=True,
    )


def masks_from_commit_steps(commit_steps, n_steps: int | None = None) -> list[np.ndarray]:
    """Monotone accepted masks: position p is accepted from step commit_steps[p] on (None: never)."""
    first = np.array([-1 if c is None else c for c in commit_steps])
    n_steps = n_steps if n_steps is not None else int(first.max()) + 1
    return [(first >= 0) & (first <= t) for t in range(max(n_steps, 1))]


def block_tokens(canvas_length: int, content_length: int | None) -> np.ndarray:
    """Content ids 10.., then EOS and pad (no EOS when content fills the block)."""
    tokens = 10 + np.arange(canvas_length) % (VOCAB - 10)
    if content_length is not None and content_length < canvas_length:
        tokens[content_length] = EOS_ID
        tokens[content_length + 1 :] = PAD_ID
    return tokens


def trace_from_masks(
    blocks,
    *,
    content_lengths=None,
    tokens=None,
    argmax=None,
    entropy=None,
    step_budget: int = 48,
    finish: str | None = None,
    unfinished: int = 0,
) -> Trace:
    """A trace whose block b ran the steps `blocks[b]` (one accepted mask per step).

    tokens[b] / argmax[b][t] / entropy[b][t] override the defaults; `unfinished` leaves the last
    blocks uncommitted (a cancelled run).
    """
    canvas = len(blocks[0][0])
    trace = Trace(model=model_info(canvas), prompt="hand-built")
    trace.append(
        RunStart(
            prompt_ids=frozen_array([2, 5], np.int32),
            settings={"max_new_tokens": canvas * len(blocks), "max_denoising_steps": step_budget, "seed": 0},
            max_blocks=len(blocks),
            new_pieces={i: f"t{i}" for i in range(VOCAB)},
        )
    )
    sequence = []
    for b, masks in enumerate(blocks):
        committed = np.asarray(tokens[b]) if tokens is not None else block_tokens(canvas, (content_lengths or [None] * len(blocks))[b])
        for t, mask in enumerate(masks):
            mask = np.asarray(mask, dtype=bool)
            step_argmax = np.asarray(argmax[b][t]) if argmax is not None else committed
            step_entropy = np.asarray(entropy[b][t]) if entropy is not None else np.full(canvas, 0.5)
            trace.append(
                StepRecord(
                    block=b, step=t, steps_remaining=step_budget - t,
                    accepted=frozen_array(mask, bool),
                    canvas=frozen_array(np.where(mask, step_argmax, 7), np.int32),
                    argmax=frozen_array(step_argmax, np.int32),
                    entropy_nats=frozen_array(step_entropy, np.float32),
                    wall_time_s=0.01,
                )
            )
        if b >= len(blocks) - unfinished:
            continue
        eos = np.flatnonzero(np.isin(committed, (EOS_ID, END_TURN_ID)))
        trace.append(
            BlockRecord(
                block=b, tokens=frozen_array(committed, np.int32), eos_position=int(eos[0]) if eos.size else None,
                stop_reason=STOP_CONVERGED, steps_used=len(masks),
            )
        )
        sequence.extend(committed.tolist())
    if finish is None:
        finish = FINISH_CANCELLED if unfinished else (FINISH_EOS if EOS_ID in sequence else FINISH_LENGTH)
    trace.append(RunEnd(finish_reason=finish, sequence=frozen_array(sequence, np.int32), text="", wall_time_s=0.1))
    return trace


def trace_from_commit_steps(blocks, *, n_steps=None, **kwargs) -> Trace:
    """Like `trace_from_masks`, from each block's commit step per position (None: never accepted)."""
    masks = [masks_from_commit_steps(c, n_steps) for c in blocks]
    return trace_from_masks(masks, **kwargs)
