"""`probe` runs the study's six regimes on a model, saves every trace and writes the per-regime tables.

    python -m visualizer probe --regimes math json --seeds 5 --out runs/probe
    results = run_probe(backend, probes, seeds=5, out="runs/probe", check=check_answer)   # one ProbeResult each

The statistics and tables live in `visualizer.probe` (they work on traces alone); this module is
the runner: it drives a backend, saves traces atomically, resumes, and refuses an OUT made with
another model or other settings.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from backends.registry import backend_names
from backends.run import record_trace
from visualizer.metrics.stats import N_RESAMPLES
from visualizer.probe import (
    MANIFEST,
    SPLIT_CONFIRMATORY,
    ProbeError,
    ProbeResult,
    regime_tables,
    result_from_trace,
    sampler_comparison_markdown,
    write_tables,
)
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace, TraceError

from .common import CliError


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
            trace = record_trace(backend, probe.prompt, settings.replace(seed=seed))
            if trace.end is not None and trace.end.finish_reason == "cancelled":
                raise ProbeError("interrupted; run the same command again to resume")
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
    parser.add_argument("--backend", choices=backend_names(), default=None, help="default: picked from the model")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="output budget (default: the model's)")
    parser.add_argument("--steps", type=int, dest="max_denoising_steps", help="max denoising steps per block (default: the model's)")
    parser.add_argument("--samplers", nargs="+", default=None,
                        help="run the same generations under each of these samplers (or 'all': every one the backend runs), "
                        "each into OUT/<sampler>/ with its own tables, and write OUT/samplers.md side by side")
    parser.add_argument("--bootstrap", type=int, default=N_RESAMPLES, help=f"bootstrap resamples (default {N_RESAMPLES})")
    parser.set_defaults(run=probe_command)


def probe_command(args) -> int:
    from prompts.probes import REGIMES, check_answer, probe_suite

    regimes = [r for item in (args.regimes or REGIMES) for r in item.split(",") if r]
    unknown = sorted(set(regimes) - set(REGIMES))
    if unknown:
        raise CliError(f"unknown regime(s): {', '.join(unknown)}; choose from {', '.join(REGIMES)}")
    for name in ("seeds", "per_regime", "bootstrap"):
        if getattr(args, name) < 1:
            raise CliError(f"--{name.replace('_', '-')} must be at least 1")
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, max_denoising_steps=args.max_denoising_steps)
    problems = settings.problems()
    if problems:
        raise CliError("; ".join(problems))
    try:
        suite = probe_suite(list(dict.fromkeys(regimes)), per_regime=args.per_regime)
    except ValueError as exc:
        raise CliError(str(exc))
    probes = [p for p in suite if args.include_exploratory or p.split == SPLIT_CONFIRMATORY]
    if not probes:
        raise CliError("no prompts to run: the selected regimes have no confirmatory prompts (try --include-exploratory)")

    from backends import BUILTIN_MODEL_DIR, RANDOM_MODEL_DIR, BackendError, default_model, load_backend

    model = args.model or default_model()
    if model == str(RANDOM_MODEL_DIR):
        print(f"note: no trained model in {BUILTIN_MODEL_DIR}: using the untrained random model", file=sys.stderr)
    try:
        backend = load_backend(model, backend=args.backend)
        print(f"probe: {len(probes)} prompts × {args.seeds} seeds on {backend.info.name} ({backend.info.device})", file=sys.stderr)
        if args.samplers:
            return _probe_samplers(backend, probes, args, settings, regimes, check_answer)
        results = run_probe(backend, probes, seeds=args.seeds, out=args.out, settings=settings, check=check_answer, progress=ProgressBar())
    except (BackendError, ProbeError) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write to {args.out}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        raise CliError("interrupted; run the same command again to resume") from None
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


def _probe_samplers(backend, probes, args, settings: GenerationSettings, regimes, check) -> int:
    """`--samplers`: the same prompts and seeds under each sampler, each a resumable probe run of its own
    in OUT/<sampler>/ (tables, structure first, reliability.svg), then OUT/samplers.md side by side."""
    names = [n for item in args.samplers for n in item.split(",") if n]
    specs = backend.capabilities.samplers if names == ["all"] else [backend.capabilities.sampler(n) for n in names]
    out = Path(args.out)
    by_sampler = {}
    for spec in specs:
        print(f"sampler {spec.name}:", file=sys.stderr)
        folder = out / _safe(spec.name)
        results = run_probe(backend, probes, seeds=args.seeds, out=folder, settings=settings.replace(sampler=spec.name),
                            check=check, progress=ProgressBar())
        by_sampler[spec.name] = regime_tables(results, include_exploratory=args.include_exploratory, n_resamples=args.bootstrap)
        meta = {"model": backend.info.name, "source": backend.info.source, "sampler": spec.name, "seeds": args.seeds,
                "split": "confirmatory + exploratory" if args.include_exploratory else "confirmatory",
                "regimes": list(dict.fromkeys(regimes)), "settings": settings.replace(sampler=spec.name).to_dict()}
        write_tables(folder, by_sampler[spec.name], meta, results)
    notes = "".join(f"- **{spec.name}**: {spec.note}\n" for spec in specs)
    text = (f"# Samplers side by side: {backend.info.name}, {args.seeds} seed(s) per prompt\n\n"
            + sampler_comparison_markdown(by_sampler) + "\n" + notes
            + "\nEach sampler's full table, structure first and reliability curve: OUT/<sampler>/table.md and reliability.svg.\n")
    (out / "samplers.md").write_text(text, encoding="utf-8")
    print(text)
    return 0
