"""`probe` runs the study's six regimes on a model, saves every trace and writes the per-regime tables.

    python -m visualizer probe --regimes math json --seeds 5 --out runs/probe
    python -m visualizer probe --per-regime 500 --batch-size auto --out runs/big       # one GPU
    torchrun --nproc-per-node 4 -m visualizer probe --per-regime 500 --batch-size auto --out runs/big
    python -m visualizer probe --prompts gsm8k.jsonl --columns prompt=question --regime math --out runs/gsm

The statistics and tables live in `visualizer.probe_tables` (they work on traces alone); the runner in
`cli.probe_runner`: it plans the batches (`visualizer.plan`, written into OUT/probe.json before the
first generation), drives a backend through a plain list of batches, saves traces and result rows
atomically (`visualizer.results`), resumes, and refuses an OUT made with another model, other
settings or another plan.  Which process runs which batch is `cli.distributed`'s business alone;
this module reads the flags and the prompt set and puts the three together.  docs/study-at-scale.md
says how to run it on one GPU, one host or several.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from backends.base import BackendError
from backends.registry import backend_names
from visualizer.metrics.stats import N_RESAMPLES
from visualizer.plan import ORDERS, REFILL_EXACT, Batch
from visualizer.probe_tables import SPLIT_CONFIRMATORY, ProbeError, regime_tables, sampler_comparison_markdown, write_tables
from visualizer.study_figures import write_figures

from .common import CliError, add_knob_arguments, refuse_problems, settings_from_args
from .probe_intervene import add_intervene_arguments, read_intervene, run_pairs, write_pairs
from .report import SIDE_BY_SIDE, draw_figures
from .probe_runner import finish_results, item_of, prepare_out, probe_items, progress_bar, prompt_lengths, run_batches

DEFAULT_PER_REGIME = 20  # the study's 20 prompts a regime (10 confirmatory)


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
    parser.add_argument("--batch-order", choices=ORDERS, default=None,
                        help="which generations share a batch: suite (default for a new run: the suite's order) or length "
                        "(each regime's prompts together, shortest first, so rows of about one expected length share a "
                        "batch and fewer finished rows wait for the slowest) or refill (eager: a row whose generation ended "
                        "takes the next one at once, each trace that of its generation run alone) or refill-batched (the same loop, its "
                        "whole pass batched: faster on a GPU, each trace then depends on its batch as suite's do). "
                        "Recorded in the plan: "
                        "a rerun keeps it")
    parser.add_argument("--include-exploratory", action="store_true", help="also run and report the exploratory prompts")
    parser.add_argument("--model", default=None, help="model folder or hub id (default: the built-in model)")
    parser.add_argument("--backend", choices=backend_names(), default=None, help="default: picked from the model")
    parser.add_argument("--samplers", nargs="+", default=None,
                        help="run the same generations under each of these samplers (or 'all': every one the backend runs), "
                        "each into OUT/<sampler>/ with its own tables, and write OUT/samplers.md side by side")
    parser.add_argument("--bootstrap", type=int, default=N_RESAMPLES, help=f"bootstrap resamples (default {N_RESAMPLES})")
    # --samplers and --seeds above say those; a probe is of stock runs: no pins, and its tables read no layers
    add_knob_arguments(parser, skip=("sampler", "seed", "pins", "layers"))
    add_intervene_arguments(parser)
    parser.set_defaults(run=probe_command)


def probe_command(args) -> int:
    from cli import distributed

    try:
        probes, regimes, batch_size, settings = _probes_from_args(args)
        intervene = read_intervene(args)
    except CliError:
        if distributed.is_first_process():
            raise
        return 0  # under torchrun every process reads the flags; rank 0 alone says what is wrong (and fails)

    from prompts.probes import check_answer

    from backends import BUILTIN_MODEL_DIR, RANDOM_MODEL_DIR, default_model, load_backend

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

            fit = rows_that_fit(backend, shift=settings.record_shift, compiled=settings.compiled)
            size = min(fit or CPU_AUTO_ROWS, len(probes), backend.capabilities.max_batch or len(probes))
            say(f"probe: --batch-size auto chose {size} rows "
                f"({'from free GPU memory' if fit else 'no GPU: the CPU default'}); recorded in the plan", file=sys.stderr)
            return size

        def run(out, run_settings):
            """One resumable probe run into `out` (the plan, the batches, the results); rank 0's results."""
            return distributed.run_plan(
                cluster,
                prepare=lambda world: prepare_out(out, backend.info, run_settings, probe_items(probes, args.seeds),
                                                  batch_size=batch_size, choose_batch_size=choose_batch_size, world_size=world,
                                                  batch_order=args.batch_order, lengths=prompt_lengths(probes)),
                work=lambda plan, mine, kill_hook: run_batches(backend, mine, by_item, out=out, settings=run_settings,
                                                               check=check_answer, plan_rows=plan.batch_size,
                                                               order=plan.order, on_generated=kill_hook),
                finish=lambda plan: finish_results(out, plan),
                watch=lambda plan, todo: progress_bar(out, plan, todo),
                describe=_describe,
            )

        if args.samplers:
            specs = _samplers(backend, args.samplers)
            by_sampler = {}
            for spec in specs:
                say(f"sampler {spec.name}:", file=sys.stderr)
                folder = Path(args.out) / _safe(spec.name)
                sampler_settings = settings.replace(sampler=spec.name)
                results = run(folder, sampler_settings)
                if cluster.is_writer:
                    by_sampler[spec.name] = _write_tables(folder, results, args, backend, regimes, sampler_settings, cluster,
                                                          sampler=spec.name, show=False)
            if cluster.is_writer:
                _write_sampler_comparison(Path(args.out), backend, specs, by_sampler, args.seeds)
                split = "confirmatory + exploratory" if args.include_exploratory else "confirmatory"
                write_figures(Path(args.out), by_sampler, prefix=SIDE_BY_SIDE, split=split)
            return 0
        results = run(args.out, settings)
        if intervene:  # every rank forks its share of the generations rank 0's results name
            pairs = run_pairs(backend, args.out, cluster.share(results), by_item, intervene, check_answer, cluster)
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
    _write_tables(args.out, results, args, backend, regimes, settings, cluster)
    if intervene:
        print(write_pairs(args.out, intervene, *pairs, n_resamples=args.bootstrap))
    return 0


def _write_tables(out, results, args, backend, regimes, settings, cluster, *, sampler=None, show=True):
    """The per-regime tables of one run (rank 0), written into `out`; printed unless `show` is False."""
    tables = regime_tables(results, include_exploratory=args.include_exploratory, n_resamples=args.bootstrap)
    meta = {
        "model": backend.info.name,
        "source": backend.info.source,
        **({"sampler": sampler} if sampler else {}),
        "split": "confirmatory + exploratory" if args.include_exploratory else "confirmatory",
        "seeds": args.seeds,
        "regimes": regimes,
        "prompts": args.prompts or f"the project's task families, {args.per_regime or DEFAULT_PER_REGIME} per regime",
        "settings": settings.to_dict(),
        "processes": cluster.world_size,
    }
    md, _ = write_tables(out, tables, meta, results)
    draw_figures(Path(out), {"": tables}, include_exploratory=args.include_exploratory)  # beside reliability.svg
    if show:
        print(md.read_text(encoding="utf-8"))
    failed = [r for r in results if (r.unscored or "").startswith("the answer checker failed")]
    if failed:  # the run went on; say so once, where the reasons are
        print(f"note: the answer checker failed on {len(failed)} generation(s) (first: {failed[0].regime}/"
              f"{failed[0].prompt_id} seed {failed[0].seed}): left unscored, the reasons in the 'unscored' column "
              f"of {Path(out) / 'results' / 'generations.parquet'}", file=sys.stderr)
    return tables


def _samplers(backend, names_given):
    """The samplers `--samplers` names ('all': every one the backend runs); CliError for one it lacks."""
    names = [n for item in names_given for n in item.split(",") if n]
    if names == ["all"]:
        return list(backend.capabilities.samplers)
    try:
        return [backend.capabilities.sampler(n) for n in names]
    except BackendError as exc:
        raise CliError(str(exc)) from None


def _write_sampler_comparison(out: Path, backend, specs, by_sampler, seeds: int) -> None:
    """OUT/samplers.md: the samplers' tables side by side, with each sampler's note."""
    notes = "".join(f"- **{spec.name}**: {spec.note}\n" for spec in specs)
    text = (f"# Samplers side by side: {backend.info.name}, {seeds} seed(s) per prompt\n\n"
            + sampler_comparison_markdown(by_sampler) + "\n" + notes
            + "\nEach sampler's full table, structure first and reliability curve: OUT/<sampler>/table.md and reliability.svg; "
            "the samplers side by side: samplers-tau_b.svg and samplers-tokens_per_step.svg (and .png).\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "samplers.md").write_text(text, encoding="utf-8")
    print(text)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


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
    settings = settings_from_args(args)
    refuse_problems(settings.problems())
    if args.batch_order in REFILL_EXACT and settings.compiled:
        raise CliError(f"--batch-order {args.batch_order} runs eager (a compiled graph keeps its batch shape): leave out --compiled")
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
