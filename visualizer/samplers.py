"""What a sampler's frames mean: its accept rule, recorded in every trace.

A backend declares the samplers it runs (`backends.base.Capabilities`), each as a `SamplerSpec`:
a name, a one-line note for the UI, an `AcceptRule`, and the sampler's knobs it reads. The rule travels in the trace
(`RunStart.sampler_rule`), so the library (the accept-budget replay, trace loading) reads what a
sampler does from the trace itself and never needs to know which backend made it.

    rule = trace.sampler_rule                  # AcceptRule
    rule.budget == BUDGET_ENTROPY_BOUND        # the replay can recompute each step's decision
    rule.last_step_samples                     # False: a block's last step commits the argmax unsampled

Traces of version 2 and older did not record the rule; `legacy_rule` gives the one their writer
used, from the sampler and backend they recorded.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

SAMPLER_ENTROPY_BOUND = "entropy-bound"  # transformers' rule; recomputes the accepted set every step
SAMPLER_CONFIDENCE_THRESHOLD = "confidence-threshold"  # mlx-vlm's default; reveals accumulate
SAMPLER_DISCRETE_DDIM = "discrete-ddim"  # diffusers' DiscreteDDIMScheduler: ancestral steps of the uniform posterior
SAMPLER_BLOCK_REFINEMENT = "block-refinement"  # diffusers' BlockRefinementScheduler: an even quota plus a threshold

# The decisions the accept-budget replay can recompute from a recorded step.
BUDGET_ENTROPY_BOUND = "entropy-bound"  # lowest entropies first while the spent entropy fits the bound
BUDGET_CONFIDENCE_THRESHOLD = "confidence-threshold"  # samples whose probability reaches a threshold
BUDGETS = (BUDGET_ENTROPY_BOUND, BUDGET_CONFIDENCE_THRESHOLD)

# Which logits a step's recorded entropy (and top-k) is of.
ENTROPY_SCALED = "scaled"  # the temperature-scaled logits the sampler drew from (transformers, MLX, diffusers' entropy-bound)
ENTROPY_RAW = "raw"  # the model's logits before any temperature (diffusers' DDIM and block refinement hand out no other)
ENTROPY_KINDS = (ENTROPY_SCALED, ENTROPY_RAW)

_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")  # what a sampler name may be: it is shown and used as a key


@dataclass(frozen=True)
class AcceptRule:
    """How a sampler turns a step's logits into the accepted set the frames show."""

    renoises: bool  # True: the set is recomputed every step and the rest gets fresh noise (remasks happen);
    #                 False: reveals accumulate and a revealed token stays until the block ends
    last_step_samples: bool  # False: a block's last step commits the argmax without sampling (accepts nothing new)
    budget: str | None = None  # one of BUDGETS when the replay can recompute a step's decision; None: not recorded
    entropy: str = ENTROPY_SCALED  # one of ENTROPY_KINDS: the logits the recorded entropy is of (absent before: scaled)

    def to_dict(self) -> dict:
        """The trace's form; `entropy` is written only where it is not the scaled default, so rules
        written before it existed read the same."""
        raw = asdict(self)
        if raw["entropy"] == ENTROPY_SCALED:
            del raw["entropy"]
        return raw

    @classmethod
    def from_dict(cls, raw) -> "AcceptRule":
        """The rule a trace recorded; ValueError with one line when it is malformed."""
        required = {"renoises", "last_step_samples", "budget"}
        if not isinstance(raw, dict) or not required <= set(raw) <= required | {"entropy"}:
            raise ValueError("sampler_rule must be an object with renoises, last_step_samples, budget and (optionally) entropy")
        if not all(isinstance(raw[key], bool) for key in ("renoises", "last_step_samples")):
            raise ValueError("sampler_rule.renoises and sampler_rule.last_step_samples must be true or false")
        if raw["budget"] is not None and raw["budget"] not in BUDGETS:
            raise ValueError(f"sampler_rule.budget must be one of {', '.join(BUDGETS)} or null (got {raw['budget']!r})")
        if raw.get("entropy", ENTROPY_SCALED) not in ENTROPY_KINDS:
            raise ValueError(f"sampler_rule.entropy must be one of {', '.join(ENTROPY_KINDS)} (got {raw['entropy']!r})")
        return cls(**raw)


@dataclass(frozen=True)
class SamplerSpec:
    """One sampler a backend runs: its name, a one-line note on how it commits, its rule, and the sampler's own
    knobs it reads on that backend (`visualizer.settings` fields: entropy_bound, temperature, ...). That is the
    one statement of which sampler reads a knob: the same sampler on two backends may read different ones
    (mlx-vlm's entropy-bound reads a temperature, diffusers' EntropyBoundScheduler has its own schedule)."""

    name: str
    note: str
    rule: AcceptRule
    knobs: frozenset[str] = frozenset()
    # Of those, the ones each step reads afresh on that backend, so a fork's `knob` may change them from its step on
    # (`backends.interventions.knob_problem` refuses the others, naming these).
    fork_knobs: frozenset[str] = frozenset()


def is_sampler_name(name) -> bool:
    """A well-formed sampler name (lower-case words joined by '-'); whether a backend runs it is the backend's call."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


# What version-2 writers did, by (the backend they recorded, the sampler): the only place that still
# needs a backend's name, because those traces recorded nothing else to go by.
_LEGACY_RULES = {
    ("transformers", SAMPLER_ENTROPY_BOUND): AcceptRule(True, True, BUDGET_ENTROPY_BOUND),
    ("mlx", SAMPLER_ENTROPY_BOUND): AcceptRule(True, False, BUDGET_ENTROPY_BOUND),
    ("mlx", SAMPLER_CONFIDENCE_THRESHOLD): AcceptRule(False, False, BUDGET_CONFIDENCE_THRESHOLD),
}


def legacy_rule(backend: str, sampler: str | None) -> AcceptRule | None:
    """The rule of a trace written before rules were recorded (None: no writer made such a trace)."""
    return _LEGACY_RULES.get((backend, sampler or SAMPLER_ENTROPY_BOUND))
