"""What a backend's capture hands its `Backend._produce`: one step or one finished block, as numpy,
and the records (`visualizer.records`) made of them.

Every capture (transformers' `capture.py`, MLX's `mlx_capture.py`, diffusers' `diffusers_capture.py`)
emits these two types, and `Backend.generate_rows` turns them into records with the run's piece table,
in one place (`step_record`, `block_record`), on the thread that reads the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from visualizer.records import (
    LENS_DTYPES,
    STOP_CONVERGED,
    STOP_OUT_OF_STEPS,
    BlockRecord,
    StepRecord,
    frozen_array,
    frozen_cube,
    frozen_matrix,
)


@dataclass
class CapturedStep:
    block: int
    step: int
    steps_remaining: int  # the sampler's cur_step: max_denoising_steps at step 0, down to 1
    accepted: np.ndarray  # (canvas,) bool
    canvas: np.ndarray  # (canvas,) int32: the canvas fed to the next step
    argmax: np.ndarray  # (canvas,) int32
    entropy_nats: np.ndarray  # (canvas,) float32, of the processed (temperature-scaled) logits
    wall_time_s: float
    converged: bool = False  # the block's stopping criterion fired at this step
    topk_ids: np.ndarray | None = None  # (canvas, k) int32, most probable first; None when not recorded
    topk_probs: np.ndarray | None = None  # (canvas, k) float16
    sample_probability: np.ndarray | None = None  # (canvas,) float32: a confidence sampler's compared value
    row: int = 0  # the batch row (prompt) this step belongs to
    kl_nats: np.ndarray | None = None  # (canvas,) float32: KL from the previous step's distribution
    layer_rms: np.ndarray | None = None  # (layers, canvas) float32
    kl_to_final_nats: np.ndarray | None = None  # (canvas,) float32: KL(p_final || p_t) (backends/kl_to_final.py)


@dataclass
class CapturedBlock:
    block: int
    tokens: np.ndarray  # (canvas,) int32, as committed (pad after the first EOS)
    steps_used: int
    converged: bool  # the block ended before its last step
    row: int = 0  # the batch row (prompt) this block belongs to
    # The logit lens of each step of the block at each recorded layer, computed once the block is committed:
    lens_top_ids: np.ndarray | None = None  # (steps_used, layers, canvas) int32: the lens's top token
    lens_top_probs: np.ndarray | None = None  # (steps_used, layers, canvas) float16: its probability
    lens_ranks: np.ndarray | None = None  # (steps_used, layers, canvas) int32: the committed token's rank


def pad_after_eos(tokens: np.ndarray, eos_ids, pad_id: int | None) -> np.ndarray:
    """A block's committed tokens with every position after its first EOS set to `pad_id`, as
    transformers commits a block (in place; returned). None: kept as they are."""
    eos = np.flatnonzero(np.isin(tokens, eos_ids))
    if eos.size and pad_id is not None:
        tokens[eos[0] + 1:] = pad_id
    return tokens


def step_record(item: CapturedStep, pieces) -> StepRecord:
    """A StepRecord from a captured step, with the pieces of ids not sent before."""
    topk_ids, topk_probs, sample_probability = item.topk_ids, item.topk_probs, item.sample_probability
    shown = [item.argmax, item.canvas[item.accepted]] + ([topk_ids.reshape(-1)] if topk_ids is not None else [])
    canvas = item.canvas.shape[-1]
    return StepRecord(
        block=item.block,
        step=item.step,
        steps_remaining=item.steps_remaining,
        accepted=frozen_array(item.accepted, bool),
        canvas=frozen_array(item.canvas, np.int32),
        argmax=frozen_array(item.argmax, np.int32),
        entropy_nats=frozen_array(item.entropy_nats, np.float32),
        wall_time_s=item.wall_time_s,
        new_pieces=pieces.new(np.concatenate(shown)),
        topk_ids=None if topk_ids is None else frozen_matrix(topk_ids, np.int32, topk_ids.shape[-1]),
        topk_probs=None if topk_probs is None else frozen_matrix(topk_probs, np.float16, topk_probs.shape[-1]),
        sample_probability=None if sample_probability is None else frozen_array(sample_probability, np.float32),
        kl_nats=None if item.kl_nats is None else frozen_array(item.kl_nats, np.float32),
        layer_rms=None if item.layer_rms is None else frozen_matrix(item.layer_rms, np.float32, canvas),
        kl_to_final_nats=None if item.kl_to_final_nats is None else frozen_array(item.kl_to_final_nats, np.float32),
    )


def block_record(item: CapturedBlock, pieces, eos_token_ids) -> BlockRecord:
    """A BlockRecord from a captured block, with the pieces of ids not sent before."""
    eos = np.flatnonzero(np.isin(item.tokens, eos_token_ids))
    shown = [item.tokens] + ([item.lens_top_ids.reshape(-1)] if item.lens_top_ids is not None else [])
    lens = {} if item.lens_ranks is None else {
        name: frozen_cube(getattr(item, name), dtype, item.lens_ranks.shape[1:])
        for name, dtype in LENS_DTYPES.items()
    }
    return BlockRecord(
        block=item.block,
        tokens=frozen_array(item.tokens, np.int32),
        eos_position=int(eos[0]) if eos.size else None,
        stop_reason=STOP_CONVERGED if item.converged else STOP_OUT_OF_STEPS,
        steps_used=item.steps_used,
        new_pieces=pieces.new(np.concatenate(shown)),
        **lens,
    )
