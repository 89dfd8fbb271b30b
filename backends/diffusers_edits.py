"""A fork's interventions inside diffusers' DiffusionGemmaPipeline (issue 55, docs/lab.md), under any scheduler.

`diffusers_capture.PipelineCapture` calls this at the places it already watches (and where pins go in), each at the
step it is at (`block`, `step` from 0, the step being computed):

    decoder input    (a model pre-hook)  the canvas the fork step denoises: a warm start's tokens, remask's noise, a
                     forbidden token scrubbed; the self-conditioning the model reads: topk and nudge
    scheduler.step   (the capture's wrap) the same canvas as the step's `sample`; forbid's -inf in the logits; block
                     refinement's committed state dropped where the fork turned a position back to noise
    callback         (`callback_on_step_end`) the canvas the pipeline takes as the next step's: a forbidden token
                     scrubbed
    held tokens      `set`'s tokens join the pins (`PipelineCapture.held`): on every decoder input, the scheduler's
                     canvas and logits (every other logit -inf) and the callback's canvas, to the block's end

What is the transformers path's is the same here: remask's noise from a generator of the fork's own seeded with the
run's seed, topk before nudge, set and forbid to the block's end, topk to the run's end, a nudge moving EPS onto a
token in the distribution the next step is conditioned on (the pipeline's `self_conditioning_logits`, edited where
the model reads it, so the step's own sample, acceptance and early stop stay the stock ones).

What differs, and why:
- `forbid` also scrubs: the schedulers renoise with uniform tokens, and DDIM's posterior may keep a canvas token
  ("stay"), so the forbidden token could sit at its position as noise; where it does, from the fork step on, it is
  replaced by a draw (from the fork's own generator, over every other token) before any step reads it. So it never
  appears there at all, not only never accepted.
- block refinement keeps what it committed in the scheduler (`_committed`, diffusers 0.42.1; tests check it is
  there): a position remasked or scrubbed at the fork step is dropped from it, or the scheduler would keep the noise.
- `knob` goes in at the scheduler's step from the fork step on, the way each scheduler reads it: `entropy_bound`,
  `temperature` (DDIM, block refinement) and block refinement's thresholds as the step's own arguments (which
  override the config, diffusers 0.42.1), entropy-bound's `t_min`/`t_max` (read from its config each step) in the
  config of the run's own scheduler (`scheduler_for` makes one a run), DDIM's `corrector_k` there too (read at each
  corrector sweep). What a sampler does not read afresh (DDIM's `corrector_steps`: the pipeline splits the step
  budget before the first step) is refused (`SamplerSpec.fork_knobs`, `interventions.knob_problem`).
- DDIM's corrector sweeps (their leave-one-out logits are not made for -inf, as with pins) are not edited: what they
  draw at a set or forbidden position is put back or scrubbed in the callback, before the next step reads it.

Nothing here draws from the pipeline's generator, so before the fork step the run is the stock pipeline's, bit for
bit (tests/test_diffusers_fork.py, on each scheduler).
"""

from __future__ import annotations

import torch

from .interventions import ForkPlan, edit_conditioning

# The kinds a diffusers fork applies (`Capabilities.interventions`): all of them.
DIFFUSERS_KINDS = frozenset({"set", "remask", "forbid", "nudge", "topk", "knob"})
# A knob as `scheduler.step` takes it (a keyword that overrides the config); the others are config entries.
STEP_ARGUMENTS = {"entropy_bound": "entropy_bound", "temperature": "temperature", "refine_threshold": "threshold",
                  "editing_threshold": "editing_threshold"}


class PipelineEditor:
    """One fork's interventions inside one pipeline call; the capture passes the (block, step) it is at."""

    def __init__(self, plan: ForkPlan, vocab_size: int):
        self.plan, self.vocab_size = plan, vocab_size
        pairs = list(zip(plan.interventions, plan.ids))
        self.set_tokens = tuple(dict((iv.position + i, t) for iv, ids in pairs if iv.kind == "set"
                                     for i, t in enumerate(ids)).items())  # the last set's token where two overlap
        self.forbidden = tuple((iv.position, ids[0]) for iv, ids in pairs if iv.kind == "forbid")
        self.nudges = tuple((iv.position, ids[0], iv.amount) for iv, ids in pairs if iv.kind == "nudge")
        self.topk = min((iv.k for iv in plan.interventions if iv.kind == "topk"), default=None)
        self.remasked = sorted({p for iv in plan.interventions if iv.kind == "remask"
                                for p in range(iv.position, iv.last + 1)})
        self.knobs = {iv.knob: float(iv.amount) for iv in plan.interventions if iv.kind == "knob"}
        self.scrub_draws = torch.Generator(device="cpu").manual_seed(plan.seed)  # the fork's own, for forbid
        self.fork_canvas: torch.Tensor | None = None  # the canvas the fork step denoises, made once
        self.renoised: list[int] = []  # positions the fork step's canvas turned to noise (committed state dropped)
        self._conditioned: tuple | None = None  # (the pipeline's tensor, its edit): correctors read the same one

    # where the fork is
    def at_fork(self, block: int, step: int) -> bool:
        return (block, step) == (self.plan.block, self.plan.step)

    def in_fork_block(self, block: int, step: int) -> bool:
        return block == self.plan.block and step >= self.plan.step

    def after_fork(self, block: int, step: int) -> bool:
        return (block, step) >= (self.plan.block, self.plan.step)

    def held(self, block: int, step: int) -> tuple[tuple[int, int], ...]:
        """`set`'s tokens, held like pins from the fork step to the block's end."""
        return self.set_tokens if self.in_fork_block(block, step) else ()

    # the decoder input
    def decoder_canvas(self, block: int, step: int, canvas: torch.Tensor) -> torch.Tensor:
        """The fork step's first decoder input (its predictor's) becomes the fork's canvas; every other one stays."""
        if not self.at_fork(block, step) or self.fork_canvas is not None:
            return canvas
        edited = canvas.clone()
        placed = self.plan.placed
        if placed:  # a warm start's tokens, on the run's own first canvas (its random draw already made)
            edited[:, [p for p, _ in placed]] = torch.tensor([t for _, t in placed], dtype=edited.dtype,
                                                             device=edited.device)
        if self.remasked:
            noise = torch.Generator(device="cpu").manual_seed(self.plan.seed)
            drawn = torch.randint(0, self.vocab_size, (edited.shape[0], len(self.remasked)), generator=noise)
            edited[:, self.remasked] = drawn.to(edited.device, edited.dtype)
        edited, scrubbed = self._scrub(edited)
        self.renoised = sorted(set(self.remasked) | set(scrubbed))
        self.fork_canvas = edited
        return edited

    def conditioning(self, block: int, step: int, stepped: bool, logits: torch.Tensor | None) -> torch.Tensor | None:
        """The self-conditioning a decoder call reads, truncated and nudged when the step that made it is in range:
        the step before this one for its predictor, this one for DDIM's correctors (`stepped`: after the scheduler)."""
        made_at = step if stepped else step - 1
        if logits is None or made_at < 0:
            return logits
        topk = self.topk if self.after_fork(block, made_at) else None
        nudges = self.nudges if self.in_fork_block(block, made_at) else ()
        if topk is None and not nudges:
            return logits
        if self._conditioned is None or self._conditioned[0] is not logits:
            self._conditioned = (logits, edit_conditioning(logits, topk, nudges))
        return self._conditioned[1]

    # the scheduler's step
    def scheduler_inputs(self, block: int, step: int, kwargs: dict, scheduler) -> dict:
        """The step's canvas and logits as the fork has them; block refinement forgets what was turned to noise."""
        if self.at_fork(block, step) and self.fork_canvas is not None:
            kwargs["sample"] = self.fork_canvas
            committed = getattr(scheduler, "_committed", None)
            if self.renoised and committed is not None and step > 0:  # step 0 resets it anyway
                committed = committed.clone()
                committed[:, self.renoised] = False
                scheduler._committed = committed
        if self.knobs and self.after_fork(block, step):
            kwargs = self._with_knobs(kwargs, scheduler)
        if self.forbidden and self.in_fork_block(block, step):
            logits = kwargs["model_output"].clone()
            for position, token in self.forbidden:
                logits[:, position, token] = float("-inf")
            kwargs["model_output"] = logits
        return kwargs

    def _with_knobs(self, kwargs: dict, scheduler) -> dict:
        """The step's arguments with the fork's knobs; the config ones set on the run's scheduler (a new one a run)."""
        config = {name: value for name, value in self.knobs.items() if name not in STEP_ARGUMENTS}
        if config and any(scheduler.config[name] != value for name, value in config.items()):
            scheduler.register_to_config(**config)
        return {**kwargs, **{STEP_ARGUMENTS[name]: value for name, value in self.knobs.items() if name in STEP_ARGUMENTS}}

    def forgotten(self, block: int, step: int) -> list[int]:
        """The positions the fork step turned back to noise: no longer committed (the capture's accumulated set)."""
        return self.renoised if self.at_fork(block, step) else []

    # the callback's canvas
    def next_canvas(self, block: int, step: int, canvas: torch.Tensor) -> torch.Tensor:
        if not self.forbidden or not self.in_fork_block(block, step):
            return canvas
        return self._scrub(canvas)[0]

    def _scrub(self, canvas: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """Where a forbidden token sits at its position, a draw over every other token instead (a copy if any)."""
        hits = [(p, t) for p, t in self.forbidden if bool((canvas[:, p] == t).any())]
        if not hits:
            return canvas, []
        canvas = canvas.clone()
        for position, token in hits:
            rows = canvas[:, position] == token
            draw = torch.randint(0, self.vocab_size - 1, (int(rows.sum()),), generator=self.scrub_draws)
            canvas[rows, position] = (draw + (draw >= token)).to(canvas.device, canvas.dtype)
        return canvas, [p for p, _ in hits]
