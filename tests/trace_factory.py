"""Build real `Trace` objects from hand-written accepted masks, for tests that need known answers.

    trace = trace_from_commit_steps([[0, 0, 1, 2, None]])   # one block; None = never accepted
    trace = trace_from_masks([[mask_step0, mask_step1]], content_lengths=[3])

Every record is a real `visualizer.records` class appended with `Trace.append`, so the trace
validates, saves and loads like one a backend made.  Defaults: token ids 10.. for content, EOS
(id 1) at `content_length` and pad (id 0) after it, the argmax equal to the committed tokens at
every step, entropy 0.5 nats everywhere.
"""

from __future__ import annotations

import dataclasses

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
    frozen_cube,
    frozen_matrix,
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


def trace_from_text(blocks, commit_steps, *, n_steps: int | None = None, topk: int = 0, entropy=None,
                    prompt: str = "hand-built", backend: str = "transformers", settings: dict | None = None) -> Trace:
    """A trace whose block b commits the pieces `blocks[b]` (strings, EOS then pad after them) with
    `commit_steps[b][p]` as position p's first acceptance (None: never accepted).

    Pieces get ids 10.. in order of first appearance; with `topk`, each step records k candidates
    per position: its own token first (probability 0.6) then the next ids (0.2, 0.1, ...)."""
    import dataclasses

    vocab = {"<pad>": PAD_ID, "<eos>": EOS_ID, "<bos>": 2, "<turn|>": END_TURN_ID, "x": 5, "<noise>": 7}
    for pieces in blocks:
        for piece in pieces:
            vocab.setdefault(piece, 10 + len(vocab))
    size = max(vocab.values()) + 8
    canvas = max(len(c) for c in commit_steps)
    model = dataclasses.replace(model_info(canvas), vocab_size=size, backend=backend)
    trace = Trace(model=model, prompt=prompt)
    pieces_of = {i: p for p, i in vocab.items()} | {i: f"t{i}" for i in range(size) if i not in vocab.values()}
    run_settings = {"max_new_tokens": canvas * len(blocks), "max_denoising_steps": 48, "seed": 0, "record_topk": topk,
                    **(settings or {})}
    trace.append(RunStart(prompt_ids=frozen_array([2, 5], np.int32), settings=run_settings, max_blocks=len(blocks),
                          new_pieces=pieces_of))
    sequence = []
    for b, (pieces, steps) in enumerate(zip(blocks, commit_steps)):
        ids = [vocab[p] for p in pieces]
        committed = np.array(ids + ([EOS_ID] + [PAD_ID] * (canvas - len(ids) - 1) if len(ids) < canvas else []), np.int32)
        first = np.array([-1 if c is None else c for c in list(steps) + [0] * (canvas - len(steps))])
        total = n_steps if n_steps is not None else int(first.max()) + 1
        for t in range(total):
            mask = (first >= 0) & (first <= t)
            probs = np.array([0.6, 0.2, 0.1, 0.05, 0.03, 0.01, 0.005, 0.005][:topk], np.float16)
            candidates = (committed[:, None] + np.arange(topk)[None, :]) % size if topk else None
            ent = np.full(canvas, 0.5, np.float32) if entropy is None else np.asarray(entropy[b][t], np.float32)
            trace.append(StepRecord(
                block=b, step=t, steps_remaining=48 - t, accepted=frozen_array(mask, bool),
                canvas=frozen_array(np.where(mask, committed, 7), np.int32), argmax=frozen_array(committed, np.int32),
                entropy_nats=ent, wall_time_s=0.01,
                topk_ids=None if not topk else np.ascontiguousarray(candidates, np.int32),
                topk_probs=None if not topk else np.tile(probs, (canvas, 1)),
            ))
        trace.append(BlockRecord(block=b, tokens=frozen_array(committed, np.int32),
                                 eos_position=int(np.argmax(committed == EOS_ID)) if EOS_ID in committed else None,
                                 stop_reason=STOP_CONVERGED, steps_used=total))
        sequence.extend(committed.tolist())
    trace.append(RunEnd(finish_reason=FINISH_EOS if EOS_ID in sequence else FINISH_LENGTH,
                        sequence=frozen_array(sequence, np.int32), text="".join(p for b in blocks for p in b), wall_time_s=0.1))
    return trace


INSIDE_COMMITS = [[0, 1, 1, 2, 3, 3, 4, 5]]  # inside_trace's one block: 8 positions, 6 steps, no EOS


def inside_trace(*, pins=((2, 30),), layers=(0, 3), shift=True) -> Trace:
    """A hand-built trace with every version-5 part: pins, per-layer RMS, the shift, the blocks' lens."""
    base = trace_from_commit_steps(INSIDE_COMMITS, n_steps=6)
    settings = {**base.start.settings, "record_shift": shift, "layers": list(layers) if layers else None,
                "pins": [[p, "x"] for p, _ in pins]}
    trace = Trace(model=dataclasses.replace(base.model, layers=4), prompt=base.prompt)
    trace.append(dataclasses.replace(base.start, settings=settings, pins=tuple(pins), sampler_rule=base.sampler_rule.to_dict()))
    rng = np.random.default_rng(0)
    n = len(layers or ())
    for s in base.steps:
        extra = {}
        if shift and s.step > 0:
            extra["kl_nats"] = frozen_array(rng.random(8) * (1 + s.step), np.float32)
        if n:
            extra["layer_rms"] = frozen_matrix(rng.random((n, 8)) * 10 + 0.5, np.float32, 8)
        trace.append(dataclasses.replace(s, **extra))
    block = base.blocks[0]
    lens = {} if not n else {
        "lens_top_ids": frozen_cube(rng.integers(10, 20, (block.steps_used, n, 8)), np.int32, (n, 8)),
        "lens_top_probs": frozen_cube(rng.random((block.steps_used, n, 8)), np.float16, (n, 8)),
        "lens_ranks": frozen_cube(rng.integers(0, 50, (block.steps_used, n, 8)), np.int32, (n, 8)),
    }
    trace.append(dataclasses.replace(block, **lens))
    trace.append(base.end)
    trace.pieces.update(base.pieces)
    return trace
