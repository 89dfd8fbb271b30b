"""The probe runner: plan the batches, generate them, save traces and result rows, resume.

    results = run_probe(backend, probes, seeds=5, out="runs/probe", check=check_answer, batch_size=8)

`run_probe` is the one-process form; the `probe` command (cli/probe.py) runs the same pieces
through `cli.distributed.run_plan`: `prepare_out` writes the plan into OUT/probe.json (or checks
an existing one) and lists the unfinished batches, `run_batches` works through a plain list of
batches, `finish_results` joins every batch's Parquet rows and reads them back for the tables.
Nothing here knows how many processes there are.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq

from backends.run import record_batch, record_trace
from visualizer.batch_cost import COST_COLUMNS, BatchCost, batch_cost, cost_summary, describe, refilled_cost
from visualizer.files import write_atomically
from visualizer.metrics import run_metrics
from visualizer.plan import REFILL_EXACT, Batch, Plan, item_id, make_plan
from visualizer.probe_tables import MANIFEST, ProbeError, ProbeResult, result_from_trace, score
from visualizer.results import merge_parts, part_done, part_path, read_results, result_rows, write_part
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace


# A new plan's batch order.  "length" (visualizer.plan) wasted no less on the built-in model (BENCHMARKS.md, "Rows
# that finished early"): its rows' steps scatter within a regime, so the suite's order stays the default.
DEFAULT_ORDER = "suite"


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
    batch_order: str | None = None,
) -> list[ProbeResult]:
    """Generate every (probe, seed) pair not already in `out` in one process; every result, in plan order.

    `check(probe, response) -> bool | None` scores a response.  The command line runs the same
    steps through `cli.distributed.run_plan`, on one process or many.  It starts a writer process
    (`run_batches`), so a script that calls it needs Python's `if __name__ == "__main__":` guard.
    """
    settings = settings or GenerationSettings()
    plan, todo = prepare_out(out, backend.info, settings, probe_items(probes, seeds), batch_size=batch_size,
                             batch_order=batch_order, lengths=prompt_lengths(probes))
    run_batches(backend, todo, {item_of(p, s): p for p in probes for s in range(seeds)},
                out=out, settings=settings, check=check, plan_rows=plan.batch_size, order=plan.order)
    return finish_results(out, plan)


def probe_items(probes: Sequence, seeds: int) -> list[tuple[str, str, int]]:
    """(regime, prompt_id, seed) of every generation: seed 0 of every probe first, then seed 1, ..."""
    return [(p.regime, p.prompt_id, seed) for seed in range(seeds) for p in probes]


def prompt_lengths(probes: Sequence) -> dict[tuple[str, str], int]:
    """Each prompt's length in characters: the "length" batch order's estimate within a regime."""
    return {(p.regime, p.prompt_id): len(p.prompt) for p in probes}


def item_of(probe, seed: int) -> str:
    return item_id(probe.regime, probe.prompt_id, seed)


def trace_file(probe, seed: int) -> str:
    """Where a generation's trace is saved, relative to OUT."""
    return _trace_file_of(item_of(probe, seed))


def prepare_out(out, info, settings: GenerationSettings, items: list, *, batch_size, choose_batch_size=None,
                world_size: int = 1, batch_order: str | None = None,
                lengths: dict | None = None) -> tuple[Plan, list[Batch]]:
    """Write OUT/probe.json with the plan, or check an existing one; the plan and its unfinished batches.

    `batch_size` is a number, or "auto": then an existing plan's size is kept, and a new plan
    takes `choose_batch_size()`.  `batch_order` is one of visualizer.plan.ORDERS, or None: an
    existing plan's order, else DEFAULT_ORDER (`lengths` feeds the "length" order).  A rerun must
    make the same plan: the traces depend on it.
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
    order = batch_order or (recorded.order if recorded is not None else DEFAULT_ORDER)
    plan = make_plan(items, batch_size=batch_size, order=order, lengths=lengths)
    if recorded is not None and recorded != plan:
        raise ProbeError(
            f"{out} holds a run planned as {len(recorded.batches)} batches of up to {recorded.batch_size} rows "
            f"in {recorded.order} order ({recorded.items} generations); this command plans {len(plan.batches)} of up "
            f"to {plan.batch_size} in {plan.order} order ({plan.items}). The traces depend on the plan: rerun with "
            "the same flags, or choose another --out"
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
    write_atomically(path, lambda partial: partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8"))
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


WRITER_BACKLOG = 2  # batches handed to the writer and not yet on disk before the runner waits for it
BATCHES_AHEAD = 1  # batches started while one generates (they queue on the model's thread)


def run_batches(backend, batches: Sequence[Batch], probes: dict, *, out, settings: GenerationSettings,
                check: Callable, plan_rows: int | None = None, order: str = "suite",
                after_batch: Callable[[], None] = lambda: None,
                on_generated: Callable[[Callable[[], None]], None] = lambda settle: None) -> None:
    """Generate each batch, save its traces and its result rows (see visualizer.results).

    `probes` maps item ids to probes.  The runner's own work stays off the model's path:
    - the next batch is started while one generates (`_generated`): on a backend whose runs queue
      on one model thread (`runs_in_order`), the model goes from one batch to the next without
      waiting for this loop, and the next batch's tokens, pieces and RunStart are made meanwhile;
    - the host-side work of a batch (checking the answers, saving traces, metrics, Parquet) runs in
      a writer process, waited for only when WRITER_BACKLOG batches queue there, and at the end.
      Not a thread: that work is Python, and on a thread it held the interpreter lock the model's
      own thread needs to launch each step (BENCHMARKS.md).  A checker that cannot be sent to that
      process (a lambda, a closure) runs here instead.
    At most BATCHES_AHEAD + 1 batches generate and WRITER_BACKLOG + 1 wait to be written, so memory
    stays bounded.  `plan_rows` is the plan's batch size: a compiled run fills a shorter batch up to
    it (`filled_prompts`), so the whole run meets one batch shape, compiled once.  `order`, the plan's: in the
    "refill" orders each batch's generations run through the refilling loop on `plan_rows` rows
    (backends/refill.py), each trace that of its generation alone ("refill") or its pass batched ("refill-batched").  A row without an
    answer, or whose checker raises, is saved unscored with the reason (`visualizer.probe_tables.score`).
    `after_batch()` runs once a batch's rows are on disk, in plan order; `on_generated(settle)` once
    a batch is generated, before it is saved (nothing after it is on disk then: where the resume test
    kills a worker), and `settle()` there waits until every batch before it is on disk.  A failure
    raises ProbeError naming the batch and its items.
    """
    out = Path(out)
    check_there = _can_send(check)
    with _writer_process() as writer, _generated(backend, batches, probes, settings, plan_rows, order) as generated:
        pending: deque = deque()
        for batch, rows, traces, cost in generated:
            # `settle()` waits until every earlier batch is on disk (a test's kill point uses it)
            on_generated(lambda: _written(pending, after_batch, keep=0))
            _check_finished(backend, batch, traces, settings)
            verdicts = None if check_there else [score(check, p, t.end.text) for p, t in zip(rows, traces)]
            pending.append(writer.submit(_save_batch, out, batch, rows, traces, check if check_there else None, verdicts,
                                         cost))
            _written(pending, after_batch, keep=WRITER_BACKLOG)
        _written(pending, after_batch, keep=0)


def _check_finished(backend, batch: Batch, traces: list[Trace], settings: GenerationSettings) -> None:
    for item, trace in zip(batch.items, traces):
        if trace.end is not None and trace.end.finish_reason == "cancelled":
            raise KeyboardInterrupt  # Ctrl-C: record_batch ended the run; the command says how to resume
        if trace.end is None or trace.end.finish_reason not in ("eos", "length"):
            reason = (trace.end.error or trace.end.finish_reason) if trace.end else "no end record"
            raise ProbeError(f"batch {batch.index} ({', '.join(batch.items)}): {item} did not finish: "
                             f"{reason}{_fit_hint(backend, batch, reason, settings)}")


def _written(pending: deque, after_batch: Callable[[], None], *, keep: int) -> None:
    """Take the writer's finished batches in order (a writer failure is raised here); wait only
    while more than `keep` are left."""
    while pending and (pending[0].done() or len(pending) > keep):
        pending.popleft().result()
        after_batch()


@contextmanager
def _generated(backend, batches: Sequence[Batch], probes: dict, settings: GenerationSettings, plan_rows: int | None,
               order: str = "suite"):
    """(batch, probes, traces, cost) of each batch in plan order, the next ones started while one generates;
    `cost` counts every row the model ran, a filler row's too (visualizer.batch_cost); a refilled batch's, the
    row-passes its loop ran.

    Only where the backend's runs queue on one model thread (`runs_in_order`): elsewhere (a new
    thread per run) two batches would run at once, and one at a time is the only safe way.  Ctrl-C
    or an error stops the batches already started at their next step; they are waited for, so no
    run outlives this."""
    stop = threading.Event()

    def record(batch: Batch):
        chosen = [probes[item] for item in batch.items]
        if order in REFILL_EXACT:
            traces, row_passes = backend.record_refilled([p.prompt for p in chosen], [batch.seed] * len(chosen),
                                                         settings, rows=plan_rows or 1, stop=stop,
                                                         exact=REFILL_EXACT[order])
            return batch, chosen, traces, refilled_cost(row_passes)
        prompts = filled_prompts([p.prompt for p in chosen], plan_rows, settings)
        traces = _record_batch(backend, prompts, settings.replace(seed=batch.seed), stop)
        return batch, chosen, traces[:len(chosen)], batch_cost(traces)  # a filler row's trace is dropped

    if not getattr(backend, "runs_in_order", False):
        yield (record(batch) for batch in batches)
        return
    ahead: deque = deque()
    with ThreadPoolExecutor(max_workers=BATCHES_AHEAD + 1, thread_name_prefix="probe-batch") as pool:
        def results():
            for batch in batches:
                ahead.append(pool.submit(record, batch))
                if len(ahead) > BATCHES_AHEAD:
                    yield ahead.popleft().result()
            while ahead:
                yield ahead.popleft().result()

        try:
            yield results()
        finally:
            stop.set()  # batches still going end at their next step ("cancelled"), then the pool joins them
            for future in ahead:
                future.cancel()


def _can_send(check: Callable) -> bool:
    """Whether the checker can run in the writer process (it must pickle: a module-level function)."""
    try:
        pickle.dumps(check)
    except Exception:  # noqa: BLE001 -- lambdas, closures, local classes: pickle's errors vary
        return False
    return True


@contextmanager
def _writer_process():
    """One process that saves batches, started fresh ("spawn": this one may hold CUDA and threads)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_writer_setup, initargs=(os.getpid(),)) as writer:
        writer.submit(_save_batch_imports)  # started now: its imports overlap the first batch, not the second
        yield writer


def _save_batch_imports() -> None:
    """The writer's first job: load what saving a batch needs (pyarrow, scipy) before a batch waits on it."""
    import pyarrow.parquet  # noqa: F401
    import scipy.stats  # noqa: F401


def _writer_setup(runner_pid: int) -> None:
    """In the writer: Ctrl-C reaches every process of the terminal, and the writer lets the runner
    decide (it finishes its batch, the runner stops); and a writer whose runner died (killed, as
    torchrun's restart test does) exits instead of living on, holding the launcher's output pipes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == runner_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="runner-watch", daemon=True).start()


def filled_prompts(prompts: list[str], rows: int | None, settings: GenerationSettings) -> list[str]:
    """A batch's prompts as the model runs them: on the compiled path, a batch shorter than the plan's
    `rows` (each seed's last batch) gets copies of its last prompt up to `rows`, whose traces are
    dropped.  A compiled `generate` specializes on the number of rows, and a new one costs a compile
    (minutes at the real shape: a 4-H100 slice stalled 240 s at each seed's 6-row batch), so a run
    meets one batch shape per length bucket; the last prompt's copies keep the batch's padded length.
    Filled, a short batch is still planned alike on every rank and every rerun, so its traces are too
    (its RunStarts record the batch as the model ran it: `size` counts the fillers).  Eager runs
    are not filled: every shape runs without compiling."""
    if not settings.compiled or rows is None or len(prompts) >= rows:
        return prompts
    return prompts + [prompts[-1]] * (rows - len(prompts))


def _record_batch(backend, prompts: list[str], settings: GenerationSettings, stop: threading.Event) -> list[Trace]:
    """One trace per prompt, generated as one batch (a batch of one is exactly record_trace's run)."""
    if len(prompts) == 1:
        return [record_trace(backend, prompts[0], settings, stop=stop)]
    return record_batch(backend, prompts, settings, stop=stop)


def _fit_hint(backend, batch: Batch, reason: str, settings: GenerationSettings) -> str:
    """For an out-of-memory error: the largest batch that fits now (the plan itself never changes)."""
    if "out of" not in reason.lower() or "memory" not in reason.lower():
        return ""
    from backends.memory import rows_that_fit

    fit = rows_that_fit(backend, shift=settings.record_shift, compiled=settings.compiled)
    if fit is None:
        return ""
    return (f" (the largest batch that fits this GPU now is about {fit} rows: start a new --out with "
            f"--batch-size {fit}; this run's plan stays at {len(batch.items)} rows)")


def _save_batch(out: Path, batch: Batch, probes: list, traces: list[Trace], check: Callable | None,
                verdicts: list | None, cost: BatchCost) -> None:
    """In the writer process: score each answer (unless `verdicts` came with the batch), save each
    trace, then the batch's result rows (last: they mark it done)."""
    generations, positions = [], []
    for row, (probe, trace) in enumerate(zip(probes, traces)):
        relative = trace_file(probe, batch.seed)
        write_atomically(out / relative, trace.save)  # an interrupted run never leaves half a trace behind
        verdict = verdicts[row] if verdicts is not None else score(check, probe, trace.end.text)
        metrics = run_metrics(trace)
        result = result_from_trace(probe, batch.seed, trace, relative, check, metrics=metrics, verdict=verdict, cost=cost)
        generation, rows = result_rows(result, metrics, trace, batch=batch.index, row=row, batch_rows=len(batch.items))
        generations.append(generation)
        positions.extend(rows)
    write_part(out, batch.index, generations, positions)


def finish_results(out, plan: Plan) -> list[ProbeResult]:
    """Join every batch's rows into OUT/results/*.parquet and read the generations back from it; the
    decoder passes needed and run, per batch and in all, go into OUT/probe.json ("decoder_passes")."""
    generations, _ = merge_parts(out, [b.index for b in plan.batches])
    record_cost(out, cost_summary(_cost_rows(generations)))
    return read_results(out)


def _cost_rows(path: Path) -> list[dict]:
    """The cost columns of a generations Parquet file; none from one written before they existed."""
    table = pq.read_table(path)
    return table.select(list(COST_COLUMNS)).to_pylist() if set(COST_COLUMNS) <= set(table.column_names) else []


def record_cost(out, summary: dict) -> None:
    """Write a finished run's cost (batch_cost.cost_summary) into its manifest (rank 0 alone, at the end)."""
    path = Path(out) / MANIFEST
    manifest = _read_manifest(path) | {"decoder_passes": summary}
    write_atomically(path, lambda partial: partial.write_text(json.dumps(manifest, indent=1), encoding="utf-8"))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(name))


@contextmanager
def progress_bar(out, plan: Plan, todo: Sequence[Batch], *, every_s: float = 0.5):
    """One tqdm bar for the whole run (rank 0): generations done, generations per second, time left,
    and the useful fraction of the decoder passes so far (visualizer.batch_cost); at the end, one line
    with the useful fraction of the batches this run generated.

    It counts the batches whose results are on disk, whichever rank wrote them, from a thread
    that only reads the folder, so no rank waits for it.
    """
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: this bar is redrawn by `poll`, and a finished run leaves no thread
    todo = list(todo)
    stop = threading.Event()
    logged = not sys.stderr.isatty()  # a log file gets a line every 30 s, not a redraw every half second
    bar = tqdm(total=plan.items, initial=plan.items - sum(len(b.items) for b in todo), unit="gen", desc="probe",
               file=sys.stderr, dynamic_ncols=True, mininterval=30 if logged else every_s)

    costs: list[dict] = []  # the cost columns of every generation this run finished

    def poll():
        left = list(todo)
        while left:
            stopping = stop.wait(every_s)
            finished = [b for b in left if part_done(out, b.index)]
            for b in finished:
                costs.extend(_cost_rows(part_path(out, b.index)))
            fraction = cost_summary(costs)["useful_fraction"] if finished else None
            if fraction is not None:
                bar.set_postfix_str(f"useful {fraction:.2f}", refresh=False)
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
        if costs:
            print(f"probe: {describe(cost_summary(costs))}", file=sys.stderr)
