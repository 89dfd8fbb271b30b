"""`probe --intervene`'s statistics: each generation paired with its branch (the same run forked at one step with the
intervention), and the paired effect per regime (docs/lab.md).

    pair = pair_of(probe, seed, "traces/math/m-seed0.json", parent, branch, check)   # one generation, both runs
    tables = paired_tables(pairs)                           # one row per regime: the mean paired change, 95 % CI
    paired_markdown(tables, "forbid 0=O at 1:1")

A difference is branch minus parent, per generation; a regime's mean difference has a bootstrap 95 % interval
(scipy.stats.bootstrap, percentile) over prompts, each prompt's seeds averaged first, or over seeds where the regime
has one prompt (`metrics.structure.difference_ci`, the probe's structure-first figure uses the same). A generation
whose fork was refused (its run had no such step, say) is counted, with the reason, and left out of the pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .metrics import Undefined, is_defined, run_metrics, to_json
from .metrics.stats import N_RESAMPLES
from .metrics.structure import difference_ci
from .probe_tables import score
from .probe_trajectory import fmt_ci, fmt_value
from .trace import Trace

# The figures paired, each (name in a pair, RunMetrics field, what the table calls its change).
FIGURES = (("tau_b", "tau_b_mean", "Δ tau_b"), ("tokens_per_step", "tokens_per_accept_step", "Δ tokens/step"))


@dataclass(frozen=True)
class Pair:
    """One generation and its branch: each figure for both runs (float, or Undefined), the answers' fate."""

    regime: str
    prompt_id: str
    seed: int
    trace_file: str  # the parent's, relative to the probe's folder; the branch's is the same under branches/
    parent: dict  # figure name -> value
    branch: dict
    answer_changed: bool  # the committed text differs
    correct_parent: bool | None  # the checker's verdict (None: unscored)
    correct_branch: bool | None


@dataclass(frozen=True)
class Unpaired:
    """A generation the fork refused, and why (one line)."""

    regime: str
    prompt_id: str
    seed: int
    reason: str


def pair_of(probe, seed: int, trace_file: str, parent: Trace, branch: Trace, check: Callable) -> Pair:
    """The pair of one generation (`check(probe, text)` scores an answer, as the probe's own rows are scored)."""
    mine, theirs = run_metrics(parent), run_metrics(branch)
    text = lambda trace: trace.end.text if trace.end else ""  # noqa: E731
    return Pair(probe.regime, probe.prompt_id, seed, trace_file,
                {name: getattr(mine, field) for name, field, _ in FIGURES},
                {name: getattr(theirs, field) for name, field, _ in FIGURES},
                text(parent) != text(branch),
                score(check, probe, text(parent)).correct, score(check, probe, text(branch)).correct)


def paired_tables(pairs: list[Pair], unpaired: list[Unpaired] = (), *, n_resamples: int = N_RESAMPLES) -> list[dict]:
    """One row per regime (in the order regimes first appear): the pairs, the mean paired change of each figure with
    its interval, how often the answer changed, and the accuracy of both runs."""
    regimes = list(dict.fromkeys([p.regime for p in pairs] + [u.regime for u in unpaired]))
    return [_regime_row(regime, [p for p in pairs if p.regime == regime], [u for u in unpaired if u.regime == regime],
                        n_resamples) for regime in regimes]


def _regime_row(regime: str, pairs: list[Pair], unpaired: list[Unpaired], n_resamples: int) -> dict:
    row = {"regime": regime, "pairs": len(pairs), "unpaired": len(unpaired),
           "unpaired_reason": unpaired[0].reason if unpaired else None}
    for name, _, _ in FIGURES:
        changes = [p.branch[name] - p.parent[name] if is_defined(p.branch[name]) and is_defined(p.parent[name])
                   else Undefined(f"{name} undefined in a run of the pair") for p in pairs]
        mean, ci, unit = difference_ci([p.prompt_id for p in pairs], changes, n_resamples=n_resamples)
        row |= {f"{name}_change": mean, f"{name}_change_ci": ci, f"{name}_resampled": unit or "none",
                f"{name}_pairs_defined": sum(is_defined(c) for c in changes)}
    row["answer_changed_fraction"] = float(np.mean([p.answer_changed for p in pairs])) if pairs else Undefined("no pairs")
    scored = [p for p in pairs if p.correct_parent is not None and p.correct_branch is not None]
    for side in ("parent", "branch"):
        row[f"accuracy_{side}"] = (float(np.mean([getattr(p, f"correct_{side}") for p in scored])) if scored
                                   else Undefined("no generation was scored"))
    return row


def paired_markdown(tables: list[dict], said: str) -> str:
    """The paired table as markdown, headed by what was done (`said`: the intervention and its step)."""
    lines = [f"## Intervention: {said}", "",
             "Each generation paired with its branch (the same run forked there); a change is branch minus parent.", "",
             "| Regime | Pairs | " + " | ".join(f"{label} [95% CI]" for _, _, label in FIGURES)
             + " | Answer changed | Accuracy parent → branch | Not forked |",
             "|---|---|" + "---|" * len(FIGURES) + "---|---|---|"]
    for t in tables:
        cells = [f"{fmt_value(t[f'{name}_change'])} {fmt_ci(t[f'{name}_change_ci'])}" for name, _, _ in FIGURES]
        missing = f"{t['unpaired']} ({t['unpaired_reason']})" if t["unpaired"] else "0"
        lines.append(f"| {t['regime']} | {t['pairs']} | " + " | ".join(cells) + f" | {fmt_value(t['answer_changed_fraction'], 2)} | "
                     f"{fmt_value(t['accuracy_parent'], 2)} → {fmt_value(t['accuracy_branch'], 2)} | {missing} |")
    return "\n".join(lines) + "\n"


def paired_json(tables: list[dict], pairs: list[Pair], unpaired: list[Unpaired], meta: dict) -> dict:
    """table.json's "intervention": what was done, the regimes' rows, every pair and every refused fork."""
    return {**meta, "regimes": [to_json(t) for t in tables], "pairs": [to_json(p) for p in pairs],
            "unpaired": [to_json(u) for u in unpaired]}
