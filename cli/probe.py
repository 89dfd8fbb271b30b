"""`probe` runs the study's six regimes on a model, saves every trace and writes the per-regime tables.

    python -m visualizer probe --regimes math json --seeds 5 --out runs/probe
    python -m visualizer probe --per-regime 500 --batch-size auto --out runs/big       # one GPU
    torchrun --nproc-per-node 4 -m visualizer probe --per-regime 500 --batch-size auto --out runs/big
    python -m visualizer probe --prompts gsm8k.jsonl --columns prompt=question --regime math --out runs/gsm
    results = run_probe(backend, probes, seeds=5, out="runs/probe", check=check_answer)   # one ProbeResult each

The statistics and tables live in `visualizer.probe` (they work on traces alone); this module is
the runner: it plans the batches (`visualizer.plan`, written into OUT/probe.json before the first
generation), drives a backend through a plain list of batches, saves traces and result rows
atomically (`visualizer.results`), resumes, and refuses an OUT made with another model, other
settings or another plan.  Which process runs which batch is `cli.distributed`'s business alone.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from backends.registry import backend_names
from backends.run import record_batch, record_trace
from visualizer.metrics import run_metrics
from visualizer.metrics.stats import N_RESAMPLES
from visualizer.plan import Batch, Plan, item_id, make_plan
from visualizer.probe import (
    MANIFEST,
    SPLIT_CONFIRMATORY,
    ProbeError,
    ProbeResult,
    regime_tables,
    result_from_trace,
    write_tables,
)
from visualizer.results import merge_parts, part_done, read_results, result_rows, write_part
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

from .common import CliError, refuse_problems

DEFAULT_PER_REGIME = 20  # the study's 20 prompts a regime (10 confirmatory)


# ---- running ----------------------------------------------------------------------------------------
def run_probe(
    backend,
    probes: Sequence,
    *,
    seeds: int,
    out,
    settings: GenerationSettings | None = None,
    check: Callable,
    batch_size: int = 1,
) -> list[ProbeResult]:
    """Generate every (probe, seed) pair not already in `out` in one process; every result, in plan order.

    `check(probe, response) -> bool | None` scores a response.  The command line runs the same
    steps through `cli.distributed.run_plan`, on one process or many.
    """
    settings = settings or GenerationSettings()
    plan, todo = prepare_out(out, backend.info, settings, probe_items(probes, seeds), batch_size=batch_size)
    run_batches(backend, todo, {item_of(p, s): p for p in probes for s in range(seeds)},
                out=out, settings=settings, check=check)
    return finish_results(out, plan)


def probe_items(probes: Sequence, seeds: int) -> list[tuple[str, str, int]]:
    """(regime, prompt_id, seed) of every generation: seed 0 of every probe first, then seed 1, ..."""
    return [(p.regime, p.prompt_id, seed) for seed in range(seeds) for p in probes]


def item_of(probe, seed: int) -> str:
    return item_id(probe.regime, probe.prompt_id, seed)


def trace_file(probe, seed: int) -> str:
    """Where a generation's trace is saved, relative to OUT."""
    return _trace_file_of(item_of(probe, seed))


def prepare_out(out, info, settings: GenerationSettings, items: list, *, batch_size, choose_batch_size=None,
                world_size: int = 1) -> tuple[Plan, list[Batch]]:
    """Write OUT/probe.json with the plan, or check an existing one; the plan and its unfinished batches.

    `batch_size` is a number, or "auto": then an existing plan's size is kept, and a new plan
    takes `choose_batch_size()`.  A rerun must make the same plan: the traces depend on it.
    """
    out = Path(out)
    manifest = {"model": info.source, "backend": info.backend, "settings": {k: v for k, v in settings.to_dict().items() if k != "seed"}}
    path = out / MANIFEST
    existing = _read_manifest(path)
    if existing is not None and {k: existing.get(k) for k in manifest} != manifest:
        raise ProbeError(
            f"{out} holds a probe run of another model or other settings ({path.name}); "
            "choose another --out folder to start a new run"
        )
    recorded = Plan.from_dict(existing["plan"]) if existing and "plan" in existing else None
    chosen = "auto" if batch_size == "auto" else "flag"
    if batch_size == "auto":
        if recorded is not None:
            batch_size, chosen = recorded.batch_size, existing.get("batch_size_chosen", "auto")
        else:
            batch_size = choose_batch_size() if choose_batch_size else 1
    plan = make_plan(items, batch_size=batch_size)
    if recorded is not None and recorded != plan:
        raise ProbeError(
            f"{out} holds a run planned as {len(recorded.batches)} batches of up to {recorded.batch_size} rows "
            f"({recorded.items} generations); this command plans {len(plan.batches)} of up to {plan.batch_size} "
            f"({plan.items}). The traces depend on the plan: rerun with the same flags, or choose another --out"
        )
    if existing is not None and recorded is None and plan.batch_size != 1:
        raise ProbeError(f"{out} holds a run made one prompt at a time: resume it with --batch-size 1, or choose another --out")
    todo = [b for b in plan.batches if not _batch_done(out, b)]
    manifest |= {
        "plan": plan.to_dict(),
        "batch_size_chosen": chosen,  # "auto": picked from free GPU memory when the plan was made
        # which rank ran each batch this time: the plan's batches do not depend on it
        "dealt": {"world_size": world_size, "rank_of_batch": {b.index: k % world_size for k, b in enumerate(todo)}},
    }
    out.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    os.replace(partial, path)
    return plan, todo


def _batch_done(out: Path, batch: Batch) -> bool:
    """Its result rows are written (that happens last) and its traces are all there."""
    if not part_done(out, batch.index):
        return False
    return all((out / _trace_file_of(item)).exists() for item in batch.items)


def _trace_file_of(item: str) -> str:
    regime, rest = item.split("/", 1)
    prompt_id, seed = rest.rsplit("/", 1)
    return f"traces/{_safe(regime)}/{_safe(prompt_id)}-{seed}.json"


def _read_manifest(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot read {path}: {exc}") from None


def run_batches(backend, batches: Sequence[Batch], probes: dict, *, out, settings: GenerationSettings,
                check: Callable, after_batch: Callable[[], None] = lambda: None) -> None:
    """Generate each batch, save its traces and its result rows (see visualizer.results).

    `probes` maps item ids to probes.  The host-side work of a batch (saving traces, metrics,
    the checker, Parquet) runs on a writer thread while the model generates the next batch; at
    most one batch waits there.  A failure raises ProbeError naming the batch and its items.
    """
    out = Path(out)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-writer") as writer:
        pending = None
        for batch in batches:
            rows = [probes[item] for item in batch.items]
            traces = _record_batch(backend, [p.prompt for p in rows], settings.replace(seed=batch.seed))
            for item, trace in zip(batch.items, traces):
                if trace.end is not None and trace.end.finish_reason == "cancelled":
                    raise KeyboardInterrupt  # Ctrl-C: record_trace ended the run; the command says how to resume
                if trace.end is None or trace.end.finish_reason not in ("eos", "length"):
                    reason = (trace.end.error or trace.end.finish_reason) if trace.end else "no end record"
                    raise ProbeError(f"batch {batch.index} ({', '.join(batch.items)}): {item} did not finish: "
                                     f"{reason}{_fit_hint(backend, batch, reason)}")
            if pending is not None:
                pending.result()  # a writer failure stops the run here
            pending = writer.submit(_save_batch, out, batch, rows, traces, check, after_batch)
        if pending is not None:
            pending.result()


def _record_batch(backend, prompts: list[str], settings: GenerationSettings) -> list[Trace]:
    """One trace per prompt, generated as one batch (a batch of one is exactly record_trace's run)."""
    if len(prompts) == 1:
        return [record_trace(backend, prompts[0], settings)]
    return record_batch(backend, prompts, settings)


def _fit_hint(backend, batch: Batch, reason: str) -> str:
    """For an out-of-memory error: the largest batch that fits now (the plan itself never changes)."""
    if "out of" not in reason.lower() or "memory" not in reason.lower():
        return ""
    from backends.memory import rows_that_fit

    fit = rows_that_fit(backend)
    if fit is None:
        return ""
    return (f" (the largest batch that fits this GPU now is about {fit} rows: start a new --out with "
            f"--batch-size {fit}; this run's plan stays at {len(batch.items)} rows)")


def _save_batch(out: Path, batch: Batch, probes: list, traces: list[Trace], check: Callable,
                after_batch: Callable[[], None]) -> None:
    generations, positions = [], []
    for row, (probe, trace) in enumerate(zip(probes, traces)):
        relative = trace_file(probe, batch.seed)
        _save_atomic(trace, out / relative)
        metrics = run_metrics(trace)
        result = result_from_trace(probe, batch.seed, trace, relative, check, metrics=metrics)
        generation, rows = result_rows(result, metrics, trace, batch=batch.index, row=row, batch_rows=len(batch.items))
        generation["heldout"] = getattr(probe, "heldout", True)
        generations.append(generation)
        positions.extend(rows)
    write_part(out, batch.index, generations, positions)  # last: marks the batch done
    after_batch()


def finish_results(out, plan: Plan) -> list[ProbeResult]:
    """Join every batch's rows into OUT/results/*.parquet and read the generations back from it."""
    merge_parts(out, [b.index for b in plan.batches])
    return read_results(out)


def _save_atomic(trace: Trace, path: Path) -> None:
    """Write then rename, so an interrupted run never leaves half a trace behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    trace.save(partial)
    os.replace(partial, path)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


@contextmanager
def progress_bar(out, plan: Plan, todo: Sequence[Batch], *, every_s: float = 0.5):
    """One tqdm bar for the whole run (rank 0): generations done, generations per second, time left.

    It counts the batches whose results are on disk, whichever rank wrote them, from a thread
    that only reads the folder, so no rank waits for it.
    """
    from tqdm import tqdm

    todo = list(todo)
    stop = threading.Event()
    logged = not sys.stderr.isatty()  # a log file gets a line every 30 s, not a redraw every half second
    bar = tqdm(total=plan.items, initial=plan.items - sum(len(b.items) for b in todo), unit="gen", desc="probe",
               file=sys.stderr, dynamic_ncols=True, mininterval=30 if logged else every_s)

    def poll():
        left = list(todo)
        while left:
            stopping = stop.wait(every_s)
            finished = [b for b in left if part_done(out, b.index)]
            bar.update(sum(len(b.items) for b in finished))
            left = [b for b in left if b not in finished]
            if stopping:
                break

    watcher = threading.Thread(target=poll, name="probe-progress", daemon=True)
    watcher.start()
    try:
        yield bar
    finally:
        stop.set()
        watcher.join()
        bar.close()


def add_probe_command(subparsers) -> None:
    """Register the `probe` subcommand on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "probe",
        help="run the probe suite and write commit-order tables per regime",
        description="Run the six-regime probe suite (the commit-order study's) on a model, save every trace, "
        "and write per-regime tables (table.md, table.json) and the results as Parquet (results/) into --out. "
        "Rerunning skips batches already there. Under torchrun every process runs one model replica "
        "(docs/study-at-scale.md).",
    )
    parser.add_argument("--out", required=True, help="folder for traces and tables (created if missing)")
    parser.add_argument("--regimes", nargs="+", default=None, help="regimes to run (space or comma separated; default: all six)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per prompt, 0..N-1 (default 5)")
    parser.add_argument("--per-regime", type=int, default=None,
                        help=f"prompts per regime from the project's task families, both splits together (default {DEFAULT_PER_REGIME})")
    parser.add_argument("--prompts", default=None, metavar="FILE",
                        help="your own prompt set instead: .jsonl or .parquet with prompt, regime and optional answer, "
                        "or hf:<dataset> (see --columns)")
    parser.add_argument("--columns", nargs="+", default=None, metavar="FIELD=COLUMN",
                        help="map the set's columns to prompt, regime, answer, prompt_id, split (e.g. prompt=question)")
    parser.add_argument("--regime", default=None, help="with --prompts: the regime of rows that have none")
    parser.add_argument("--hf-config", default=None, help="with --prompts hf:<dataset>: the dataset's configuration")
    parser.add_argument("--hf-split", default="test", help="with --prompts hf:<dataset>: the split to read (default test)")
    parser.add_argument("--batch-size", default="1", metavar="B|auto",
                        help="generations per batch (default 1); auto: as many as the GPU's free memory holds. "
                        "Recorded in the plan: a rerun keeps it")
    parser.add_argument("--include-exploratory", action="store_true", help="also run and report the exploratory prompts")
    parser.add_argument("--model", default=None, help="model folder or hub id (default: the built-in model)")
    parser.add_argument("--backend", choices=backend_names(), default=None, help="default: picked from the model")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="output budget (default: the model's)")
    parser.add_argument("--steps", type=int, dest="max_denoising_steps", help="max denoising steps per block (default: the model's)")
    parser.add_argument("--bootstrap", type=int, default=N_RESAMPLES, help=f"bootstrap resamples (default {N_RESAMPLES})")
    parser.set_defaults(run=probe_command)


def probe_command(args) -> int:
    from cli import distributed

    try:
        probes, regimes, batch_size, settings = _probes_from_args(args)
    except CliError:
        if distributed.is_first_process():
            raise
        return 0  # under torchrun every process reads the flags; rank 0 alone says what is wrong (and fails)

    from prompts.probes import check_answer

    from backends import BUILTIN_MODEL_DIR, RANDOM_MODEL_DIR, BackendError, default_model, load_backend

    cluster = distributed.join_cluster()  # before the model loads: it picks this process's GPU
    say = print if cluster.is_writer else (lambda *a, **k: None)
    model = args.model or default_model()
    if model == str(RANDOM_MODEL_DIR):
        say(f"note: no trained model in {BUILTIN_MODEL_DIR}: using the untrained random model", file=sys.stderr)
    by_item = {item_of(p, s): p for p in probes for s in range(args.seeds)}
    try:
        backend = load_backend(model, backend=args.backend)
        limit = backend.capabilities.max_batch
        if batch_size != "auto" and limit is not None and batch_size > limit:
            raise CliError(f"the {backend.name} backend runs at most {limit} prompt(s) at a time: use --batch-size {limit}")
        say(f"probe: {len(probes)} prompts × {args.seeds} seeds on {backend.info.name} ({backend.info.device}), "
            f"{cluster.world_size} process{'es' if cluster.world_size > 1 else ''}", file=sys.stderr)

        def choose_batch_size() -> int:
            from backends.memory import CPU_AUTO_ROWS, rows_that_fit

            fit = rows_that_fit(backend)
            size = min(fit or CPU_AUTO_ROWS, len(probes), backend.capabilities.max_batch or len(probes))
            say(f"probe: --batch-size auto chose {size} rows "
                f"({'from free GPU memory' if fit else 'no GPU: the CPU default'}); recorded in the plan", file=sys.stderr)
            return size

        results = distributed.run_plan(
            cluster,
            prepare=lambda world: prepare_out(args.out, backend.info, settings, probe_items(probes, args.seeds),
                                              batch_size=batch_size, choose_batch_size=choose_batch_size, world_size=world),
            work=lambda mine, after_batch: run_batches(backend, mine, by_item, out=args.out, settings=settings,
                                                       check=check_answer, after_batch=after_batch),
            finish=lambda plan: finish_results(args.out, plan),
            watch=lambda plan, todo: progress_bar(args.out, plan, todo),
            describe=_describe,
        )
    except (BackendError, ProbeError, distributed.RunFailed) as exc:
        if cluster.is_writer:
            raise CliError(str(exc)) from None
        return 1  # rank 0 says what failed; a failing rank has said why in its own line
    except OSError as exc:
        raise CliError(f"cannot write to {args.out}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        raise CliError("interrupted; run the same command again to resume") from None
    finally:
        distributed.leave_cluster(cluster)
    if not cluster.is_writer:
        return 0
    tables = regime_tables(results, include_exploratory=args.include_exploratory, n_resamples=args.bootstrap)
    meta = {
        "model": backend.info.name,
        "source": backend.info.source,
        "split": "confirmatory + exploratory" if args.include_exploratory else "confirmatory",
        "seeds": args.seeds,
        "regimes": regimes,
        "prompts": args.prompts or f"the project's task families, {args.per_regime or DEFAULT_PER_REGIME} per regime",
        "settings": settings.to_dict(),
        "processes": cluster.world_size,
    }
    md, _ = write_tables(args.out, tables, meta, results)
    print(md.read_text(encoding="utf-8"))
    return 0


def _probes_from_args(args):
    """The probes to run, their regimes, the batch size (a number or "auto") and the settings; CliError
    for anything wrong in the flags or the prompt file."""
    from prompts.probes import REGIMES, probe_suite
    from prompts.sets import PromptSetError, load_prompt_set

    batch_size = _batch_size(args.batch_size)
    if batch_size is None:
        raise CliError(f"--batch-size must be a whole number of at least 1 or 'auto' (got {args.batch_size!r})")
    for name in ("seeds", "per_regime", "bootstrap"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise CliError(f"--{name.replace('_', '-')} must be at least 1")
    if args.prompts and args.per_regime is not None:
        raise CliError("--per-regime draws prompts from the project's task families; --prompts brings your own: use one")
    if not args.prompts and (args.columns or args.regime):
        raise CliError("--columns and --regime describe a --prompts file: give one with --prompts")
    settings = GenerationSettings(max_new_tokens=args.max_new_tokens, max_denoising_steps=args.max_denoising_steps)
    refuse_problems(settings.problems())
    if args.prompts:
        columns = dict(item.split("=", 1) for item in args.columns or () if "=" in item)
        if len(columns) != len(args.columns or ()):
            raise CliError("--columns takes FIELD=COLUMN pairs, e.g. prompt=question answer=answer")
        try:
            suite = load_prompt_set(args.prompts, columns=columns, regime=args.regime, config=args.hf_config, split=args.hf_split)
        except PromptSetError as exc:
            raise CliError(f"{args.prompts}: {exc}") from None
        regimes = list(dict.fromkeys(p.regime for p in suite))
        if args.regimes:
            wanted = [r for item in args.regimes for r in item.split(",") if r]
            suite, regimes = [p for p in suite if p.regime in wanted], [r for r in regimes if r in wanted]
    else:
        regimes = [r for item in (args.regimes or REGIMES) for r in item.split(",") if r]
        unknown = sorted(set(regimes) - set(REGIMES))
        if unknown:
            raise CliError(f"unknown regime(s): {', '.join(unknown)}; choose from {', '.join(REGIMES)}")
        regimes = list(dict.fromkeys(regimes))
        try:
            suite = probe_suite(regimes, per_regime=args.per_regime or DEFAULT_PER_REGIME)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    probes = [p for p in suite if args.include_exploratory or p.split == SPLIT_CONFIRMATORY]
    if not probes:
        raise CliError("no prompts to run: the selected regimes have no confirmatory prompts (try --include-exploratory)")
    return probes, regimes, batch_size, settings


def _batch_size(text: str):
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 else None


def _describe(batches: Sequence[Batch]) -> str:
    """The items of unfinished batches, for a failing rank's message (the first few, then a count)."""
    items = [item for b in batches for item in b.items]
    if not items:
        return "no batches"
    shown = ", ".join(items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")
    return f"batches {', '.join(str(b.index) for b in batches[:6])}{' ...' if len(batches) > 6 else ''} ({shown})"
