"""The probe suite's statistics: commit order per regime, from the traces of a probe run.

    result = result_from_trace(probe, seed, trace, relative_path, check)   # one per generation
    tables = regime_tables(results)                                         # one row per regime
    write_tables("runs/probe", tables, meta, results)                       # table.md + table.json

This module works on saved traces alone; running the model, saving the traces and resuming are
the runner's job (`cli/probe_runner.py`).  Reported per regime (confirmatory prompts unless exploratory ones are included, as
the study froze its choices on the exploratory half): mean token tau_b with a prompt-clustered
bootstrap 95 % CI, the block-sequential control, tokens per accept step, the same-step pair
fraction, accuracy, and the AUROC of low commit entropy predicting a correct answer.  The AUROC
is computed within a regime and never pooled: regimes differ in accuracy and entropy scale, and
pooling them can reverse the within-regime trend (Simpson's paradox; the study's pooled AUROC
was 0.437 although math alone was 0.749).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .insight_charts import reliability_svg
from .metrics import BIN_SIZES, Undefined, is_defined, run_metrics, to_json
from .metrics.stats import N_RESAMPLES, auroc, clustered_ci, reliability_tertiles
from .metrics.found_lost import answer_trajectory
from .metrics.structure import difference_ci, structure_first
from .metrics.trajectory import run_trajectory
from .probe_trajectory import fmt_ci as _fmt_ci
from .probe_trajectory import fmt_value as _fmt
from .probe_trajectory import pooled_calibration, regime_trajectory, trajectory_markdown
from .probe_schema import COLUMNS, ProbeResult, Source, Verdict, result_from_source
from .trace import Trace

SPLIT_CONFIRMATORY = "confirmatory"
SPLIT_EXPLORATORY = "exploratory"
MANIFEST = "probe.json"


class ProbeError(RuntimeError):
    """A probe run cannot go on; the message says why, for the CLI."""


def result_from_trace(probe, seed: int, trace: Trace, trace_file: str, check: Callable, *, metrics=None,
                      verdict: Verdict | None = None, cost=None) -> ProbeResult:
    """One generation's result (every column of `probe_schema.COLUMNS`); `verdict` when already checked,
    `cost` (a batch_cost.BatchCost) when it shared a batch."""
    metrics = metrics or run_metrics(trace)  # the runner passes them when it also writes them (visualizer.results)
    structure = structure_first(trace)  # the answer only, the family guessed from the prompt
    verdict = verdict or score(check, probe, trace.end.text if trace.end else "")
    answers = answer_trajectory(trace, lambda text: check(probe, text) if verdict.correct is not None else None,
                                verdict.correct)
    return result_from_source(Source(probe, seed, trace, trace_file, metrics, structure, verdict, cost,
                                     trajectory=run_trajectory(trace), answers=answers))


def score(check: Callable, probe, response: str) -> Verdict:
    """The checker's verdict on a response.  A row without an answer is not scored (the checker is not
    asked), and a checker that raises leaves the generation unscored with the reason: one bad row or a
    bug in a checker never stops a study, and the reason lands in generations.parquet (`unscored`)."""
    if getattr(probe, "answer", None) is None:
        return Verdict(None, "the row has no answer")
    try:
        verdict = check(probe, response)
    except Exception as exc:  # noqa: BLE001 -- any checker bug: recorded, the run goes on
        return Verdict(None, f"the answer checker failed: {type(exc).__name__}: {exc}"[:300])
    if verdict is None:
        return Verdict(None, f"the {probe.regime} regime has no answer checker")
    return Verdict(bool(verdict))


def regime_tables(
    results: Sequence[ProbeResult], *, include_exploratory: bool = False, n_resamples: int = N_RESAMPLES
) -> list[dict]:
    """One row per regime (in the order regimes first appear), over the reported split."""
    reported = [r for r in results if include_exploratory or r.split == SPLIT_CONFIRMATORY]
    regimes = list(dict.fromkeys(r.regime for r in reported))
    return [_regime_row(regime, [r for r in reported if r.regime == regime], n_resamples) for regime in regimes]


def _regime_row(regime: str, rows: list[ProbeResult], n_resamples: int) -> dict:
    prompts = [r.prompt_id for r in rows]

    def mean_with_ci(values):
        """Mean over generations where the value is defined, with its prompt-clustered CI."""
        keep = [i for i, v in enumerate(values) if is_defined(v)]
        if not keep:
            return Undefined("undefined in every generation"), Undefined("no values")
        array = np.array([values[i] for i in keep], dtype=float)
        clusters = [prompts[i] for i in keep]
        return float(array.mean()), clustered_ci(clusters, lambda idx: float(array[idx].mean()), n_resamples=n_resamples)

    def mean(values):
        defined = [v for v in values if is_defined(v)]
        return float(np.mean(defined)) if defined else Undefined("undefined in every generation")

    tau, tau_ci = mean_with_ci([r.tau_b for r in rows])
    _, tokens_ci = mean_with_ci([r.tokens_per_accept_step for r in rows])  # the figure's whisker
    scored = [r for r in rows if r.correct is not None and is_defined(r.mean_commit_entropy_nats)]
    if any(r.correct is not None for r in rows):
        accuracy = float(np.mean([r.correct for r in rows if r.correct is not None]))
    else:  # why nothing was scored: the commonest reason (no checker, no answers, a failing checker)
        reasons = [r.unscored for r in rows if r.unscored]
        accuracy = Undefined("no generation was scored" + (f" ({max(dict.fromkeys(reasons), key=reasons.count)})" if reasons else ""))
    if scored:
        scores = -np.array([r.mean_commit_entropy_nats for r in scored])  # low entropy = confident
        labels = np.array([r.correct for r in scored])
        area = auroc(scores, labels)
        area_ci = clustered_ci([r.prompt_id for r in scored], lambda idx: auroc(scores[idx], labels[idx]), n_resamples=n_resamples)
    else:
        area = area_ci = Undefined("no scored generations" if isinstance(accuracy, float) else accuracy.reason)
    monotone = [r for r in rows if r.monotone]
    structure, structure_ci, structure_unit = difference_ci(prompts, [r.structure_difference for r in rows], n_resamples=n_resamples)
    if scored:
        reliability = reliability_tertiles([r.mean_commit_entropy_nats for r in scored], [r.correct for r in scored],
                                           [r.prompt_id for r in scored], n_resamples=n_resamples)
    else:
        reliability = Undefined(area.reason)
    return {
        "regime": regime,
        "prompts": len(set(prompts)),
        "generations": len(rows),
        "tau_b": tau,
        "tau_b_ci": tau_ci,
        "tau_b_undefined_generations": sum(not is_defined(r.tau_b) for r in rows),
        **{c.regime_mean: mean([getattr(r, c.name) for r in rows]) for c in COLUMNS if c.regime_mean},
        "tokens_per_accept_step_ci": tokens_ci,
        "accuracy": accuracy,
        "unscored_generations": sum(r.correct is None for r in rows),
        "auroc_low_entropy_correct": area,
        "auroc_ci": area_ci,
        "monotone_fraction": len(monotone) / len(rows),
        "tau_b_monotone_only": mean([r.tau_b for r in monotone]) if monotone else Undefined("no monotone generation"),
        "bin_tau_b": {size: mean([r.bin_tau_b[size] for r in rows]) for size in BIN_SIZES},
        "structure_first_difference": structure,
        "structure_first_ci": structure_ci,
        "structure_first_resampled": structure_unit or "none",
        "reliability": reliability,
        **regime_trajectory(rows, n_resamples),  # every step read against its end (issue 56)
    }


def markdown_table(tables: list[dict]) -> str:
    """The study's table, plus the bin-size sweep, as markdown."""
    lines = [
        "| Regime | Prompts × seeds | Token tau_b [95% CI] | tau_b defined | Block-seq. control | Content tokens "
        "| Tokens/step | Same-step | Accuracy | AUROC low entropy → correct [95% CI] | Commit entropy (nats) | Steps used |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tables:
        seeds = t["generations"] // max(t["prompts"], 1)
        defined = t["generations"] - t["tau_b_undefined_generations"]
        lines.append(
            f"| {t['regime']} | {t['prompts']} × {seeds} | {_fmt(t['tau_b'])} {_fmt_ci(t['tau_b_ci'])} | "
            f"{defined}/{t['generations']} | {_fmt(t['control_tau_b'], 2)} | {t['content_tokens']:.1f} | {_fmt(t['tokens_per_accept_step'], 1)} | {_fmt(t['same_step_fraction'], 2)} | "
            f"{_fmt(t['accuracy'], 2)} | {_fmt(t['auroc_low_entropy_correct'])} {_fmt_ci(t['auroc_ci'])} | "
            f"{_fmt(t['mean_commit_entropy_nats'], 4)} | {_fmt(t['steps_used'], 1)} |"
        )
    lines += ["", "| Regime | " + " | ".join(f"bin {s}" for s in BIN_SIZES) + " |", "|---|" + "---|" * len(BIN_SIZES)]
    for t in tables:
        lines.append(f"| {t['regime']} | " + " | ".join(_fmt(t["bin_tau_b"][s], 2) for s in BIN_SIZES) + " |")
    lines += ["", "| Regime | Structure first: free − structural mean commit step [95% CI] | AUROC structural → earlier |",
              "|---|---|---|"]
    for t in tables:
        lines.append(f"| {t['regime']} | {_fmt(t['structure_first_difference'], 2)} {_fmt_ci(t['structure_first_ci'])} | "
                     f"{_fmt(t['structure_first_auroc'])} |")
    lines += ["", "| Regime | Accuracy, low commit entropy [95% CI] | middle | high |", "|---|---|---|---|"]
    for t in tables:
        curve = t["reliability"]
        cells = (["–"] * 3 if isinstance(curve, Undefined)
                 else [f"{_fmt(r['accuracy'], 2)} {_fmt_ci(r['accuracy_ci'])} (n={r['generations']})" for r in curve])
        lines.append(f"| {t['regime']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + trajectory_markdown(tables)


def sampler_comparison_markdown(tables_by_sampler: dict[str, list[dict]]) -> str:
    """The same generations under each sampler, side by side: one row per regime and sampler."""
    lines = [
        "| Regime | Sampler | Token tau_b [95% CI] | tau_b defined | Tokens/accept step | Same-step | Steps used "
        "| Accuracy | AUROC low entropy → correct [95% CI] | Structure first [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    regimes = list(dict.fromkeys(t["regime"] for tables in tables_by_sampler.values() for t in tables))
    for regime in regimes:
        for sampler, tables in tables_by_sampler.items():
            for t in (t for t in tables if t["regime"] == regime):
                defined = t["generations"] - t["tau_b_undefined_generations"]
                lines.append(
                    f"| {regime} | {sampler} | {_fmt(t['tau_b'])} {_fmt_ci(t['tau_b_ci'])} | {defined}/{t['generations']} | "
                    f"{_fmt(t['tokens_per_accept_step'], 1)} | {_fmt(t['same_step_fraction'], 2)} | {_fmt(t['steps_used'], 1)} | "
                    f"{_fmt(t['accuracy'], 2)} | {_fmt(t['auroc_low_entropy_correct'])} {_fmt_ci(t['auroc_ci'])} | "
                    f"{_fmt(t['structure_first_difference'], 2)} {_fmt_ci(t['structure_first_ci'])} |"
                )
    return "\n".join(lines) + "\n"


def write_tables(out, tables: list[dict], meta: dict, results: Sequence[ProbeResult] = ()) -> tuple[Path, Path]:
    """OUT/table.md (readable), OUT/table.json (every value; undefined ones null with a reason) and
    OUT/reliability.svg (the reliability curve of every regime with a checker)."""
    out = Path(out)
    notes = (
        f"Model: {meta.get('model')}. Prompts: {meta.get('split')}. Seeds: {meta.get('seeds')}. "
        "Token tau_b: Kendall tau_b (tie-aware) between commit step (first acceptance) and position, the answer's content only (thought tokens excluded), "
        "per block and averaged; CIs resample prompts with their seeds (prompt-clustered bootstrap). "
        "AUROC: within each regime only (pooling regimes invites Simpson's paradox). "
        "tau_b is undefined for a generation whose content all committed on one step (or has under 2 tokens): "
        "'tau_b defined' counts the generations behind the mean. "
        "Structure first: each content token of the answer (thought tokens excluded) is structural or free by the rules of "
        "its prompt's family (visualizer/metrics/structure.py); free minus structural mean commit step per block, "
        "averaged over blocks, then over runs with a bootstrap CI over prompts (scipy.stats.bootstrap). "
        "Reliability: accuracy in each tertile of mean commit entropy within the regime, prompt-clustered CIs. "
        "Undefined values show as '–'."
    )
    md = out / "table.md"
    md.write_text(markdown_table(tables) + "\n" + notes + "\n", encoding="utf-8")
    data = {"meta": meta, "regimes": [to_json(t) for t in tables], "generations": [to_json(r) for r in results],
            "pooled_calibration": to_json(pooled_calibration(results))}  # beside its warning, never in a regime's row
    js = out / "table.json"
    js.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    (out / "reliability.svg").write_text(reliability_svg(tables), encoding="utf-8")
    return md, js
