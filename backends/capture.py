"""Watch transformers' DiffusionGemma generation step by step without changing it.

`capture_steps(model, on_step, on_block, should_stop)` is a context manager that shadows four methods
of one model *instance* (instance attributes win over class methods) and removes them in
`finally`, on success, on error and on cancel alike:

    _prepare_logits_processor  appends a pass-through processor last, which summarizes the
                               processed float32 logits the sampler sees: entropy and top-k
                               candidates, on the device (`logit_summary.py`)
    _prepare_denoiser_inputs   marks the start of a block
    _denoising_step            after each step: copies the accepted mask, the next canvas, the
                               argmax, the entropy and the top-k to the CPU, all non-blocking
                               with one wait per step; checks the stop flag first
    _finalize_canvas           after each block: the committed tokens (pad after EOS)

Why these and not others (checked on CPU and on an H100, eager and compiled):
- A streamer's `put_draft` sees only the argmax, never the accepted mask.
- Wrapping `sampler.accept_canvas` makes dynamo recompile every step on the compiled path.
- With `cache_implementation="static"` the compiled `accept_canvas` stays bound to the sampler
  of the first call (it is stored on the model), so the accepted mask is read from that bound
  sampler (`sampler.accept_canvas.__wrapped__.__self__`), and copied at once because a CUDA
  graph replay overwrites its outputs.
- `self_conditioning_logits` are cast to the embedding dtype (bf16 on GPU, up to 0.04 nats of
  entropy error); the appended logits processor sees the float32 processed logits. Its entropy
  is computed in one max-shifted pass, not by `Categorical` as the sampler does: the two differ
  by float32 rounding only (tests/test_capture.py bounds it), and no extra vocabulary-sized tensor
  is kept (`logit_summary.py`).
Nothing here draws random numbers or writes to a tensor the model reads, so the same seed gives
bit-identical sequences with and without the capture (tests/test_capture.py proves it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import numpy as np
import torch

from .base import GenerationCancelled
from .captured import CapturedBlock, CapturedStep
from .logit_summary import LogitSummary, summarize_logits


class _LogitRecorder:
    """Pass-through logits processor: keeps the summary of the logits it is given, never the logits."""

    def __init__(self, topk: int):
        self.topk = topk
        self.summary: LogitSummary | None = None

    def __call__(self, input_ids, scores, cur_step):  # LogitsProcessorList passes cur_step by name
        self.summary = summarize_logits(scores, self.topk)
        return scores


def _accepting_sampler(sampler):
    """The object whose `accepted_token_mask` the step really set (see the module docstring)."""
    accept = sampler.accept_canvas
    bound = getattr(accept, "__wrapped__", accept)
    return getattr(bound, "__self__", sampler)


def _to_host(tensors: dict) -> dict:
    """Copy each tensor's first batch row to numpy: every copy queued non-blocking, then one wait.

    On CUDA a non-blocking copy to the CPU lands in pinned memory and returns before it is done;
    the one synchronize after the last of them makes all of them safe to read (the compiled
    accept_canvas's mask is a CUDA-graph output, overwritten at the next replay: copied before it).
    """
    rows = {name: t.detach()[0] for name, t in tensors.items() if t is not None}
    on_cuda = any(t.is_cuda for t in rows.values())
    copies = {name: t.to("cpu", non_blocking=on_cuda) for name, t in rows.items()}
    if on_cuda:
        torch.cuda.current_stream().synchronize()
    return {name: t.numpy().copy() for name, t in copies.items()}


@contextlib.contextmanager
def capture_steps(
    model,
    on_step: Callable[[CapturedStep], None],
    on_block: Callable[[CapturedBlock], None],
    should_stop: Callable[[], bool] | None = None,
    *,
    topk: int = 0,
):
    """Install the four recording wrappers on `model` for the duration of the block.

    `topk` > 0 also records the k most probable candidates of every position at every step."""
    names = ("_prepare_logits_processor", "_prepare_denoiser_inputs", "_denoising_step", "_finalize_canvas")
    if any(name in vars(model) for name in names):
        raise RuntimeError("capture_steps is already active on this model")
    originals = {name: getattr(model, name) for name in names}
    recorder = _LogitRecorder(topk)
    state = {"block": -1, "step": 0, "converged": False}

    def prepare_logits_processor(generation_config, logits_processor=None):
        processors = originals["_prepare_logits_processor"](generation_config, logits_processor)
        processors.append(recorder)
        return processors

    def prepare_denoiser_inputs(*args, **kwargs):
        if should_stop is not None and should_stop():
            raise GenerationCancelled()
        state.update(block=state["block"] + 1, step=0, converged=False)
        return originals["_prepare_denoiser_inputs"](*args, **kwargs)

    def denoising_step(*args, **kwargs):
        if should_stop is not None and should_stop():
            raise GenerationCancelled()
        started = time.perf_counter()
        out = originals["_denoising_step"](*args, **kwargs)
        next_canvas, argmax, _, finished = out
        sampler = _accepting_sampler(kwargs["sampler"])
        summary = recorder.summary
        host = _to_host(
            {
                "accepted": sampler.accepted_token_mask,
                "canvas": next_canvas,
                "argmax": argmax,
                "entropy": summary.entropy,
                "finished": finished[:, None],
                "topk_ids": summary.topk_ids,
                "topk_probs": summary.topk_probs,
            }
        )
        step = CapturedStep(
            block=state["block"],
            step=state["step"],
            steps_remaining=int(kwargs["cur_step"]),
            accepted=host["accepted"].astype(bool, copy=False),
            canvas=host["canvas"].astype(np.int32, copy=False),
            argmax=host["argmax"].astype(np.int32, copy=False),
            entropy_nats=host["entropy"].astype(np.float32, copy=False),
            wall_time_s=0.0,
            converged=bool(host["finished"].all()),
            topk_ids=host.get("topk_ids"),
            topk_probs=host.get("topk_probs"),
        )
        step.wall_time_s = time.perf_counter() - started  # after the copies: device work included
        state["step"] += 1
        state["converged"] = step.converged
        on_step(step)
        return out

    def finalize_canvas(*args, **kwargs):
        input_ids, finished = originals["_finalize_canvas"](*args, **kwargs)
        canvas_length = kwargs["canvas_length"]
        on_block(
            CapturedBlock(
                block=state["block"],
                tokens=_to_host({"tokens": input_ids[:, -canvas_length:]})["tokens"].astype(np.int32, copy=False),
                steps_used=state["step"],
                converged=state["converged"],
            )
        )
        return input_ids, finished

    wrappers = {
        "_prepare_logits_processor": prepare_logits_processor,
        "_prepare_denoiser_inputs": prepare_denoiser_inputs,
        "_denoising_step": denoising_step,
        "_finalize_canvas": finalize_canvas,
    }
    try:
        for name, wrapper in wrappers.items():
            setattr(model, name, wrapper)
        yield
    finally:
        for name in names:
            vars(model).pop(name, None)
