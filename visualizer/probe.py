"""The probe suite: run the study's six regimes on any backend and tabulate commit order per regime.

    python -m visualizer probe --regimes math json --seeds 5 --out runs/probe
    results = run_probe(backend, probes, seeds=5, out="runs/probe")    # one ProbeResult per generation
    tables = regime_tables(results)                                     # one row per regime
    write_tables("runs/probe", tables, meta)                            # table.md + table.json

Every generation's trace is saved under OUT/traces/<regime>/<prompt_id>-seed<k>.json; a rerun
skips the traces already there (resumable), and refuses an OUT made with another model or other
settings.  Reported per regime (confirmatory prompts unless exploratory ones are included, as
the study froze its choices on the exploratory half): mean token tau_b with a prompt-clustered
bootstrap 95 % CI, the block-sequential control, tokens per accept step, the same-step pair
fraction, accuracy, and the AUROC of low commit entropy predicting a correct answer.  The AUROC
is computed within a regime and never pooled: regimes differ in accuracy and entropy scale, and
pooling them can reverse the within-regime trend (Simpson's paradox; the study's pooled AUROC
was 0.437 although math alone was 0.749).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .metrics import BIN_SIZES, Undefined, is_defined, run_metrics, to_json
from .metrics.stats import N_RESAMPLES, auroc, clustered_ci
from .settings import GenerationSettings
from .trace import Trace, TraceError

SPLIT_CONFIRMATORY = "confirmatory"
SPLIT_EXPLORATORY = "exploratory"
MANIFEST = "probe.json"


class ProbeError(RuntimeError):
    """A probe run cannot go on; the message says why, for the CLI."""


@dataclass(frozen=True)
class ProbeResult:
    """One generation of the probe suite, reduced to what the tables need."""

    regime: str
    prompt_id: str
    split: str
    seed: int
    trace_file: str  # relative to the output folder
    finish_reason: str
    content_tokens: int
    tau_b: float | Undefined  # mean over the generation's blocks (content only)
    control_tau_b: float | Undefined
    bin_tau_b: dict  # {bin size: float | Undefined}
    tokens_per_accept_step: float | Undefined
    same_step_fraction: float | Undefined
    mean_commit_entropy_nats: float | Undefined
    steps_used: int
    monotone: bool
    correct: bool | None  # None: the regime has no checker


def result_from_trace(probe, seed: int, trace: Trace, trace_file: str, check: Callable) -> ProbeResult:
    metrics = run_metrics(trace)
    response = trace.end.text if trace.end else ""
    return ProbeResult(
        regime=probe.regime,
        prompt_id=probe.prompt_id,
        split=probe.split,
        seed=seed,
        trace_file=trace_file,
        finish_reason=trace.end.finish_reason if trace.end else "unfinished",
        content_tokens=metrics.content_tokens,
        tau_b=metrics.tau_b_mean,
        control_tau_b=metrics.control_tau_b_mean,
        bin_tau_b=metrics.bin_tau_b_mean,
        tokens_per_accept_step=metrics.tokens_per_accept_step,
        same_step_fraction=metrics.same_step_fraction,
        mean_commit_entropy_nats=metrics.mean_commit_entropy_nats,
        steps_used=metrics.steps_used,
        monotone=metrics.monotone,
        correct=_checked(check, probe, seed, response),
    )


def _checked(check: Callable, probe, seed: int, response: str) -> bool | None:
    """The checker's verdict; a checker that crashes stops the run with one line (traces stay saved)."""
    try:
        return check(probe, response)
    except Exception as exc:  # a bug in a checker, not in the response: say where, then resume later
        raise ProbeError(
            f"the answer checker failed on {probe.regime}/{probe.prompt_id} seed {seed}: {type(exc).__name__}: {exc}"
        ) from None


# ---- running --------------------------------------------------------------------------------------
def run_probe(
    backend,
    probes: Sequence,
    *,
    seeds: int,
    out,
    settings: GenerationSettings | None = None,
    check: Callable,
    progress: Callable[[int, int, str, bool], None] | None = None,
) -> list[ProbeResult]:
    """Generate every (probe, seed) pair not already in `out`, save its trace, return every result.

    `check(probe, response) -> bool | None` scores a response; `progress(done, total, label,
    resumed)` is called after each pair (`resumed`: its trace was already saved).
    """
    out = Path(out)
    settings = settings or GenerationSettings()
    _check_manifest(out, backend.info, settings)
    results = []
    jobs = [(probe, seed) for probe in probes for seed in range(seeds)]
    for done, (probe, seed) in enumerate(jobs, start=1):
        relative = f"traces/{_safe(probe.regime)}/{_safe(probe.prompt_id)}-seed{seed}.json"
        path = out / relative
        trace = _load_finished(path)
        resumed = trace is not None
        if trace is None:
            trace = Trace(model=backend.info, prompt=probe.prompt)
            for record in backend.generate(probe.prompt, settings.replace(seed=seed)):
                trace.append(record)
            if trace.end is None or trace.end.finish_reason not in ("eos", "length"):
                reason = trace.end.error or trace.end.finish_reason if trace.end else "no end record"
                raise ProbeError(f"{probe.regime}/{probe.prompt_id} seed {seed} did not finish: {reason}")
            _save_atomic(trace, path)
        results.append(result_from_trace(probe, seed, trace, relative, check))
        if progress is not None:
            progress(done, len(jobs), f"{probe.regime}/{probe.prompt_id} seed {seed}", resumed)
    return results


def _check_manifest(out: Path, info, settings: GenerationSettings) -> None:
    """Write OUT/probe.json, or check that an existing one describes the same model and settings."""
    manifest = {"model": info.source, "backend": info.backend, "settings": {k: v for k, v in settings.to_dict().items() if k != "seed"}}
    path = out / MANIFEST
    if path.exists():
        try:
            existing = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ProbeError(f"cannot read {path}: {exc}") from None
        if {k: existing.get(k) for k in manifest} != manifest:
            raise ProbeError(
                f"{out} holds a probe run of another model or other settings ({path.name}); "
                "choose another --out folder to start a new run"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _load_finished(path: Path) -> Trace | None:
    """A trace saved by an earlier run, if it is there, valid and finished."""
    if not path.exists():
        return None
    try:
        trace = Trace.load(path)
    except TraceError:
        return None
    return trace if trace.finished and trace.end.finish_reason in ("eos", "length") else None


def _save_atomic(trace: Trace, path: Path) -> None:
    """Write then rename, so an interrupted run never leaves half a trace behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    trace.save(partial)
    os.replace(partial, path)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


# ---- tables ----------------------------------------------------------------------------------------
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
    scored = [r for r in rows if r.correct is not None and is_defined(r.mean_commit_entropy_nats)]
    if any(r.correct is not None for r in rows):
        accuracy = float(np.mean([r.correct for r in rows if r.correct is not None]))
    else:
        accuracy = Undefined("this regime has no answer checker")
    if scored:
        scores = -np.array([r.mean_commit_entropy_nats for r in scored])  # low entropy = confident
        labels = np.array([r.correct for r in scored])
        area = auroc(scores, labels)
        area_ci = clustered_ci([r.prompt_id for r in scored], lambda idx: auroc(scores[idx], labels[idx]), n_resamples=n_resamples)
    else:
        area = area_ci = Undefined("no scored generations" if isinstance(accuracy, float) else accuracy.reason)
    monotone = [r for r in rows if r.monotone]
    return {
        "regime": regime,
        "prompts": len(set(prompts)),
        "generations": len(rows),
        "tau_b": tau,
        "tau_b_ci": tau_ci,
        "tau_b_undefined_generations": sum(not is_defined(r.tau_b) for r in rows),
        "control_tau_b": mean([r.control_tau_b for r in rows]),
        "tokens_per_accept_step": mean([r.tokens_per_accept_step for r in rows]),
        "same_step_fraction": mean([r.same_step_fraction for r in rows]),
        "accuracy": accuracy,
        "auroc_low_entropy_correct": area,
        "auroc_ci": area_ci,
        "mean_commit_entropy_nats": mean([r.mean_commit_entropy_nats for r in rows]),
        "content_tokens": float(np.mean([r.content_tokens for r in rows])),
        "steps_used": float(np.mean([r.steps_used for r in rows])),
        "monotone_fraction": len(monotone) / len(rows),
        "tau_b_monotone_only": mean([r.tau_b for r in monotone]) if monotone else Undefined("no monotone generation"),
        "bin_tau_b": {size: mean([r.bin_tau_b[size] for r in rows]) for size in BIN_SIZES},
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
    return "\n".join(lines) + "\n"


def write_tables(out, tables: list[dict], meta: dict, results: Sequence[ProbeResult] = ()) -> tuple[Path, Path]:
    """OUT/table.md (readable) and OUT/table.json (every value; undefined ones null with a reason)."""
    out = Path(out)
    notes = (
        f"Model: {meta.get('model')}. Prompts: {meta.get('split')}. Seeds: {meta.get('seeds')}. "
        "Token tau_b: Kendall tau_b (tie-aware) between commit step (first acceptance) and position, content only, "
        "per block and averaged; CIs resample prompts with their seeds (prompt-clustered bootstrap). "
        "AUROC: within each regime only (pooling regimes invites Simpson's paradox). "
        "tau_b is undefined for a generation whose content all committed on one step (or has under 2 tokens): "
        "'tau_b defined' counts the generations behind the mean. Undefined values show as '–'."
    )
    md = out / "table.md"
    md.write_text(markdown_table(tables) + "\n" + notes + "\n", encoding="utf-8")
    data = {"meta": meta, "regimes": [to_json(t) for t in tables], "generations": [to_json(r) for r in results]}
    js = out / "table.json"
    js.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    return md, js


def _fmt(value, digits: int = 3) -> str:
    return "–" if isinstance(value, Undefined) else f"{value:.{digits}f}"


def _fmt_ci(ci) -> str:
    return "[–]" if isinstance(ci, Undefined) else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


# ---- command line ------------------------------------------------------------------------------------
class ProgressBar:
    """Plain stderr progress: one redrawn line on a terminal, a line per item otherwise.

    The time left is estimated from the generations run in this session, not the resumed ones.
    """

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.started = self.last = time.perf_counter()
        self.generated, self.generating_s = 0, 0.0
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int, label: str, resumed: bool = False) -> None:
        now = time.perf_counter()
        if not resumed:
            self.generated, self.generating_s = self.generated + 1, self.generating_s + now - self.last
        self.last = now
        if done == total:
            left = "done"
        else:
            left = f"~{self.generating_s / self.generated * (total - done):.0f}s left" if self.generated else "resuming"
        filled = int(24 * done / total)
        label += " (saved before)" if resumed else ""
        line = f"[{'#' * filled}{'.' * (24 - filled)}] {done}/{total} {label}  {now - self.started:.0f}s elapsed, {left}"
        if self.tty:
            self.stream.write("\r\033[K" + line + ("\n" if done == total else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def add_probe_command(subparsers) -> None:
    """Register the `probe` subcommand on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "probe",
        help="run the probe suite and write commit-order tables per regime",
        description="Run the six-regime probe suite (the commit-order study's) on a model, save every trace, "
        "and write per-regime tables (table.md, table.json) into --out. Rerunning skips traces already there.",
    )
    parser.add_argument("--out", required=True, help="folder for traces and tables (created if missing)")
    parser.add_argument("--regimes", nargs="+", default=None, help="regimes to run (space or comma separated; default: all six)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per prompt, 0..N-1 (default 5)")
    parser.add_argument("--per-regime", type=int, default=20, help="prompts per regime, both splits together (default 20)")
    parser.add_argument("--include-exploratory", action="store_true", help="also run and report the exploratory prompts")
    parser.add_argument("--model", default=None, help="model folder or hub id (default: the built-in model)")
    parser.add_argument("--backend", choices=("transformers", "mlx"), default=None, help="default: picked from the model")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="output budget (default: the model's)")
    parser.add_argument("--steps", type=int, dest="max_denoising_steps", help="max denoising steps per block (default: the model's)")
    parser.add_argument("--bootstrap", type=int, default=N_RESAMPLES, help=f"bootstrap resamples (default {N_RESAMPLES})")
    parser.set_defaults(run=probe_command)


def probe_command(args) -> int:
    try:
        from prompts.probes import REGIMES, check_answer, probe_suite
    except ImportError as exc:
        return _fail(f"the probe prompts are not available ({exc})")
    regimes = [r for item in (args.regimes or REGIMES) for r in item.split(",") if r]
    unknown = sorted(set(regimes) - set(REGIMES))
    if unknown:
        return _fail(f"unknown regime(s): {', '.join(unknown)}; choose from {', '.join(REGIMES)}")
    for name in ("seeds", "per_regime", "bootstrap"):
        if getattr(args, name) < 1:
            return _fail(f"--{name.replace('_', '-')} must be at least 1")
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, max_denoising_steps=args.max_denoising_steps)
    problems = settings.problems()
    if problems:
        return _fail("; ".join(problems))
    try:
        suite = probe_suite(list(dict.fromkeys(regimes)), per_regime=args.per_regime)
    except ValueError as exc:
        return _fail(str(exc))
    probes = [p for p in suite if args.include_exploratory or p.split == SPLIT_CONFIRMATORY]
    if not probes:
        return _fail("no prompts to run: the selected regimes have no confirmatory prompts (try --include-exploratory)")

    from backends import BUILTIN_MODEL_DIR, RANDOM_MODEL_DIR, BackendError, default_model, load_backend

    model = args.model or default_model()
    if model == str(RANDOM_MODEL_DIR):
        print(f"note: no trained model in {BUILTIN_MODEL_DIR}: using the untrained random model", file=sys.stderr)
    try:
        backend = load_backend(model, backend=args.backend)
        print(f"probe: {len(probes)} prompts × {args.seeds} seeds on {backend.info.name} ({backend.info.device})", file=sys.stderr)
        results = run_probe(backend, probes, seeds=args.seeds, out=args.out, settings=settings, check=check_answer, progress=ProgressBar())
    except (BackendError, ProbeError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write to {args.out}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        return _fail("interrupted; run the same command again to resume")
    tables = regime_tables(results, include_exploratory=args.include_exploratory, n_resamples=args.bootstrap)
    meta = {
        "model": backend.info.name,
        "source": backend.info.source,
        "split": "confirmatory + exploratory" if args.include_exploratory else "confirmatory",
        "seeds": args.seeds,
        "regimes": list(dict.fromkeys(regimes)),
        "settings": settings.to_dict(),
    }
    md, _ = write_tables(args.out, tables, meta, results)
    print(md.read_text(encoding="utf-8"))
    return 0


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
