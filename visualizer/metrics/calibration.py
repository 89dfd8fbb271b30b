"""Calibration of commit confidence against correctness, within one regime: ECE, Brier, AUROC, AUPRC
and the reliability diagram with its counts (issue 56).

    c = calibration(confidence, correct, prompts, regimes)     # one regime's rows; several regimes: ValueError
    c = calibration(..., pooled=True)                          # all of them, with c["warning"] saying why not to

Confidence is a probability in [0, 1] per generation (the probe: the mean probability of the committed
tokens at their commit steps, `trajectory.RunTrajectory.mean_commit_confidence`), correctness the checker's
verdict.  A model can rank well (AUROC) and still be badly calibrated (ECE): both are reported.

- ece: expected calibration error over ECE_BINS equal-width bins of [0, 1] (a confidence of 1 falls in the
  last bin): sum over bins of (bin count / n) * |accuracy in bin - mean confidence in bin|.
- brier: mean of (confidence - correct)^2.
- auroc: P(confidence of a right answer > a wrong one's), ties half (`stats.auroc`).
- auprc: average precision of confidence for the right answers (the step-wise area, thresholds at each
  distinct confidence, ties taken together): sum over thresholds of (recall gain) * precision.
- reliability: per bin its range, count, accuracy and mean confidence (empty bins kept, count 0).
Every CI is the prompt-clustered bootstrap of `stats.clustered_ci`.  Regimes differ in accuracy and
confidence scale, and pooling them can reverse a within-regime trend (Simpson's paradox, seeds/000_*), so
`calibration` refuses rows of several regimes unless asked for the pooled figure, which then carries a warning.
"""

from __future__ import annotations

import numpy as np

from .order import Undefined
from .stats import N_RESAMPLES, auroc, clustered_ci

ECE_BINS = 10
POOLED_WARNING = ("pooled across regimes: regimes differ in accuracy and confidence scale, and pooling can reverse "
                  "the within-regime trend (Simpson's paradox); read the per-regime figures")


def ece(confidence, correct, bins: int = ECE_BINS) -> float | Undefined:
    """Expected calibration error over `bins` equal-width bins of [0, 1]."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, bool)
    if confidence.size == 0:
        return Undefined("no scored generations with a confidence")
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    total = 0.0
    for k in np.unique(which):
        members = which == k
        total += members.mean() * abs(correct[members].mean() - confidence[members].mean())
    return float(total)


def brier(confidence, correct) -> float | Undefined:
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, bool)
    if confidence.size == 0:
        return Undefined("no scored generations with a confidence")
    return float(np.mean((confidence - correct) ** 2))


def auprc(scores, labels) -> float | Undefined:
    """Average precision of `scores` for the positive `labels`, thresholds at each distinct score."""
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    if not labels.any() or labels.all():
        return Undefined("needs both correct and incorrect answers" if scores.size else "no generations")
    order = np.argsort(-scores, kind="stable")
    scores, labels = scores[order], labels[order]
    last_of_tie = np.r_[scores[1:] != scores[:-1], True]  # a threshold takes every tied score at once
    hits = np.cumsum(labels)[last_of_tie]
    taken = np.flatnonzero(last_of_tie) + 1
    recall = hits / labels.sum()
    precision = hits / taken
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def reliability_bins(confidence, correct, bins: int = ECE_BINS) -> list[dict]:
    """The reliability diagram: per equal-width bin its range, count, accuracy and mean confidence."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, bool)
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    rows = []
    for k in range(bins):
        members = which == k
        count = int(members.sum())
        rows.append({"low": k / bins, "high": (k + 1) / bins, "count": count,
                     "accuracy": float(correct[members].mean()) if count else Undefined("empty bin"),
                     "mean_confidence": float(confidence[members].mean()) if count else Undefined("empty bin")})
    return rows


def calibration(confidence, correct, prompts, regimes, *, pooled: bool = False,
                n_resamples: int = N_RESAMPLES) -> dict:
    """ECE, Brier, AUROC and AUPRC (each with its prompt-clustered CI) and the reliability bins of one
    regime's generations; rows whose confidence is undefined (NaN) are left out and counted."""
    names = sorted(set(regimes))
    if len(names) > 1 and not pooled:
        raise ValueError(f"calibration pools {len(names)} regimes ({', '.join(names)}): compute it per regime, "
                         "or pass pooled=True to get the pooled figure with its warning")
    confidence = np.asarray(confidence, float)
    correct, prompts = np.asarray(correct, bool), np.asarray(prompts)
    keep = np.isfinite(confidence)
    c, y, p = confidence[keep], correct[keep], prompts[keep]

    def with_ci(statistic):
        return statistic(np.arange(c.size)), clustered_ci(p, statistic, n_resamples=n_resamples) if c.size else Undefined("no rows")

    out = {"regimes": names, "generations": int(c.size), "without_confidence": int((~keep).sum()),
           "ece_bins": f"{ECE_BINS} equal-width bins of [0, 1]"}
    for name, fn in (("ece", ece), ("brier", brier), ("auroc", auroc), ("auprc", auprc)):
        out[name], out[f"{name}_ci"] = with_ci(lambda rows, fn=fn: fn(c[rows], y[rows]))
    out["reliability"] = reliability_bins(c, y)
    if len(names) > 1:
        out["warning"] = POOLED_WARNING
    return out
