"""Why a step accepted the positions it did: the sampler's own rule, replayed from the recorded step.

Entropy-bound sampler (transformers' `EntropyBoundSampler.accept_canvas`, 5.23, and mlx-vlm's
`_diffusion_entropy_transfer_mask`): sort the canvas positions by entropy, ascending; position k
in that order is accepted when

    sum of the k lowest entropies - the largest of them  <=  entropy_bound

i.e. when the entropy already spent on the k - 1 positions before it stays within the bound
(sorted ascending, the largest of the k is the k-th itself). The spent entropy only grows, so the
accepted positions are a prefix of the order: k fit, and the (k + 1)-th is the one that just
missed, by (spent before it) - bound. Every position competes at every step (the accepted set is
recomputed from scratch), EOS and pad included.

Confidence-threshold sampler (mlx-vlm's default, `_diffusion_confidence_transfer_mask`): a
position not revealed yet is revealed when the probability of the token sampled there reaches the
threshold (0.9 in mlx-vlm 0.7.10); when none does, the single most probable one is revealed anyway
("forced"). The trace records those probabilities (`StepRecord.sample_probability`).

    budget = accept_budget(trace, block=0, step=4)    # EntropyBudget | ConfidenceBudget; raises BudgetError
    budget.fits, budget.missed_by                     # 3 positions fit; the next missed by 0.02 nats

The chart is `insight_charts.accept_budget_svg`. Steps are 0-based here, shown from 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .numbers import number
from .samplers import BUDGET_CONFIDENCE_THRESHOLD, BUDGET_ENTROPY_BOUND
from .settings import CONFIDENCE_THRESHOLD
from .trace import Trace


class BudgetError(ValueError):
    """The step's decision cannot be explained from this trace; one line says why."""


@dataclass(frozen=True, eq=False)
class EntropyBudget:
    block: int
    step: int
    bound: float  # nats
    order: np.ndarray  # (canvas,) positions, lowest entropy first
    entropy: np.ndarray  # (canvas,) float32 entropies in that order
    spent_before: np.ndarray  # (canvas,) float32: sum of the entropies before each, in that order
    fits: int  # positions the rule accepts (a prefix of `order`)
    recorded: np.ndarray  # (canvas,) bool: what the sampler really accepted, in that order

    @property
    def agrees(self) -> bool:
        """The rule replayed on the recorded entropies gives the recorded accepted set."""
        return bool(np.array_equal(self.recorded, np.arange(self.order.size) < self.fits))

    @property
    def missed_by(self) -> float | None:
        """How far the first position left out was over the bound, in nats (None: all fit)."""
        return None if self.fits >= self.order.size else float(self.spent_before[self.fits] - self.bound)

    @property
    def slack(self) -> float:
        """Bound left after the last position that fit (its spent-before entropy)."""
        return float(self.bound - self.spent_before[self.fits - 1]) if self.fits else float(self.bound)


@dataclass(frozen=True, eq=False)
class ConfidenceBudget:
    block: int
    step: int
    threshold: float
    positions: np.ndarray  # positions not revealed before this step, most probable sample first
    probability: np.ndarray  # their sampled tokens' probabilities, in that order
    revealed: np.ndarray  # bool, in that order: revealed at this step (recorded)
    forced: bool  # none reached the threshold, so the most probable one was revealed anyway

    @property
    def passed(self) -> int:
        return int((self.probability >= self.threshold).sum())

    @property
    def missed_by(self) -> float | None:
        """Threshold minus the best probability that stayed below it (None when none stayed below)."""
        below = self.probability[self.probability < self.threshold]
        return float(self.threshold - below.max()) if below.size else None


def accept_budget(trace: Trace, block: int, step: int) -> EntropyBudget | ConfidenceBudget:
    """The acceptance decision of one step, explained by its sampler's rule."""
    steps = trace.block_steps(block)
    if not 0 <= step < len(steps):
        raise BudgetError(f"block {block + 1} has steps 1 to {len(steps)}; there is no step {step + 1}")
    record = steps[step]
    settings = trace.settings
    rule = trace.sampler_rule
    if not rule.last_step_samples and record.steps_remaining == 1:
        raise BudgetError(f"step {step + 1} is the last step: this sampler samples nothing there and commits the argmax")
    if rule.budget == BUDGET_CONFIDENCE_THRESHOLD:
        return _confidence_budget(steps, block, step)
    if rule.budget != BUDGET_ENTROPY_BOUND:
        raise BudgetError(f"the {settings.sampler} sampler does not record a budget that this step's decision can be replayed from")
    if settings.entropy_bound is None:
        raise BudgetError("this trace did not record its entropy bound, so the step's decision cannot be replayed")
    bound = float(settings.entropy_bound)
    order = np.argsort(record.entropy_nats, kind="stable")
    entropy = record.entropy_nats[order]
    spent = np.cumsum(entropy, dtype=np.float32) - entropy  # the sampler's cumsum - cummax, in float32
    fits = int((spent <= np.float32(bound)).sum())
    return EntropyBudget(block, step, bound, order, entropy, spent, fits, record.accepted[order])


def _confidence_budget(steps, block: int, step: int) -> ConfidenceBudget:
    record = steps[step]
    if record.sample_probability is None:
        raise BudgetError("this trace did not record the sampled tokens' probabilities (an older version): record it again")
    before = steps[step - 1].accepted if step else np.zeros_like(record.accepted)
    hidden = np.flatnonzero(~before)
    probability = record.sample_probability[hidden]
    order = np.argsort(-probability, kind="stable")
    positions, probability = hidden[order], probability[order]
    revealed = record.accepted[positions]
    forced = bool(probability.size) and not (probability >= CONFIDENCE_THRESHOLD).any()
    return ConfidenceBudget(block, step, CONFIDENCE_THRESHOLD, positions, probability, revealed, forced)


def budget_sentence(budget: EntropyBudget | ConfidenceBudget) -> str:
    """One line saying what the step accepted and why (steps and blocks counted from 1)."""
    where = f"Block {budget.block + 1}, step {budget.step + 1}"
    if isinstance(budget, EntropyBudget):
        head = f"{where}: {budget.fits} position(s) fit the entropy bound of {budget.bound:g} nats"
        tail = "" if budget.missed_by is None else f"; the next one missed by {number(budget.missed_by)} nats"
        check = "" if budget.agrees else " (the recorded set differs from this replay: float32 rounding at the bound)"
        return head + tail + check + "."
    if budget.forced:
        return (f"{where}: no hidden position reached the threshold of {budget.threshold:g}; "
                f"the most probable one (p = {budget.probability[0]:.3f}) was revealed anyway.")
    tail = "" if budget.missed_by is None else f"; the best one below missed by {number(budget.missed_by)}"
    return f"{where}: {budget.passed} hidden position(s) reached the threshold of {budget.threshold:g}{tail}."
