"""Run mlx-vlm's DiffusionGemma denoising loop step by step and record every step.

mlx-vlm 0.7.10 gives no per-step view of this model: its stream carries only decoded text with
`[Mask]` placeholders (no positions, no entropy), and `stream_generate` yields nothing until the
whole generation has ended.  So `denoise` runs the engine's own loop
(`mlx_vlm.generate.diffusion.stream_diffusion_generate`) for the one configuration the
visualizer uses (batch 1, text only, the full canvas, no prompt cache, no compiled decoder) on
the model's own methods (`make_cache`, `diffusion_prefill_cache`, `diffusion_update_cache`,
`diffusion_decoder_masks`, `diffusion_decoder_logits`, `diffusion_self_conditioning`) and with
the engine's own helper functions, drawing random numbers in the same order.  The same seed
therefore gives exactly the tokens of stock generation: tests/test_mlx_capture.py checks this
against `mlx_vlm.stream_generate` for both samplers, at temperature 0 and 1, on a float32 and a
4-bit model, over several blocks.  The helpers are private to mlx-vlm, which is why mlx-vlm is
pinned (0.7.10) and that test must pass before the pin moves.

    options = DenoiseOptions(max_blocks=2, max_denoising_steps=48, sampler="entropy-bound", ...)
    for item in denoise(model, prompt_ids, options, should_stop=stop.is_set):
        ...  # a CapturedStep after every step, a CapturedBlock after every block

What a step records (`accepted`, `canvas`), per sampler:
- entropy-bound (transformers' rule): the positions accepted at this step, recomputed from
  scratch every step; the canvas holds their samples and fresh random tokens elsewhere.
- confidence-threshold (mlx-vlm's default): the positions revealed so far.  Reveals accumulate
  and a revealed token is never resampled or renoised, so nothing is ever remasked.
- The last step (1 remaining): the engine computes the logits and commits their argmax without
  sampling, so the step repeats the previous accepted mask and canvas (nothing was decided).
Entropy is that of the processed (schedule-temperature-scaled) float32 logits, as the sampler
sees them; so are the top-k candidates (`options.topk`), taken on the device. The
confidence-threshold sampler also records the probability of each position's sample, the value
it compares with its threshold (none at the last step, which samples nothing).  All of this must run on the thread that owns the model (see `mlx_backend`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from mlx_vlm.generate.common import generation_stream, wired_limit
from mlx_vlm.generate.diffusion import (
    DEFAULT_DIFFUSION_CONFIDENCE_THRESHOLD,
    _diffusion_confidence_transfer_mask,
    _diffusion_entropy_transfer_mask,
    _diffusion_initialize_canvas,
    _diffusion_linear_temperature,
    _diffusion_sample_canvas,
    _diffusion_stable_and_confident,
    _diffusion_token_entropy,
    _diffusion_token_probability,
)

from .bridge import GenerationCancelled
from .captured import CapturedBlock, CapturedStep, pad_after_eos

ENTROPY_BOUND = "entropy-bound"
CONFIDENCE_THRESHOLD = "confidence-threshold"


@dataclass(frozen=True)
class DenoiseOptions:
    max_blocks: int  # whole canvases to generate at most (the engine's max_tokens / canvas)
    max_denoising_steps: int
    sampler: str  # ENTROPY_BOUND or CONFIDENCE_THRESHOLD
    temperature: float  # sampling temperature; 0 takes the argmax (greedy)
    entropy_bound: float | None  # entropy-bound: summed entropy accepted per step, nats (None for the other sampler)
    t_min: float  # schedule temperature at the last step (divides the logits)
    t_max: float  # schedule temperature at the first step
    seed: int
    eos_token_ids: tuple[int, ...]  # the tokenizer's stopping criteria: a block holding one ends the run
    pad_token_id: int  # written after the first EOS of a block, as transformers does
    stopping: dict | None = None  # {"stability_threshold", "confidence_threshold"} or None: never stop early
    confidence_threshold: float = DEFAULT_DIFFUSION_CONFIDENCE_THRESHOLD  # confidence-threshold sampler
    topk: int = 0  # record the k most probable candidates of every position at every step; 0: none


def _top_k(logits: mx.array, k: int) -> tuple[mx.array, mx.array]:
    """(ids, probabilities) of the k most probable tokens of float32 logits, most probable first."""
    ids = mx.argpartition(-logits, kth=k - 1, axis=-1)[..., :k]
    values = mx.take_along_axis(logits, ids, axis=-1)
    order = mx.argsort(-values, axis=-1)
    ids, values = mx.take_along_axis(ids, order, axis=-1), mx.take_along_axis(values, order, axis=-1)
    return ids.astype(mx.int32), mx.exp(values - mx.logsumexp(logits, axis=-1, keepdims=True))


def denoise(
    model, prompt_ids: list[int], options: DenoiseOptions, *, should_stop: Callable[[], bool] | None = None
) -> Iterator[CapturedStep | CapturedBlock]:
    """Generate block by block as mlx-vlm does, yielding each step and each committed block."""
    if options.sampler not in (ENTROPY_BOUND, CONFIDENCE_THRESHOLD):
        raise ValueError(f"unknown MLX sampler {options.sampler!r}")
    input_ids = mx.array([prompt_ids], dtype=mx.int32)
    mx.random.seed(options.seed)  # stock seeds right before generating; nothing random came earlier
    with wired_limit(model, [generation_stream]), mx.stream(generation_stream):
        context = model.diffusion_prepare_self_conditioning()
        cache = model.diffusion_prefill_cache(
            input_ids,
            attention_mask=None,
            cache=model.make_cache(),
            pixel_values=None,
            mm_token_type_ids=None,
            prefill_step_size=None,
            chunk_prefill=False,
        )
        mx.eval([c.state for c in cache])
        committed = None
        for block in range(options.max_blocks):
            if committed is not None:
                cache = model.diffusion_update_cache(committed, cache=cache)
            committed, finished = yield from _denoise_block(model, cache, context, block, options, should_stop)
            if finished:
                return
            mx.clear_cache()


def _denoise_block(model, cache, context, block: int, options: DenoiseOptions, should_stop):
    """One canvas, step by step; returns (the committed argmax as an mx array, whether an EOS ended the run)."""
    canvas_length = int(model.config.canvas_length)
    vocab_size = int(model.config.text_config.vocab_size)
    steps = options.max_denoising_steps
    schedule = {"t_min": options.t_min, "t_max": options.t_max}

    def noise():
        return _diffusion_initialize_canvas(1, canvas_length, vocab_size, mx.int32)

    canvas = noise()
    revealed = mx.zeros(canvas.shape, dtype=mx.bool_)  # confidence-threshold: revealed so far
    draft = canvas  # confidence-threshold: the token each revealed position keeps
    shown = revealed  # what the step record calls accepted
    masks = model.diffusion_decoder_masks(canvas, cache, None)
    self_conditioning = None
    history: list = []  # the engine's stability window
    converged = False
    for step, cur_step in enumerate(range(steps, 0, -1)):
        if should_stop is not None and should_stop():
            raise GenerationCancelled()
        started = time.perf_counter()
        logits = model.diffusion_decoder_logits(
            canvas, cache=cache, self_conditioning=self_conditioning, decoder_attention_mask=masks
        )
        logits = logits / _diffusion_linear_temperature(cur_step, steps, schedule)
        argmax = mx.argmax(logits, axis=-1).astype(mx.int32)
        entropy = _diffusion_token_entropy(logits)
        done = cur_step == 1  # the engine commits the argmax here without sampling
        next_self_conditioning = None
        probability = None
        if not done:
            if options.temperature <= 0:
                sampled = argmax
            else:
                sampled = _diffusion_sample_canvas(logits, mx.int32, options.temperature)
            if options.sampler == ENTROPY_BOUND:
                next_self_conditioning = model.diffusion_self_conditioning(logits, context)
                accepted = _diffusion_entropy_transfer_mask(entropy, options.entropy_bound)
                canvas = mx.where(accepted, sampled, noise())
                shown = accepted
            else:
                probability = _diffusion_token_probability(logits, sampled)
                accepted = _diffusion_confidence_transfer_mask(
                    probability, ~revealed, options.confidence_threshold, force_all=False
                )
                kept = mx.where(accepted, sampled, draft)
                canvas = mx.where(revealed | accepted, kept, noise())
                revealed = revealed | accepted
                draft = mx.where(accepted, kept, draft)
                shown = revealed
        candidates = _top_k(logits.astype(mx.float32), options.topk) if options.topk else None
        extra = [] if candidates is None else list(candidates)
        if probability is not None:
            extra.append(probability)
        mx.eval(shown, canvas, argmax, entropy, *extra)
        yield CapturedStep(
            block=block,
            step=step,
            steps_remaining=cur_step,
            accepted=np.array(shown[0], dtype=bool),
            canvas=np.array(canvas[0], dtype=np.int32),
            argmax=np.array(argmax[0], dtype=np.int32),
            entropy_nats=np.array(entropy[0], dtype=np.float32),
            wall_time_s=time.perf_counter() - started,
            topk_ids=None if candidates is None else np.array(candidates[0][0], dtype=np.int32),
            topk_probs=None if candidates is None else np.array(candidates[1][0].astype(mx.float16), dtype=np.float16),
            sample_probability=None if probability is None else np.minimum(np.array(probability[0], dtype=np.float32), 1),
        )
        if done:
            break
        # The engine's two early exits, in its order (the stability check keeps a history).
        if options.sampler == CONFIDENCE_THRESHOLD and bool(mx.all(revealed).item()):
            converged = True
            break
        if _diffusion_stable_and_confident(argmax, logits, history, options.stopping):
            converged = True
            break
        if next_self_conditioning is None:
            next_self_conditioning = model.diffusion_self_conditioning(logits, context)
        self_conditioning = next_self_conditioning

    tokens = pad_after_eos(np.array(argmax[0], dtype=np.int32), options.eos_token_ids, options.pad_token_id)
    yield CapturedBlock(
        block=block,
        tokens=tokens,
        steps_used=step + 1,
        converged=converged,
    )
    return argmax, bool(np.isin(tokens, options.eos_token_ids).any())
