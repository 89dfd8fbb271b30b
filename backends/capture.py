"""Watch transformers' DiffusionGemma generation step by step without changing it.

`capture_steps(model, on_step, on_block, should_stop)` is a context manager that shadows four methods
of one model *instance* (instance attributes win over class methods) and removes them in
`finally`, on success, on error and on cancel alike:

    _prepare_logits_processor  appends a pass-through processor last, which summarizes the
                               processed float32 logits the sampler sees: entropy and top-k
                               candidates, on the device (`logit_summary.py`)
    _prepare_denoiser_inputs   marks the start of a block
    _denoising_step            after each step: copies the accepted mask, the next canvas, the
                               argmax, the entropy and the top-k of every batch row to the CPU,
                               all non-blocking with one wait per step; checks the stop flag first
    _finalize_canvas           after each block: the committed tokens (pad after EOS)

Optionally (issue 44, docs/layers-and-pins.md): forward hooks on chosen decoder layers (`layer_capture.py`:
their RMS each step; at the block's end, for every step, the logit lens and the rank of each committed token), the KL of
each position's distribution from the previous step's (in the same processor as the entropy), and pins:
a second processor, before the recorder, that holds pinned tokens in the first block; and a fork's
interventions from its step on (`interventions.Editor`: a processor beside the pins', the canvas a step
denoises, the self-conditioning it hands on). Without pins or a fork neither is installed.

A batched `generate` (several prompts, left-padded: `transformers_backend.batch_inputs`) gives
one CapturedStep per row still denoising at each step and one CapturedBlock per row still
generating at each block, each naming its `row` (see `capture_steps`).

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
bit-identical sequences with and without the capture (tests/test_capture.py proves it, and
tests/test_batch_capture.py for batches, row by row).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import numpy as np
import torch

from visualizer.records import LENS_FIELDS

from .base import BackendError
from .bridge import GenerationCancelled
from .captured import CapturedBlock, CapturedStep
from .interventions import Editor, PinTable
from .layer_capture import LayerTaps, block_lens, guard_hooks, layer_rms, no_taps
from .logit_summary import LogitSummary, shift_nats, summarize_logits
from .vote_errors import FailedInStep

# The model's methods the capture shadows on its instance, each with the `_StepRecorder` method in its place.
_WRAPPED = ("_prepare_logits_processor", "_prepare_denoiser_inputs", "_denoising_step", "_finalize_canvas")


class _LogitRecorder:
    """Pass-through logits processor: keeps the summary of the logits it is given, never the logits.
    With `shift`, also the KL from the previous step's distribution, whose log p it keeps (one float32
    distribution per row: `logit_summary.shift_nats`); `reset()` forgets it at a block's start.
    With `hold`, an error of its own is kept in `error` instead of raised inside the model's sampling."""

    def __init__(self, topk: int, *, hold: bool = False, shift: bool = False):
        self.topk, self.hold, self.shift = topk, hold, shift
        self.summary: LogitSummary | None = None
        self.kl: torch.Tensor | None = None  # (batch, canvas) float32; None at a block's first step
        self.previous: torch.Tensor | None = None
        self.error: Exception | None = None

    def reset(self) -> None:
        self.kl = self.previous = None

    def __call__(self, input_ids, scores, cur_step):  # LogitsProcessorList passes cur_step by name
        try:
            self.summary = summarize_logits(scores, self.topk, log_partition=self.shift)
            if self.shift:  # normalized with the summary's log sum exp: one more read of the logits, not three
                first = self.previous is None
                kl, self.previous = shift_nats(scores, self.previous, log_partition=self.summary.log_partition)
                self.kl = None if first else kl
        except Exception as exc:
            if not self.hold:
                raise
            self.error = exc
        return scores


class _PinProcessor:
    """The pins, as a logits processor placed before the recorder: at each pinned position of the first
    block, every logit but the pinned token's becomes -inf, so the stock sampler samples it (probability 1),
    takes it as the argmax, and accepts it first (entropy 0 spends none of the bound). Other positions'
    logits pass unchanged; a run without pins never installs it."""

    def __init__(self, pins: tuple[tuple[int, int], ...], state: dict):
        self.table = PinTable(pins)  # shared with a fork's `set`
        self.state = state

    def __call__(self, input_ids, scores, cur_step):
        if self.state["block"] != 0:
            return scores
        return self.table.apply(scores)


def _accepting_sampler(sampler):
    """The object whose `accepted_token_mask` the step really set (see the module docstring)."""
    accept = sampler.accept_canvas
    bound = getattr(accept, "__wrapped__", accept)
    return getattr(bound, "__self__", sampler)


def _to_host(tensors: dict) -> dict:
    """Copy each tensor (every batch row) to numpy: every copy queued non-blocking, then one wait.

    On CUDA a non-blocking copy to the CPU lands in pinned memory and returns before it is done;
    the one synchronize after the last of them makes all of them safe to read (the compiled
    accept_canvas's mask is a CUDA-graph output, overwritten at the next replay: copied before it).
    """
    rows = {name: t.detach() for name, t in tensors.items() if t is not None}
    on_cuda = any(t.is_cuda for t in rows.values())
    copies = {name: t.to("cpu", non_blocking=on_cuda) for name, t in rows.items()}
    if on_cuda:
        torch.cuda.current_stream().synchronize()
    return {name: t.numpy().copy() for name, t in copies.items()}


class _StepRecorder:
    """One capture's state and the four wrappers `capture_steps` puts on the model: each wrapper calls the
    stock method it shadows (`originals`), then records what that method computed.

    Host-side state per row (numpy, shape (batch,)), so nothing is read back from the device for it:
    `done` (its generation is over), `settled` (its block converged), `steps_used` in this block."""

    def __init__(self, model, on_step, on_block, should_stop, *, topk, agree, shift, pins, edits=None, to_final=None):
        self.model, self.on_step, self.on_block = model, on_step, on_block
        self.should_stop, self.agree = should_stop, agree
        self.originals = {name: getattr(model, name) for name in _WRAPPED}
        self.logits = _LogitRecorder(topk, hold=agree is not None, shift=shift)
        self.state = {"block": -1, "step": 0, "done": None, "settled": None, "steps_used": None}
        self.pinner = _PinProcessor(pins, self.state) if pins else None
        self.editor = Editor(edits, self.state) if edits is not None else None  # a fork's interventions
        self.to_final = to_final  # one pass of two of the KL to the final step (`kl_to_final.KlToFinal`)
        if to_final is not None:  # rows still denoising (the state is set per block)
            to_final.rows = lambda: ~(self.state["done"] | self.state["settled"])
        self.kept: list[tuple[list[torch.Tensor], np.ndarray]] = []  # this block's layer outputs per step, and its active rows
        self.held: list[Exception] = []  # a recording error waiting for the next vote (`agree` only)
        self.taps: LayerTaps | None = None  # set while the layer hooks are in place (`capture_steps`)

    def wrappers(self) -> dict:
        return {name: getattr(self, name) for name in _WRAPPED}

    def stop_here(self, canvas=None) -> None:
        """Raise GenerationCancelled when the run has to stop (or the held error, voted on first)."""
        wants = self.should_stop is not None and self.should_stop()
        if self.agree is not None:
            wants = self.agree(wants or bool(self.held), canvas)
            if self.held:
                raise FailedInStep() from self.held[0]
        if wants:
            raise GenerationCancelled()

    def recording(self, record: Callable[[], None]) -> None:
        """Run `record`; with `agree`, an error in it is held for the next vote instead of raised."""
        if self.agree is None:
            record()
            return
        try:
            if self.logits.error is not None:
                raise self.logits.error
            if not self.held:
                record()
        except Exception as exc:
            self.held.append(exc)
            self.logits.error = None

    def _prepare_logits_processor(self, generation_config, logits_processor=None):
        processors = self.originals["_prepare_logits_processor"](generation_config, logits_processor)
        if self.pinner is not None:
            processors.append(self.pinner)
        if self.editor is not None:
            processors.append(self.editor.attach(processors))
        processors.append(self.logits)
        if self.to_final is not None:
            processors.append(self.to_final)
        return processors

    def _prepare_denoiser_inputs(self, *args, **kwargs):
        self.stop_here()
        state, rows = self.state, kwargs["batch_size"]
        if state["done"] is None:  # the first block: no row has finished yet
            state["done"] = np.zeros(rows, bool)
        state.update(block=state["block"] + 1, step=0, settled=np.zeros(rows, bool), steps_used=np.zeros(rows, int))
        self.logits.reset()
        self.kept.clear()
        if self.to_final is not None:
            self.to_final.start_block()
        canvas, *rest = self.originals["_prepare_denoiser_inputs"](*args, **kwargs)
        pinner = self.pinner
        if pinner is not None and state["block"] == 0:  # on the canvas before the first step (after its random draw)
            where = torch.tensor(pinner.table.positions, device=canvas.device)
            canvas = canvas.clone()
            canvas[:, where] = torch.tensor(pinner.table.ids, device=canvas.device, dtype=canvas.dtype)
        return (canvas, *rest)

    def _denoising_step(self, *args, **kwargs):
        self.stop_here(kwargs.get("current_canvas"))
        started = time.perf_counter()
        if self.editor is not None:
            kwargs = self.editor.before_step(kwargs, _accepting_sampler(kwargs["sampler"]))
        out = self.originals["_denoising_step"](*args, **kwargs)
        if self.editor is not None:
            out = self.editor.after_step(out)
        self.recording(lambda: self.record_step(out, kwargs, started))
        return out

    def record_step(self, out, kwargs, started) -> None:
        next_canvas, argmax, _, finished = out
        sampler = _accepting_sampler(kwargs["sampler"])
        state, summary = self.state, self.logits.summary
        active = ~(state["done"] | state["settled"])  # rows still denoising before this step
        inside = {}
        if self.taps is not None:
            hiddens = self.taps.take()
            inside = {"layer_rms": layer_rms(hiddens)}
            self.kept.append(([h.clone() for h in hiddens], active.copy()))  # a compiled step's outputs are overwritten next step
        host = _to_host(
            {
                "accepted": sampler.accepted_token_mask,
                "canvas": next_canvas,
                "argmax": argmax,
                "entropy": summary.entropy,
                "finished": finished,
                "topk_ids": summary.topk_ids,
                "topk_probs": summary.topk_probs,
                "kl": self.logits.kl,
                "kl_to_final": None if self.to_final is None else self.to_final.kl,
                **inside,
            }
        )
        wall_time_s = time.perf_counter() - started  # after the copies: device work included
        for row in np.flatnonzero(active):
            self.on_step(_step_of_row(host, row, state, int(kwargs["cur_step"]), wall_time_s))
        state["steps_used"] += active
        state["settled"] |= host["finished"].astype(bool)
        state["step"] += 1

    def _finalize_canvas(self, *args, **kwargs):
        input_ids, finished = self.originals["_finalize_canvas"](*args, **kwargs)
        if self.to_final is not None:
            self.to_final.end_block()
        self.recording(lambda: self.record_block(input_ids, finished, kwargs["canvas_length"]))
        return input_ids, finished

    def record_block(self, input_ids, finished, canvas_length) -> None:
        tokens = input_ids[:, -canvas_length:]
        state, kept, lens = self.state, self.kept, {}
        if kept:  # (steps, batch, layers, canvas) each: the lens of every step, once the committed tokens are known
            steps, layers = len(kept), len(kept[0][0])
            every = block_lens(self.model, [h for hiddens, _ in kept for h in hiddens], tokens)
            lens = {name: v.unflatten(1, (steps, layers)).transpose(0, 1) for name, v in zip(LENS_FIELDS, every)}
        host = _to_host({"tokens": tokens, "finished": finished, **lens})
        was_active = np.stack([active for _, active in kept]) if kept else None
        kept.clear()
        for row in np.flatnonzero(~state["done"]):
            self.on_block(
                CapturedBlock(
                    block=state["block"],
                    tokens=host["tokens"][row].astype(np.int32, copy=False),
                    steps_used=int(state["steps_used"][row]),
                    converged=bool(state["settled"][row]),
                    row=int(row),
                    **{name: host[name][was_active[:, row], row] for name in lens},
                )
            )
        state["done"] = host["finished"].astype(bool)


def _step_of_row(host: dict, row: int, state: dict, steps_remaining: int, wall_time_s: float) -> CapturedStep:
    """The CapturedStep of one batch row, from a step's copies to the host (`_to_host`)."""
    topk_ids, topk_probs = host.get("topk_ids"), host.get("topk_probs")
    kl, rms, to_final = host.get("kl"), host.get("layer_rms"), host.get("kl_to_final")
    return CapturedStep(
        block=state["block"],
        step=state["step"],
        steps_remaining=steps_remaining,
        accepted=host["accepted"][row].astype(bool, copy=False),
        canvas=host["canvas"][row].astype(np.int32, copy=False),
        argmax=host["argmax"][row].astype(np.int32, copy=False),
        entropy_nats=host["entropy"][row].astype(np.float32, copy=False),
        wall_time_s=wall_time_s,  # the whole batch's step: the rows share it
        converged=bool(host["finished"][row]),
        topk_ids=None if topk_ids is None else topk_ids[row],
        topk_probs=None if topk_probs is None else topk_probs[row],
        row=int(row),
        kl_nats=None if kl is None else kl[row],
        layer_rms=None if rms is None else rms[row],
        kl_to_final_nats=None if to_final is None else to_final[row],
    )


def capture_steps(
    model,
    on_step: Callable[[CapturedStep], None],
    on_block: Callable[[CapturedBlock], None],
    should_stop: Callable[[], bool] | None = None,
    *,
    topk: int = 0,
    agree: Callable[[bool, torch.Tensor | None], bool] | None = None,
    shift: bool = False,
    layers: tuple[int, ...] = (),
    pins: tuple[tuple[int, int], ...] = (),
    edits=None,
    to_final=None,
):
    """Install the four recording wrappers on `model` for the duration of the block.

    Every batch row is recorded: each CapturedStep and CapturedBlock says its `row`. transformers
    runs the rows of a batch in lock step (one block and one step counter for all of them) but
    keeps two per-row masks, and the capture follows both:
    - `finished_denoising`: a row whose stopping criterion fired keeps its canvas and argmax
      frozen while the other rows go on denoising; its block ended at that step (converged),
      so it gets no further step records in this block.
    - `finished_sequences`: a row that committed an EOS in an earlier block is still computed
      in later blocks (transformers overwrites its canvas with pad when the block ends); its
      generation is over, so it gets no further step or block records.

    `topk` > 0 also records the k most probable candidates of every position at every step.
    `shift` records the KL of each position's distribution from the previous step's (`logit_summary.shift_nats`).
    `layers` records those decoder layers' output per step (`layer_capture`): their RMS with the step, and at
    the block's end every step's logit lens with the rank of each committed token; hooks removed in `finally`.
    `pins` ((position, id), ...) is the one intervention: those tokens are placed on the first block's
    canvas before its first step and kept accepted at every step (`_PinProcessor`); () changes nothing.
    `edits` (an `interventions.ForkPlan`) applies a fork's interventions from its step on; None changes nothing.
    `to_final` (a `kl_to_final.KlToFinal`, one pass of two) is appended after the recorder and told each block's
    start and end; its `kl` travels with each step as `kl_to_final_nats`.

    `agree` is a sharded model's vote (`backends.sharded_server.agreed`): every rank runs the capture and
    calls `agree(wants_to_stop, canvas)` at the same points (each block's start with no canvas, before
    each step with the canvas it denoises), and the run stops on every rank when any rank wants to
    (or raises RanksDisagree on every rank when their canvases differ). A recording error (only
    rank 0 records) is held meanwhile: the stock step's result goes on unchanged, the next vote says
    stop, and this rank raises FailedInStep from the error there, or when `generate` returns if no
    vote came after it. Raised at once, it would leave the other ranks waiting in a collective this
    rank never joins."""
    # In the thread that runs `generate` (a backend's worker), before anything compiles there: dynamo's config
    # is thread-local since torch 2.12, so the import-time setting does not reach this thread (layer_capture).
    guard_hooks()
    if any(name in vars(model) for name in _WRAPPED):
        raise BackendError(
            "capture_steps is already active on this model: its hooks sit on the model instance, so one "
            "capture (one generate call, of any batch size) runs at a time; wait for it, or load a second model"
        )
    recorder = _StepRecorder(model, on_step, on_block, should_stop, topk=topk, agree=agree, shift=shift, pins=pins,
                             edits=edits, to_final=to_final)
    try:
        for name, wrapper in recorder.wrappers().items():
            setattr(model, name, wrapper)
        with (LayerTaps(model, layers) if layers else no_taps()) as recorder.taps:
            yield
        if recorder.held:  # the error came after the last vote: every rank has left `generate` by now
            raise FailedInStep() from recorder.held[0]
    finally:
        recorder.kept.clear()  # the layer outputs kept on the device for the ranks
        if recorder.editor is not None:
            recorder.editor.restore()  # a knob the fork changed on a sampler the model keeps (compiled)
        for name in _WRAPPED:
            vars(model).pop(name, None)


# Wrapped here, not decorated: mutmut (docs/mutation.md) leaves decorated functions unmutated, and
# this body (the wrappers' installing and removing) is part of what the capture's mutation score is about.
capture_steps = contextlib.contextmanager(capture_steps)
