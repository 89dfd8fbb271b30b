"""Watch diffusers' DiffusionGemmaPipeline step by step without changing it.

    with capture_pipeline(pipe, emit, should_stop, topk=5, scaled_entropy=True, ...) as capture:
        out = pipe(..., callback_on_step_end=capture.callback, callback_on_step_end_tensor_inputs=CALLBACK_TENSORS)
        capture.finish(out.sequences)

What each part of a record comes from, and why:
- `callback_on_step_end` (the pipeline's own hook, called after every step): the canvas the next
  step starts from and the raw logits. The step is emitted here.
- `scheduler.step`, wrapped on the scheduler *instance* for the duration (an instance attribute
  shadows the method; removed in `finally`): the callback lacks the accepted set and the
  temperature-scaled logits, which only the scheduler's output holds (`accepted_index` of the
  entropy-bound scheduler, `transfer_index` of block refinement, `sampled_tokens`, `pred_logits`).
- a forward pre-hook on `model.model.encoder` (torch's own hook, handle removed in `finally`): the
  pipeline has no block-end hook, but it encodes each committed canvas before the next block, so the
  encoder's input is exactly what the previous block committed; the last block is the tail of the
  returned sequences. The pad after the first EOS is added here, as transformers does.
- `layers`: forward hooks on those decoder layers (`layer_capture.LayerTaps`, the transformers path's
  own): the pipeline drives the same model, so the layers are read where the scheduler's step begins,
  right after the step's predictor forward (DDIM's corrector sweeps run their own forwards after it),
  and the lens ranks of the committed tokens when the block closes.
- `pins` (the one intervention; without pins nothing of this is installed), in the first block: a
  forward pre-hook on the model puts them into every decoder input (the first step's random canvas
  included); the scheduler's step gets the pinned canvas and logits in which every other token of a
  pinned position is -inf (so every scheduler samples the pin with probability 1, takes it as its argmax
  and accepts or commits it, and self-conditions on that); and the callback hands the pipeline its canvas
  with the pins on it, which the pipeline takes as the next step's canvas (`callback_outputs.pop("canvas")`):
  DDIM's posterior and its corrector sweeps (left as they are: their leave-one-out logits are not made
  for -inf) may move a pinned position, and it is put back before the step ends.
- a fork's interventions (`edits`, from its step on; without a fork nothing of this is installed) go
  in at the same places, `set`'s tokens held as the pins are: `diffusers_edits.py` says what each does where.

The pipeline's private details this relies on (diffusers 0.42.1; tests/test_diffusers_backend.py
checks each): the callback may ask for `canvas` and `logits` (`_callback_tensor_inputs`); the
scheduler is called as `self.scheduler.step(..., return_dict=True)` once per step, before the
callback, with the keyword arguments its signature names (so the wrap keeps the signature); each block starts with one call of `self.model.model.encoder(input_ids=...)` whose
`input_ids` are the tokens not yet cached (the previous canvas after the first block); a block
that converges early leaves its loop with a `break` after the callback; the decoder is called as
`self.model(decoder_input_ids=canvas, ...)` (keywords only) and the canvas the callback returns
is the next step's.

Nothing here draws random numbers or writes to a tensor the pipeline reads, so a captured run is
bit-identical to the stock pipeline with the same generator (tests/test_diffusers_backend.py).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable

import numpy as np
import torch

from visualizer.records import LENS_FIELDS

from .bridge import GenerationCancelled
from .captured import CapturedBlock, CapturedStep, pad_after_eos
from .diffusers_edits import PipelineEditor
from .layer_capture import LayerTaps, block_lens, guard_hooks, layer_rms
from .logit_summary import shift_nats, summarize_logits

CALLBACK_TENSORS = ["canvas", "logits"]  # all the pipeline hands its callback (`_callback_tensor_inputs`)


def _host(t: torch.Tensor | None) -> np.ndarray | None:
    """The first batch row as numpy (batch 1: the backend runs one prompt)."""
    return None if t is None else t.detach()[0].cpu().numpy().copy()


def accepted_set(out, canvas: torch.Tensor, before: torch.Tensor | None) -> torch.Tensor:
    """The positions a scheduler's step kept, from what its output reports.

    entropy-bound reports the set it accepted this step (recomputed every step); block refinement
    reports what it committed this step, and commits accumulate over the block; discrete DDIM
    reports no set at all, so its accepted positions are the ones whose canvas token is this step's
    predicted clean token x0 (`sampled_tokens`): a definition read off the record, not a guess at its routes.
    """
    if hasattr(out, "accepted_index"):
        return out.accepted_index
    if hasattr(out, "transfer_index"):
        committed = out.transfer_index | out.editing_transfer_index
        return committed if before is None else before | committed
    return canvas == out.sampled_tokens


class PipelineCapture:
    """The state of one captured pipeline call: the block and step it is at, the last scheduler output."""

    def __init__(self, on_step, on_block, should_stop, *, topk: int, scaled_entropy: bool,
                 canvas_length: int, eos_ids: tuple[int, ...], pad_id: int | None, confidence_sampler: bool,
                 shift: bool = False, model=None, pins: tuple[tuple[int, int], ...] = (), edits=None):
        self.on_step, self.on_block, self.should_stop = on_step, on_block, should_stop
        self.shift = shift  # the KL of each position's distribution from the previous step's (logit_summary.shift_nats)
        self.previous: torch.Tensor | None = None  # the previous step's log p (one float32 distribution a row)
        self.topk, self.scaled_entropy = topk, scaled_entropy
        self.num_steps = 0  # the block's predictor steps, read from the scheduler at the first step
        self.canvas_length, self.eos_ids, self.pad_id = canvas_length, eos_ids, pad_id
        self.confidence_sampler = confidence_sampler  # record each sample's probability (what it compares)
        self.block, self.steps = -1, 0
        self.out = None  # the scheduler's output of the step in progress
        self.accepted: torch.Tensor | None = None  # the previous step's set (block refinement accumulates)
        self.last_canvas: np.ndarray | None = None
        self.clock = time.perf_counter()
        self.model = model  # the pipeline's model: its head reads the layers (layer_capture)
        self.taps: LayerTaps | None = None  # set by capture_pipeline when layers are recorded
        self.inside: dict = {}  # the step's layer RMS and lens, read at the scheduler's step
        self.kept: list[list[torch.Tensor]] = []  # the block's layer outputs per step, for the lens ranks
        self.pins = pins
        self.pinned_logits: torch.Tensor | None = None  # the step's logits as edited (pins, set, forbid): what the scheduler saw
        self.scheduler = None  # the pipeline's scheduler (block refinement's committed state: diffusers_edits)
        self.edits = edits  # a fork's interventions (`diffusers_edits.PipelineEditor`); None: none
        self.stepped = False  # the scheduler has stepped in the step in progress (DDIM's correctors come after)

    # ---- held tokens: pins (the first block) and a fork's set (from its step to the block's end) ----------
    def held(self) -> tuple[tuple[int, int], ...]:
        """(position, id) held at the step in progress: the pins in the first block, then a fork's set, which wins
        where both hold a position (as applying them in that order does; one token a position)."""
        pins = self.pins if self.block == 0 else ()
        fork = self.edits.held(self.block, self.steps) if self.edits is not None else ()
        return tuple(dict(pins + fork).items()) if fork else pins

    @staticmethod
    def pin_canvas(canvas: torch.Tensor, held) -> torch.Tensor:
        """The canvas with the held tokens on it (a copy: the pipeline's tensor is never written)."""
        where = torch.tensor([p for p, _ in held], device=canvas.device)
        pinned = canvas.clone()
        pinned[:, where] = torch.tensor([t for _, t in held], device=canvas.device, dtype=canvas.dtype)
        return pinned

    @staticmethod
    def pin_logits(logits: torch.Tensor, held) -> torch.Tensor:
        """At each held position every logit but the held token's is -inf (a copy)."""
        rows = torch.full((len(held), logits.shape[-1]), float("-inf"), dtype=logits.dtype, device=logits.device)
        rows[torch.arange(len(held)), torch.tensor([t for _, t in held])] = 0.0
        pinned = logits.clone()
        pinned[:, torch.tensor([p for p, _ in held], device=logits.device)] = rows
        return pinned

    def decoder_inputs(self, module, args, kwargs):
        """Model pre-hook (installed only with pins or a fork): every decoder input holds what is held; a fork's
        step reads its canvas, and the self-conditioning as the fork edits it (`diffusers_edits`)."""
        canvas = kwargs.get("decoder_input_ids")
        if canvas is None:
            return None
        changed = dict(kwargs)
        if self.edits is not None:
            changed["decoder_input_ids"] = canvas = self.edits.decoder_canvas(self.block, self.steps, canvas)
            changed["self_conditioning_logits"] = self.edits.conditioning(
                self.block, self.steps, self.stepped, kwargs.get("self_conditioning_logits"))
        held = self.held()
        if held:
            changed["decoder_input_ids"] = self.pin_canvas(canvas, held)
        return args, changed

    def _check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise GenerationCancelled()

    # ---- the three observation points ------------------------------------------------------------
    def block_starts(self, module, args, kwargs) -> None:
        """Encoder pre-hook: a new block begins; its input is the block just committed."""
        self._check_stop()
        if self.block >= 0:
            self._close_block(kwargs["input_ids"][:, -self.canvas_length:])
        self.block, self.steps, self.accepted, self.previous = self.block + 1, 0, None, None
        self.stepped = False
        self.kept.clear()
        self.clock = time.perf_counter()

    def scheduler_step(self, original, *args, **kwargs):
        self._check_stop()
        if self.taps is not None:  # the step's predictor forward has just run (the corrector's come after)
            hiddens = self.taps.take()
            self.inside = {"layer_rms": layer_rms(hiddens)}
            self.kept.append([h.clone() for h in hiddens])  # a cudagraph-compiled decoder reuses its outputs
        raw = kwargs["model_output"]
        if self.edits is not None:  # the fork step's canvas; forbid's -inf
            kwargs = self.edits.scheduler_inputs(self.block, self.steps, kwargs, self.scheduler)
        held = self.held()
        if held:
            kwargs["model_output"] = self.pin_logits(kwargs["model_output"], held)
            kwargs["sample"] = self.pin_canvas(kwargs["sample"], held)
        self.pinned_logits = kwargs["model_output"] if kwargs["model_output"] is not raw else None
        self.stepped = True
        self.out = original(*args, **kwargs)
        return self.out

    def callback(self, pipe, global_step: int, step_idx: int, tensors: dict) -> dict:
        """`callback_on_step_end`: one StepRecord's worth, copied; returns nothing to change. A step is one
        predictor step, with any corrector sweeps that followed it (the canvas is the one after them)."""
        out, canvas = self.out, tensors["canvas"]
        returned = {}
        given = canvas
        if self.edits is not None:  # a forbidden token scrubbed; what the fork step turned to noise, uncommitted
            canvas = self.edits.next_canvas(self.block, step_idx, canvas)
            forgotten = self.edits.forgotten(self.block, step_idx)
            if forgotten and self.accepted is not None:
                self.accepted = self.accepted.clone()
                self.accepted[:, forgotten] = False
        held = self.held()
        if held:
            canvas = self.pin_canvas(canvas, held)
        if canvas is not given:  # the pipeline takes this canvas as the next step's
            returned["canvas"] = canvas
        self.stepped = False
        # The scheduler's step count after the pipeline's set_timesteps: the predictor steps, fewer than
        # num_inference_steps when DDIM's corrector sweeps take their share of the budget.
        self.num_steps = int(pipe.scheduler.num_inference_steps)
        self.accepted = accepted_set(out, canvas, self.accepted)
        raw = self.pinned_logits if self.pinned_logits is not None else tensors["logits"]  # what the scheduler sampled from
        logits = out.pred_logits if self.scaled_entropy else raw
        summary = summarize_logits(logits, self.topk, log_partition=self.shift)
        kl = None
        if self.shift:  # of the distribution the summary describes (normalized with its log sum exp); none at a block's first step
            first = self.previous is None
            kl, self.previous = shift_nats(logits, self.previous, log_partition=summary.log_partition)
            kl = None if first else kl
        step = CapturedStep(
            block=self.block,
            step=step_idx,
            steps_remaining=self.num_steps - step_idx,
            accepted=_host(self.accepted).astype(bool, copy=False),
            canvas=_host(canvas).astype(np.int32, copy=False),
            argmax=_host(out.pred_logits.argmax(-1)).astype(np.int32, copy=False),  # the pipeline's own argmax
            entropy_nats=_host(summary.entropy).astype(np.float32, copy=False),
            wall_time_s=0.0,
            topk_ids=_host(summary.topk_ids),
            topk_probs=_host(summary.topk_probs),
            sample_probability=_host(out.sampled_probs).astype(np.float32) if self.confidence_sampler else None,
            kl_nats=None if kl is None else _host(kl).astype(np.float32, copy=False),
            layer_rms=_host(self.inside.get("layer_rms")),
        )
        now = time.perf_counter()
        step.wall_time_s, self.clock = now - self.clock, now  # since the previous step ended: the forward included
        self.steps, self.last_canvas = step_idx + 1, step.canvas
        self.on_step(step)
        return returned

    def finish(self, sequences: torch.Tensor) -> None:
        """The pipeline returned: its last canvas is the last block."""
        if self.block >= 0 and self.steps:
            self._close_block(sequences[:, -self.canvas_length:])

    def _close_block(self, committed: torch.Tensor) -> None:
        tokens = pad_after_eos(_host(committed).astype(np.int32), self.eos_ids, self.pad_id)
        # Converged: the loop broke early, or it replaced the last canvas by the argmax (convergence at
        # the last step). A block converging at its last step on a canvas equal to its argmax reads as
        # out of steps: the pipeline does not say.
        converged = self.steps < self.num_steps or not np.array_equal(_host(committed), self.last_canvas)
        lens = {}
        if self.kept:  # (steps, layers, canvas) each: every step's lens, under the tokens the block recorded
            recorded = torch.from_numpy(tokens.astype(np.int64))[None].to(self.kept[0][0].device)
            every = block_lens(self.model, [h for hiddens in self.kept for h in hiddens], recorded)
            shape = (len(self.kept), len(self.kept[0]))
            lens = {name: v[0].unflatten(0, shape).cpu().numpy() for name, v in zip(LENS_FIELDS, every)}
            self.kept.clear()
        self.on_block(CapturedBlock(block=self.block, tokens=tokens, steps_used=self.steps, converged=converged, **lens))


@contextlib.contextmanager
def capture_pipeline(pipe, on_step: Callable[[CapturedStep], None], on_block: Callable[[CapturedBlock], None],
                     should_stop: Callable[[], bool] | None = None, *, topk: int, scaled_entropy: bool,
                     eos_ids: tuple[int, ...], pad_id: int | None, confidence_sampler: bool = False, shift: bool = False,
                     layers: tuple[int, ...] = (), pins: tuple[tuple[int, int], ...] = (), edits=None):
    """Install the scheduler wrap and the encoder hook (and the layer taps, and the model hook of the pins and of a
    fork's `edits`, a `backends.interventions.ForkPlan`, when asked) for the duration of the run; always undone."""
    guard_hooks()  # in this thread, for a decoder the caller compiles (dynamo's config is thread-local: layer_capture)
    scheduler = pipe.scheduler
    if "step" in vars(scheduler):
        raise RuntimeError("capture_pipeline is already active on this scheduler")
    capture = PipelineCapture(
        on_step, on_block, should_stop, topk=topk, scaled_entropy=scaled_entropy,
        canvas_length=int(pipe.model.config.canvas_length), eos_ids=eos_ids, pad_id=pad_id,
        confidence_sampler=confidence_sampler, shift=shift, model=pipe.model, pins=tuple(pins),
        edits=None if edits is None else PipelineEditor(edits, int(pipe.model.config.get_text_config(decoder=True).vocab_size)),
    )
    capture.scheduler = scheduler
    original = scheduler.step
    handles = []
    try:
        # functools.wraps: the pipeline passes `generator` and `temperature` only to a step whose signature
        # names them (inspect.signature follows __wrapped__); a bare (*args, **kwargs) would drop them.
        scheduler.step = functools.wraps(original)(lambda *args, **kwargs: capture.scheduler_step(original, *args, **kwargs))
        handles.append(pipe.model.model.encoder.register_forward_pre_hook(capture.block_starts, with_kwargs=True))
        if pins or edits is not None:
            handles.append(pipe.model.register_forward_pre_hook(capture.decoder_inputs, with_kwargs=True))
        with (LayerTaps(pipe.model, layers) if layers else contextlib.nullcontext()) as taps:
            capture.taps = taps
            yield capture
    finally:
        capture.previous = capture.taps = None  # the kept distribution, freed with the run
        capture.kept.clear()  # and the layer outputs
        vars(scheduler).pop("step", None)
        for handle in handles:
            handle.remove()
