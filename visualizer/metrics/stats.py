"""Statistics across generations: prompt-clustered bootstrap CIs and the entropy AUROC.

Generations of one prompt (its seeds) are correlated, so confidence intervals resample *prompts*
with replacement and keep each prompt's seeds together (the study's prompt-clustered bootstrap).

    low, high = clustered_ci(prompt_ids, lambda rows: np.mean(tau[rows]))   # 95 % percentile CI
    auc = auroc(scores, labels)     # P(score of a correct one > score of a wrong one), ties half

The AUROC of low commit entropy predicting correctness is computed within one regime only:
regimes differ in base accuracy and entropy scale, and pooling them can reverse the sign of the
within-regime trend (Simpson's paradox; the study's pooled value was 0.437 while math alone was
0.749).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import mannwhitneyu

from .order import Undefined

N_RESAMPLES = 2000
CI_LEVEL = 0.95


def auroc(scores, labels) -> float | Undefined:
    """Area under the ROC curve of `scores` for the positive `labels` (Mann-Whitney U / n1 n0)."""
    scores, labels = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    positive, negative = scores[labels], scores[~labels]
    if positive.size == 0 or negative.size == 0:
        return Undefined("needs both correct and incorrect answers" if scores.size else "no generations")
    u = mannwhitneyu(positive, negative, alternative="two-sided").statistic
    return float(u / (positive.size * negative.size))


def clustered_ci(
    clusters,
    statistic: Callable[[np.ndarray], float | Undefined],
    *,
    n_resamples: int = N_RESAMPLES,
    level: float = CI_LEVEL,
    seed: int = 0,
) -> tuple[float, float] | Undefined:
    """Percentile bootstrap interval, resampling whole clusters (prompts) with replacement.

    `clusters[i]` names the cluster of row i; `statistic(rows)` gets the row indices of one
    resample (a cluster drawn twice brings its rows twice).  Resamples where the statistic is
    undefined (one class only, for an AUROC) are dropped; if over half are, the CI is Undefined.
    """
    names, codes = np.unique(np.asarray(clusters), return_inverse=True)
    if names.size < 2:
        return Undefined(f"needs at least 2 prompts (has {names.size})")
    rows_of = [np.flatnonzero(codes == k) for k in range(names.size)]
    rng = np.random.default_rng(seed)
    results = []
    for _ in range(n_resamples):
        rows = np.concatenate([rows_of[k] for k in rng.integers(0, names.size, names.size)])
        value = statistic(rows)
        if not isinstance(value, Undefined) and np.isfinite(value):
            results.append(value)
    if len(results) < n_resamples / 2:
        return Undefined(f"undefined in {n_resamples - len(results)} of {n_resamples} resamples")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(results, [tail, 100 - tail])
    return float(low), float(high)


def reliability_tertiles(
    entropy, correct, clusters, *, n_resamples: int = N_RESAMPLES, level: float = CI_LEVEL
) -> list[dict] | Undefined:
    """The study's reliability curve for one regime: accuracy in each tertile of commit entropy.

    Generations are split at the regime's own 1/3 and 2/3 quantiles of mean commit entropy (low
    entropy = confident first); each tertile's accuracy gets the prompt-clustered CI. The study:
    on math, accuracy falls as entropy rises (monotone); on factual recall, flat. Never pooled
    across regimes (see the module docstring)."""
    entropy, correct = np.asarray(entropy, dtype=float), np.asarray(correct, dtype=bool)
    clusters = np.asarray(clusters)
    if entropy.size < 3:
        return Undefined(f"needs at least 3 scored generations (has {entropy.size})")
    edges = np.quantile(entropy, [1 / 3, 2 / 3])
    tertile = np.searchsorted(edges, entropy, side="right")  # 0: lowest third of entropy
    rows = []
    for k, name in enumerate(("low", "middle", "high")):
        members = np.flatnonzero(tertile == k)
        if members.size == 0:
            rows.append({"tertile": name, "generations": 0, "entropy_range": Undefined("empty tertile"),
                         "accuracy": Undefined("empty tertile (ties at the cut)"), "accuracy_ci": Undefined("empty tertile")})
            continue
        hits = correct[members]
        rows.append({
            "tertile": name,
            "generations": int(members.size),
            "entropy_range": (float(entropy[members].min()), float(entropy[members].max())),
            "accuracy": float(hits.mean()),
            "accuracy_ci": clustered_ci(clusters[members], lambda idx: float(hits[idx].mean()), n_resamples=n_resamples, level=level),
        })
    return rows
