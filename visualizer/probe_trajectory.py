"""The probe's per-regime figures of every step read against its end (issue 56): found then lost, and
calibration of commit confidence per step bucket, within each regime.

    row = regime_trajectory(rows, n_resamples)     # one regime's ProbeResults -> the keys below
    text = trajectory_markdown(tables)             # table.md's found-then-lost and calibration tables
    pooled = pooled_calibration(results)           # all regimes at once: carries its warning

Found then lost (`metrics.found_lost`): accuracy at the end, correct at any step and found-then-lost,
each the share of scored generations with its prompt-clustered 95 % CI, and the mean fraction of the
run at which a right answer first appeared.  Calibration (`metrics.calibration`): for all content and
for the content first accepted in each third of its block's steps, ECE (10 equal-width bins), Brier,
AUROC and AUPRC of the generation's mean commit confidence against its verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .metrics import Undefined, is_defined
from .metrics.calibration import calibration
from .metrics.stats import N_RESAMPLES, clustered_ci
from .metrics.trajectory import STEP_BUCKETS

BUCKETS = ("all", *STEP_BUCKETS)  # calibration's step buckets: every content token, then each third
_CONFIDENCE = {"all": "commit_confidence", **{b: f"commit_confidence_{b}" for b in STEP_BUCKETS}}


def _share_with_ci(prompts, flags, n_resamples: int):
    flags = np.asarray(flags, dtype=float)
    if flags.size == 0:
        return Undefined("no scored generations"), Undefined("no scored generations")
    return float(flags.mean()), clustered_ci(prompts, lambda idx: float(flags[idx].mean()), n_resamples=n_resamples)


def regime_trajectory(rows: Sequence, n_resamples: int = N_RESAMPLES) -> dict:
    """Found then lost and calibration of one regime's generations (ProbeResults of one regime)."""
    scored = [r for r in rows if r.correct is not None and r.correct_at_any_step is not None]
    prompts = [r.prompt_id for r in scored]
    out = {}
    for name, flag in (("accuracy_at_end", "correct"), ("correct_at_any_step", "correct_at_any_step"),
                       ("found_then_lost", "found_then_lost")):
        out[name], out[f"{name}_ci"] = _share_with_ci(prompts, [getattr(r, flag) for r in scored], n_resamples)
    firsts = [(r.prompt_id, r.first_correct_fraction) for r in scored if is_defined(r.first_correct_fraction)]
    if firsts:
        values = np.array([v for _, v in firsts])
        out["first_correct_fraction"] = float(values.mean())
        out["first_correct_fraction_ci"] = clustered_ci([p for p, _ in firsts], lambda idx: float(values[idx].mean()),
                                                        n_resamples=n_resamples)
    else:
        out["first_correct_fraction"] = out["first_correct_fraction_ci"] = Undefined("no step's answer was right")
    out["calibration"] = {}
    for bucket in BUCKETS:
        column = _CONFIDENCE[bucket]
        if not scored:
            out["calibration"][bucket] = Undefined("no scored generations")
            continue
        confidence = [getattr(r, column) if is_defined(getattr(r, column)) else np.nan for r in scored]
        out["calibration"][bucket] = calibration(confidence, [r.correct for r in scored], prompts,
                                                 [r.regime for r in scored], n_resamples=n_resamples)
    return out


def pooled_calibration(results: Sequence, n_resamples: int = N_RESAMPLES) -> dict | Undefined:
    """Every regime's scored generations pooled (all content): shown only beside its warning."""
    scored = [r for r in results if r.correct is not None]
    if not scored:
        return Undefined("no scored generations")
    confidence = [r.commit_confidence if is_defined(r.commit_confidence) else np.nan for r in scored]
    return calibration(confidence, [r.correct for r in scored], [f"{r.regime}/{r.prompt_id}" for r in scored],
                       [r.regime for r in scored], pooled=True, n_resamples=n_resamples)


def trajectory_markdown(tables: list[dict]) -> str:
    """The found-then-lost table, the finalized-step table and the calibration table of each regime."""
    lines = ["| Regime | Accuracy at the end [95% CI] | Correct at any step [95% CI] | Found then lost [95% CI] "
             "| Answer first right at (fraction of the run) [95% CI] |", "|---|---|---|---|---|"]
    for t in tables:
        lines.append(f"| {t['regime']} | " + " | ".join(
            f"{fmt_value(t[k], 2)} {fmt_ci(t[k + '_ci'])}" for k in ("accuracy_at_end", "correct_at_any_step", "found_then_lost",
                                                                 "first_correct_fraction")) + " |")
    lines += ["", "| Regime | Finalized step (mean) | Argmax flips (mean) | Commit − finalized (steps) | Finalized by half the run |",
              "|---|---|---|---|---|"]
    for t in tables:
        lines.append(f"| {t['regime']} | {fmt_value(t['mean_finalized_step'], 2)} | {fmt_value(t['mean_argmax_flips'], 2)} | "
                     f"{fmt_value(t['mean_commit_after_finalized_steps'], 2)} | {fmt_value(t['finalized_at_half'], 2)} |")
    lines += ["", "| Regime | Steps | n | ECE (10 bins) [95% CI] | Brier [95% CI] | AUROC [95% CI] | AUPRC [95% CI] |",
              "|---|---|---|---|---|---|---|"]
    for t in tables:
        for bucket in BUCKETS:
            c = t["calibration"][bucket]
            if isinstance(c, Undefined):
                lines.append(f"| {t['regime']} | {bucket} | 0 | – | – | – | – |")
                continue
            lines.append(f"| {t['regime']} | {bucket} | {c['generations']} | " + " | ".join(
                f"{fmt_value(c[k])} {fmt_ci(c[k + '_ci'])}" for k in ("ece", "brier", "auroc", "auprc")) + " |")
    return "\n".join(lines) + "\n"


def fmt_value(value, digits: int = 3) -> str:
    return "–" if isinstance(value, Undefined) else f"{value:.{digits}f}"


def fmt_ci(ci) -> str:
    return "[–]" if isinstance(ci, Undefined) else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
