"""A fork on the transformers backend (and, through `diffusers_edits.py`, on diffusers): re-run a recorded run from its seed and apply interventions from one step on.

    branch = fork_trace(backend, parent, parent_hash, block=1, step=10, interventions=(parse_intervention("forbid", "11=moon"),))

Generation is deterministic (the capture's identity tests prove it), so the re-run reproduces the parent exactly up to
the fork step; `fork_trace` checks that it did, step by step, and refuses a branch whose prefix differs. From the fork
step on, `Editor` applies the interventions (`visualizer.interventions.KINDS`) inside `capture_steps`, through the
same two places the pins use: a logits processor placed before the recorder, and the canvas a step denoises.

    set     the text's tokens placed on the canvas at the fork step and held (every other logit -inf) to the block's end
    forbid  that token's logit -inf at its position to the block's end: never sampled, never the argmax, never
            accepted (what is accepted is a sample), and the self-conditioning sees probability 0 for it
    remask  the positions' tokens replaced by noise on the canvas the fork step denoises, drawn from a generator of
            the fork's own (seeded by the run's seed) so the run's random stream stays the stock one
    nudge   EPS of probability moved onto the token in the self-conditioning distribution a step hands the next
            (`_denoising_step`'s third output: the processed logits, which the decoder's softmax reads), to the block's end
    topk    that distribution truncated to its top K at every position, from the fork step to the run's end (before
            nudge, so a nudge may add a token outside the top K)
    knob    entropy_bound (the accepting sampler's attribute) or t_min/t_max (the schedule processor's attributes)
            from the fork step on; restored when the run ends (a compiled sampler is kept on the model)

Nothing is installed without a fork: `capture_steps(edits=None)` is the capture as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from visualizer.interventions import KINDS, Branch, Intervention, plan_problems
from visualizer.records import FINISH_CANCELLED
from visualizer.step_names import StepName, StepNameError, locate_step
from visualizer.trace import Trace

from .base import BackendError

# Why a backend that declares no interventions has none, for its one-line refusal (diffusers forks: diffusers_edits.py).
NOT_FORKED = {
    "mlx": "its capture applies no edits to a run, not even pins",
}


def no_fork_reason(name: str) -> str:
    """Why the backend `name` cannot fork, for its one-line refusal."""
    return NOT_FORKED.get(name, "it declares no interventions")


def edit_conditioning(conditioning, topk: int | None, nudges) -> torch.Tensor:
    """The self-conditioning logits (batch, canvas, vocab) truncated to their top `topk` at every position, then
    `nudges` ((position, token, eps), ...) moving eps of probability onto a token: a copy in the input's dtype (the
    model's tensor is never written). Both backends that fork hand the next step this."""
    logits = conditioning.to(torch.float32, copy=True)
    if topk is not None and topk < logits.shape[-1]:
        values, ids = logits.topk(topk, dim=-1)
        logits = torch.full_like(logits, float("-inf")).scatter(-1, ids, values)
    for position, token, eps in nudges:
        probs = logits[:, position].softmax(-1) * (1 - eps)
        probs[:, token] += eps
        logits[:, position] = probs.log()
    return logits.to(conditioning.dtype)


class PinTable:
    """Tokens held at positions, as one table: at each position every logit but its token's becomes -inf, so the
    stock sampler samples it (probability 1), takes it as the argmax and accepts it. The pins (`capture._PinProcessor`)
    and a fork's `set` share it; built once for the scores' device and dtype, applied out of place."""

    def __init__(self, held):
        self.positions = [p for p, _ in held]
        self.ids = [t for _, t in held]
        self._rows = None  # (held, vocab): 0 at the held token, -inf elsewhere

    def apply(self, scores):
        if self._rows is None or self._rows.device != scores.device or self._rows.dtype != scores.dtype:
            rows = torch.full((len(self.ids), scores.shape[-1]), float("-inf"), dtype=scores.dtype, device=scores.device)
            rows[torch.arange(len(self.ids)), torch.tensor(self.ids)] = 0.0
            self._rows = rows
            self._where = torch.tensor(self.positions, device=scores.device)
        held = scores.clone()  # out of place: the model's own tensor is never written
        held[:, self._where] = self._rows
        return held


@dataclass(frozen=True)
class ForkPlan:
    """A fork as the capture applies it: the fork point counted from 0, the interventions and their ids."""

    block: int  # 0-based block of the fork step
    step: int  # 0-based step index within that block
    interventions: tuple[Intervention, ...]
    ids: tuple[tuple[int, ...], ...]  # each intervention's token ids (() for remask, topk, knob)
    seed: int  # the run's seed: remask's noise comes from a generator seeded with it
    placed: tuple[tuple[int, int], ...] = ()  # a warm start's (position, id) on the canvas the fork step denoises


class Editor:
    """One fork's interventions inside one capture. `state` is the capture's (block, step) counter, read at each
    call: `block` and `step` are the step being computed, counted from 0."""

    def __init__(self, plan: ForkPlan, state: dict):
        self.plan, self.state = plan, state
        self.schedule = None  # the run's LinearTemperatureScheduleLogitsProcessor, when it has one
        self.restores: list[tuple[object, str, object]] = []  # (object, attribute, value before the fork)
        self.knobs_applied = False
        self.held = [(iv.position + i, t) for iv, ids in zip(plan.interventions, plan.ids) if iv.kind == "set"
                     for i, t in enumerate(ids)]
        # one token a position, the last set's where two overlap (as applying them in the order given does)
        self.held_table = PinTable(dict(self.held).items()) if self.held else None
        self.forbidden = [(iv.position, ids[0]) for iv, ids in zip(plan.interventions, plan.ids) if iv.kind == "forbid"]
        self.nudges = [(iv.position, ids[0], iv.amount) for iv, ids in zip(plan.interventions, plan.ids) if iv.kind == "nudge"]
        self.topk = min((iv.k for iv in plan.interventions if iv.kind == "topk"), default=None)
        self.knobs = {iv.knob: iv.amount for iv in plan.interventions if iv.kind == "knob"}
        self.remasked = sorted({p for iv in plan.interventions if iv.kind == "remask" for p in range(iv.position, iv.last + 1)})

    # where the fork is
    def at_fork(self) -> bool:
        return (self.state["block"], self.state["step"]) == (self.plan.block, self.plan.step)

    def in_fork_block(self) -> bool:
        """The token-level kinds hold from the fork step to the end of its block."""
        return self.state["block"] == self.plan.block and self.state["step"] >= self.plan.step

    def after_fork(self) -> bool:
        """topk and knobs hold from the fork step to the run's end."""
        return (self.state["block"], self.state["step"]) >= (self.plan.block, self.plan.step)

    # the capture's three places
    def attach(self, processors) -> "Editor":
        """Called with the run's processor list; returns the processor to append before the recorder."""
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import LinearTemperatureScheduleLogitsProcessor

        self.schedule = next((p for p in processors if isinstance(p, LinearTemperatureScheduleLogitsProcessor)), None)
        return self

    def __call__(self, input_ids, scores, cur_step):
        """set and forbid, on the processed logits every later part of the step reads; out of place."""
        if not self.in_fork_block() or not (self.held or self.forbidden):
            return scores
        edited = self.held_table.apply(scores) if self.held_table else scores.clone()
        for position, token in self.forbidden:
            edited[:, position, token] = float("-inf")
        return edited

    def before_step(self, kwargs: dict, sampler) -> dict:
        """The canvas the fork step denoises (remask, set), and the knobs from the fork step on."""
        if self.after_fork() and self.knobs and not self.knobs_applied:
            self._change_knobs(sampler)
        placed = self.plan.placed
        if not self.at_fork() or not (self.remasked or self.held or placed):
            return kwargs
        canvas = kwargs["current_canvas"].clone()
        if placed:  # a warm start's tokens, on the run's own first canvas (its random draw already made)
            canvas[:, [p for p, _ in placed]] = torch.tensor([t for _, t in placed], device=canvas.device, dtype=canvas.dtype)
        if self.remasked:
            noise = torch.Generator(device="cpu").manual_seed(self.plan.seed)
            drawn = torch.randint(0, sampler.vocab_size, (canvas.shape[0], len(self.remasked)), generator=noise)
            canvas[:, self.remasked] = drawn.to(canvas.device, canvas.dtype)
        if self.held:
            where = [p for p, _ in self.held]
            canvas[:, where] = torch.tensor([t for _, t in self.held], device=canvas.device, dtype=canvas.dtype)
        return {**kwargs, "current_canvas": canvas}

    def after_step(self, out: tuple) -> tuple:
        """topk and nudge on the self-conditioning logits the step hands the next."""
        topk = self.topk if self.after_fork() else None
        nudges = self.nudges if self.in_fork_block() else []
        if topk is None and not nudges:
            return out
        next_canvas, argmax, conditioning, finished = out
        return next_canvas, argmax, edit_conditioning(conditioning, topk, nudges), finished

    def _change_knobs(self, sampler) -> None:
        self.knobs_applied = True
        for name, value in self.knobs.items():
            target, attribute = (sampler, "entropy_bound") if name == "entropy_bound" else (self.schedule, name)
            if target is None:
                continue  # no schedule in this run (the model's config has none): the knob reads nothing
            self.restores.append((target, attribute, getattr(target, attribute)))
            setattr(target, attribute, float(value))

    def restore(self) -> None:
        for target, attribute, value in reversed(self.restores):
            setattr(target, attribute, value)
        self.restores.clear()


# ---- the fork -----------------------------------------------------------------------------------------------
def fork_point_problem(parent: Trace, block: int, step: int) -> str | None:
    """One line when block:step (from 1) is not a step of the parent run; None when it is (the words every
    command uses for a step outside the run: `visualizer.step_names`)."""
    try:
        locate_step(parent, StepName(block, step))
    except StepNameError as exc:
        return f"--at {exc}"
    return None


def resolve_plan(backend, parent: Trace, block: int, step: int, interventions: tuple[Intervention, ...]) -> ForkPlan:
    """The plan of a fork, every check done before anything runs (BackendError with one line)."""
    kinds = backend.capabilities.interventions
    if not kinds:
        raise BackendError(f"the {backend.name} backend cannot fork a run: {no_fork_reason(backend.name)}")
    missing = [iv.kind for iv in interventions if iv.kind not in kinds]
    if missing:
        raise BackendError(f"the {backend.name} backend cannot {KINDS[missing[0]].form.verb} ({missing[0]}): "
                           f"it applies {', '.join(sorted(kinds))}")
    problem = knob_problem(backend, parent.settings, interventions)
    if problem:
        raise BackendError(problem)
    if parent.start is None:
        raise BackendError("the parent trace has no run start to re-run")
    if parent.start.batch:
        raise BackendError("the parent was one row of a batched run: re-run alone it would not be the same run")
    if parent.model.canvas_length != backend.info.canvas_length or parent.model.vocab_size != backend.info.vocab_size:
        raise BackendError("the parent was recorded with another model (its canvas or vocabulary differs from this one's)")
    problem = fork_point_problem(parent, block, step)
    problems = ([problem] if problem else []) + plan_problems(interventions, backend.info.canvas_length)
    if problems:
        raise BackendError(problems[0])
    settings = parent.settings
    if settings.compiled and any(iv.kind == "knob" and iv.knob == "entropy_bound" for iv in interventions):
        raise BackendError("knob entropy_bound cannot change in a compiled run (the bound is compiled into the sampler)")
    return ForkPlan(block - 1, step - 1, tuple(interventions), tuple(_ids(backend, iv) for iv in interventions),
                    seed=int(settings.seed))


def knob_problem(backend, settings, interventions: tuple[Intervention, ...]) -> str | None:
    """One line when a `knob` changes what the run's sampler does not read afresh each step on this backend (its
    `SamplerSpec.fork_knobs`, named in the line); None. Asked before anything runs (`resolve_plan`, the app's validator)."""
    spec = backend.capabilities.sampler(settings.sampler)
    bad = [iv.knob for iv in interventions if iv.kind == "knob" and iv.knob not in spec.fork_knobs]
    if not bad:
        return None
    reads = ", ".join(sorted(spec.fork_knobs)) or "none"
    return f"the {backend.name} backend's {spec.name} sampler cannot change {bad[0]} mid-run: it reads {reads} afresh each step"


def token_problem(backend, interventions: tuple[Intervention, ...]) -> str | None:
    """The first intervention whose text the backend's tokenizer cannot use as its kind needs (no token, several
    for forbid or nudge, past the canvas), in one line; None. The app's validator asks this of a model in memory,
    so such a fork is refused before the model queue; `resolve_plan` makes the same checks for every caller."""
    for iv in interventions:
        try:
            _ids(backend, iv)
        except BackendError as exc:
            return str(exc)
    return None


def _ids(backend, iv: Intervention) -> tuple[int, ...]:
    tokens = KINDS[iv.kind].tokens  # how the kind's declaration reads its text
    if not tokens:
        return ()
    ids = text_ids(backend, iv.position, iv.text, iv.spec())
    if tokens == "one" and len(ids) != 1:
        raise BackendError(f"{iv.spec()}: {iv.kind} takes one token, and {iv.text!r} is {len(ids)} tokens")
    return ids


def text_ids(backend, position: int, text: str, said: str) -> tuple[int, ...]:
    """`text`'s token ids, to be placed from `position`; BackendError (one line, starting with `said`) when it
    tokenizes to nothing or runs past the canvas."""
    ids = tuple(int(t) for t in backend.tokenizer.encode(text, add_special_tokens=False))
    canvas = backend.info.canvas_length
    if not ids:
        raise BackendError(f"{said}: the text tokenizes to nothing")
    if position + len(ids) > canvas:
        raise BackendError(f"{said}: {len(ids)} tokens from position {position} run past the canvas of {canvas}")
    return ids


def start_placement(backend, from_run: tuple[tuple[int, int], ...], texts: tuple[tuple[int, str], ...],
                    said: str) -> tuple[tuple[int, int], ...]:
    """A warm start's first canvas: the (position, id)s taken from a run, then each (position, text)'s tokens placed
    from its position (a text wins where the two meet); BackendError in one line, starting with `said` and the
    text as POS=TEXT, for a position outside the canvas or a text that tokenizes to nothing or runs past it."""
    placed, canvas = dict(from_run), backend.info.canvas_length
    for position, text in texts:
        named = f"{said} {position}={text}"
        if position >= canvas:
            raise BackendError(f"{named}: position {position} is outside the canvas (positions 0 to {canvas - 1})")
        placed.update((position + i, t) for i, t in enumerate(text_ids(backend, position, text, named)))
    return tuple(placed.items())


def fork_trace(backend, parent: Trace, parent_hash: str, *, block: int, step: int,
               interventions: tuple[Intervention, ...], stop=None, on_record=None) -> Trace:
    """The branch of `parent` at block:step (counted from 1) with `interventions`, as a complete Trace whose
    `branch` names its parent; BackendError (one line) when it cannot be forked or its re-run left the parent
    before the fork step. Nothing is written: the caller saves the branch."""
    from .run import record_trace

    plan = resolve_plan(backend, parent, block, step, interventions)
    backend.fork_plan = plan  # read by this one run's `_produce_batch` (runs on one backend run in order)
    try:
        branch = record_trace(backend, parent.prompt, parent.settings, stop=stop, on_record=on_record)
    finally:
        backend.fork_plan = None
    where = first_difference(parent, branch, before=(plan.block, plan.step))
    if where is not None:
        raise BackendError(f"the re-run left the parent at block {where[0] + 1} step {where[1] + 1}, before the fork: "
                           "the parent was recorded with another model, device or library version")
    branch.branch = Branch(parent_hash, block, step, tuple(iv.spec() for iv in plan.interventions), plan.ids)
    return branch


def fork_records(backend, parent: Trace, parent_hash: str, *, block: int, step: int,
                 interventions: tuple[Intervention, ...], trace: Trace, stop=None):
    """`fork_trace` as a stream, for the app's live view: the branch's records appended to `trace` batch by batch
    (as `run.run_records` appends a run's), each batch yielded. `trace.branch` is set before the first batch, so the
    run card names the fork while it runs. Every check of `resolve_plan` runs at the first `next()`, before anything
    is appended (BackendError, one line); a finished re-run that left the parent before the fork step raises
    BackendError after its last batch (a stopped one is kept as it is: it may end before the fork step)."""
    from .run import run_records

    plan = resolve_plan(backend, parent, block, step, interventions)
    trace.branch = Branch(parent_hash, block, step, tuple(iv.spec() for iv in plan.interventions), plan.ids)
    backend.fork_plan = plan  # as in fork_trace: read by this one run, cleared on every way out
    try:
        yield from run_records(backend, parent.prompt, parent.settings, trace=trace, stop=stop)
    finally:
        backend.fork_plan = None
    if trace.end is not None and trace.end.finish_reason != FINISH_CANCELLED:
        where = first_difference(parent, trace, before=(plan.block, plan.step))
        if where is not None:
            raise BackendError(f"the re-run left the parent at block {where[0] + 1} step {where[1] + 1}, before the "
                               "fork: the parent was recorded with another model, device or library version")


def first_difference(parent: Trace, branch: Trace, *, before: tuple[int, int]) -> tuple[int, int] | None:
    """The first (block, step) before `before` where the two runs' canvas, accepted set or argmax differ; None."""
    if list(parent.start.prompt_ids) != list(branch.start.prompt_ids):
        return (0, 0)
    mine = {(s.block, s.step): s for s in branch.steps}
    for theirs in parent.steps:
        key = (theirs.block, theirs.step)
        if key >= before:
            break
        step = mine.get(key)
        if step is None or any((getattr(step, f) != getattr(theirs, f)).any() for f in ("canvas", "accepted", "argmax")):
            return key
    return None


# ---- the warm start -----------------------------------------------------------------------------------------
def warm_starts(capabilities) -> bool:
    """A backend warm-starts a run where it forks one with canvas edits: the start's tokens are placed by the same
    `Editor`, on the canvas the first step denoises, as `set` and `remask` place theirs at the fork step."""
    return "set" in capabilities.interventions


def warm_start_records(backend, prompt: str, settings, placed: tuple[tuple[int, int], ...], *, trace: Trace, stop=None):
    """`warm_start_trace` as a stream, for the app's live view: the run's records appended to `trace` batch by batch,
    each batch yielded. Every check runs at the first `next()`, before anything is appended (BackendError, one line);
    what was placed is `trace.warm_start.placed`'s to record (the caller sets it: this returns nothing)."""
    from .run import run_records

    placed = _placeable(backend, settings, placed)
    backend.fork_plan = ForkPlan(0, 0, (), (), seed=int(settings.seed), placed=placed) if placed else None
    try:
        yield from run_records(backend, prompt, settings, trace=trace, stop=stop)
    finally:
        backend.fork_plan = None


def _placeable(backend, settings, placed) -> tuple[tuple[int, int], ...]:
    """`placed` checked against the backend (BackendError in one line), less the pinned positions, sorted."""
    if not warm_starts(backend.capabilities):
        raise BackendError(f"the {backend.name} backend cannot warm-start a run: {no_fork_reason(backend.name)}")
    canvas, vocab = backend.info.canvas_length, backend.info.vocab_size
    bad = next(((p, t) for p, t in placed if not (0 <= p < canvas and 0 <= t < vocab)), None)
    if bad is not None:
        raise BackendError(f"the start's token {bad[1]} at position {bad[0]} is outside this model's canvas of "
                           f"{canvas} or vocabulary of {vocab}")
    pinned = {p for p, _ in backend.pinned_ids(backend.resolve(settings))}
    return tuple(sorted((p, t) for p, t in dict(placed).items() if p not in pinned))


def warm_start_trace(backend, prompt: str, settings, placed: tuple[tuple[int, int], ...], *, stop=None,
                     on_record=None) -> tuple[Trace, tuple[tuple[int, int], ...]]:
    """A run of `prompt` whose first canvas holds `placed` ((position, id), ...) instead of its own noise there,
    not held: the stock sampler decides from the first step on. Pinned positions keep their pins. Returns the
    trace and what was placed (BackendError in one line when the backend cannot or the tokens do not fit)."""
    from .run import record_trace

    placed = _placeable(backend, settings, placed)
    backend.fork_plan = ForkPlan(0, 0, (), (), seed=int(settings.seed), placed=placed) if placed else None
    try:
        trace = record_trace(backend, prompt, settings, stop=stop, on_record=on_record)
    finally:
        backend.fork_plan = None
    return trace, placed
