"""What a backend's capture hands its `Backend._produce`: one step or one finished block, as numpy.

Both captures (transformers' `capture.py`, MLX's `mlx_capture.py`) emit these two types, and
`Backend` turns them into records (`visualizer.records`) with the run's piece table, in one place
(`base.step_record`, `base.block_record`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
