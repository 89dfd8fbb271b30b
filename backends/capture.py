"""Watch transformers' DiffusionGemma generation step by step without changing it.

`capture_steps(model, on_step, on_block, should_stop)` is a context manager that shadows four methods
of one model *instance* (instance attributes win over class methods) and removes them in
`finally`, on success, on error and on cancel alike:

    _prepare_logits_processor  appends a pass-through processor last, which computes the entropy
                               of the processed float32 logits exactly as the sampler does
    _prepare_denoiser_inputs   marks the start of a block
    _denoising_step            after each step: copies the accepted mask, the next canvas, the
                               argmax and the entropy to the CPU; checks the stop flag first
    _finalize_canvas           after each block: the committed tokens (pad after EOS)

Why these and not others (checked on CPU and on an H100, eager and compiled):
- A streamer's `put_draft` sees only the argmax, never the accepted mask.
- Wrapping `sampler.accept_canvas` makes dynamo recompile every step on the compiled path.
- With `cache_implementation="static"` the compiled `accept_canvas` stays bound to the sampler
  of the first call (it is stored on the model), so the accepted mask is read from that bound
  sampler (`sampler.accept_canvas.__wrapped__.__self__`), and copied at once because a CUDA
  graph replay overwrites its outputs.
- `self_conditioning_logits` are cast to the embedding dtype (bf16 on GPU, up to 0.04 nats of
  entropy error); the appended logits processor sees the float32 processed logits.
Nothing here draws random numbers or writes to a tensor the model reads, so the same seed gives
bit-identical sequences with and without the capture (tests/test_capture.py proves it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .base import GenerationCancelled


@dataclass
class CapturedStep:
    block: int
    step: int
    steps_remaining: int
    accepted: np.ndarray  # bool
    canvas: np.ndarray  # int32
    argmax: np.ndarray  # int32
    entropy_nats: np.ndarray  # float32
    wall_time_s: float
    converged: bool  # the diffusion stopping criterion fired at this step


@dataclass
class CapturedBlock:
    block: int
    tokens: np.ndarray  # int32, as committed (pad after EOS)
    steps_used: int
    converged: bool


class _EntropyRecorder:
    """Pass-through logits processor: remembers the entropy of the logits it is given."""

    def __init__(self):
        self.entropy = None

    def __call__(self, input_ids, scores, cur_step):  # LogitsProcessorList passes cur_step by name
        # The sampler's own formula, on float32: the recorded value is the one it thresholded.
        # validate_args=False skips a constraint check that would sync the GPU every step.
        self.entropy = torch.distributions.Categorical(logits=scores.float(), validate_args=False).entropy()
        return scores


def _accepting_sampler(sampler):
    """The object whose `accepted_token_mask` the step really set (see the module docstring)."""
    accept = sampler.accept_canvas
    bound = getattr(accept, "__wrapped__", accept)
    return getattr(bound, "__self__", sampler)


def _cpu(tensor: torch.Tensor, dtype) -> np.ndarray:
    return tensor.detach()[0].to("cpu").numpy().astype(dtype, copy=False)


@contextlib.contextmanager
def capture_steps(
    model,
    on_step: Callable[[CapturedStep], None],
    on_block: Callable[[CapturedBlock], None],
    should_stop: Callable[[], bool] | None = None,
):
    """Install the four recording wrappers on `model` for the duration of the block."""
    names = ("_prepare_logits_processor", "_prepare_denoiser_inputs", "_denoising_step", "_finalize_canvas")
    if any(name in vars(model) for name in names):
        raise RuntimeError("capture_steps is already active on this model")
    originals = {name: getattr(model, name) for name in names}
    recorder = _EntropyRecorder()
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
        step = CapturedStep(
            block=state["block"],
            step=state["step"],
            steps_remaining=int(kwargs["cur_step"]),
            accepted=_cpu(sampler.accepted_token_mask, bool),
            canvas=_cpu(next_canvas, np.int32),
            argmax=_cpu(argmax, np.int32),
            entropy_nats=_cpu(recorder.entropy, np.float32),
            wall_time_s=0.0,
            converged=bool(finished.all()),
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
                tokens=_cpu(input_ids[:, -canvas_length:], np.int32),
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
