"""The probe at scale on the GPU machine: batched vs batch-1 runner, capture vs stock, 4 GPUs vs 1, a 1,000-generation slice.

    python -m benchmarks.bench_probe_scale single --out /tmp/bench                    # one GPU: runner, capture, rows
    torchrun --nproc-per-node 4 -m benchmarks.bench_probe_scale slice --out /tmp/bench --items 1000
    python -m benchmarks.bench_probe_scale report /tmp/bench                          # the markdown tables
    python -m benchmarks.bench_probe_scale single --device cpu --layers 2 --experts 8 --vocab 8192 --batch 2 \\
        --batch1-items 2 --items 4 --try-rows 0 --steps 4 --out /tmp/dry                # dry run on a CPU
    python benchmarks/bench_probe_scale.py single --device cpu --model assets/models/diffusiongemma-tiny-demo \\
        --batch 8 --items 48 --try-rows "" --out /tmp/tiny                               # the runner on a CPU

The model is the real 26B-A4B shape with random bf16 weights, built per process without holding two
copies (benchmarks/bench_capture_fullshape.py); random weights never converge and its EOS logits
are zeroed, so every block runs all `--steps` (48) steps.  The prompts are the probe suite's
(confirmatory half), tokenized by the built-in model's tokenizer and chat template; the runner is
the probe command's own code (cli.probe_runner: plan, record_batch, writer process, Parquet parts;
cli.distributed.run_plan), so the numbers include everything a real run does on the host.

`single` (one process, one GPU), every figure measured in this one call:
- the batch-1 runner (plan batch size 1: today's one-prompt-at-a-time runner) on `--batch1-items`
  generations, against the batched runner (`--batch` rows) on `--items`: generations per second;
- the capture at that batch: `record_batch` against stock `model.generate` on the same padded
  batch and seed, alternating `--reps` times, with a check that the sequences are identical;
- rows per GPU: stock batched generate at each of `--try-rows`, peak memory or out of memory,
  beside backends.memory's estimate of the rows that fit.
`slice` (under torchrun, one process per GPU): the probe runner over `--items` generations, dealt
to every GPU from one plan; rank 0 reports generations per second, the time to merge the results
and compute the tables, and the rows pandas reads from results/generations.parquet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "models" / "diffusiongemma-tiny-demo"


def full_shape_backend(args):
    """The transformers backend around the full-shape random model, built on this process's GPU
    (or, with --model, a saved model folder loaded as the probe loads it)."""
    import torch

    if args.model:
        from backends.transformers_backend import TransformersBackend

        return TransformersBackend(args.model, device=args.device)
    from backends.transformers_backend import TransformersBackend, load_tokenizer
    from benchmarks.bench_capture_fullshape import build, full_shape_config
    from visualizer.records import ModelInfo

    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    model.generation_config.max_denoising_steps = args.steps
    info = ModelInfo(
        name=f"random {params / 1e9:.1f}B (26B-A4B shape)", source="random-full-shape", backend="transformers",
        device=str(model.device), dtype=str(model.dtype).replace("torch.", ""), canvas_length=256,
        vocab_size=args.vocab, eos_token_ids=(1, 106), pad_token_id=0, max_context=8192, parameters=params,
    )
    torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    return TransformersBackend.from_model(model, load_tokenizer(str(BUILTIN)), info)  # no from_pretrained: built here


def probes_and_settings(args):
    from prompts.probes import probe_suite
    from visualizer.settings import GenerationSettings

    per_regime = max(20, -(-args.items // (6 * args.seeds)) * 2 + 2)  # confirmatory half: enough prompts a regime
    probes = [p for p in probe_suite(per_regime=per_regime) if p.split == "confirmatory"]
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=args.steps, compiled=args.compiled,
                                  record_shift=not getattr(args, "no_shift", False))
    return probes, settings


def warm_up_compiled(backend, probes, settings, sizes) -> dict:
    """Compiled only: at each batch size, two untimed batches of different prompt lengths.

    torch.compile specializes on the first prompt length it sees, recompiles once at the second
    and marks that length dynamic (automatic dynamic shapes), after which prompts of any length run
    without compiling again (checked on CPU: 92 s and 62 s for the first two lengths, 0.3 s for the
    next ones). A long probe run pays this once per batch size; the timed runs here measure the
    steady state after it. Returns the seconds each size took to warm up."""
    from backends.run import record_batch, record_trace

    if not settings.compiled:
        return {}
    by_length = sorted(probes, key=lambda p: len(backend.prompt_ids(p.prompt)))
    seconds = {}
    for size in sizes:
        started = time.perf_counter()
        for chosen in (by_length[:size], by_length[-size:]):
            prompts = [p.prompt for p in chosen]
            traces = [record_trace(backend, prompts[0], settings)] if size == 1 else record_batch(backend, prompts, settings)
            assert all(t.end.finish_reason in ("eos", "length") for t in traces), traces[0].end
        seconds[size] = time.perf_counter() - started
        print(f"compiled warm-up at batch {size}: {seconds[size]:.0f} s", flush=True)
    return seconds


def run_runner(backend, probes, settings, *, seeds: int, items: int, batch: int, out: Path, cluster=None,
               progress: bool = False) -> dict:
    """The probe command's runner (prepare, run_batches, finish) over the first `items` generations; with
    `progress`, each rank prints its batches on disk and the seconds since it began (a rate, even from a run
    stopped by a time limit before its report)."""
    import torch

    from cli import distributed
    from cli.probe_runner import finish_results, item_of, prepare_out, probe_items, run_batches
    from prompts.probes import check_answer

    chosen = probe_items(probes, seeds)[:items]
    by_item = {item_of(p, s): p for p in probes for s in range(seeds)}
    cluster = cluster or distributed.Cluster(0, 1, 0)
    marks = {}

    def finish(plan):
        marks["work_done"] = time.perf_counter()
        results = finish_results(out, plan)
        marks["finished"] = time.perf_counter()
        return results

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    results = distributed.run_plan(
        cluster,
        prepare=lambda world: prepare_out(out, backend.info, settings, chosen, batch_size=batch, world_size=world),
        work=lambda plan, mine, after: run_batches(backend, mine, by_item, out=out, settings=settings, check=check_answer,
                                                   plan_rows=plan.batch_size,
                                             after_batch=_counted(after, cluster.rank, started) if progress else after),
        finish=finish,
    )
    if not cluster.is_writer:
        return {}
    work_s = marks["work_done"] - started
    return dict(generations=len(chosen), batch=batch, processes=cluster.world_size, work_s=work_s,
                generations_per_s=len(chosen) / work_s, finish_s=marks["finished"] - marks["work_done"],
                results=len(results), peak_gib=_peak())


def _counted(after, rank: int, started: float):
    written = [0]

    def after_batch(*args):
        after(*args)
        written[0] += 1
        print(f"rank {rank}: {written[0]} batches on disk at {time.perf_counter() - started:.1f} s", flush=True)
    return after_batch


def _peak() -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else float("nan")


def cuda_sync():
    """Wait for the GPU (a no-op on a CPU): timings end when the device work has."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def capture_vs_stock(backend, probes, settings, *, batch: int, reps: int) -> dict:
    """record_batch against stock generate on the same batch and seed, alternating."""
    import torch

    from backends.run import record_batch
    prompts = [p.prompt for p in probes[:batch]]
    resolved = backend.resolve(settings)
    rows = [backend.prompt_ids(p) for p in prompts]
    input_ids, mask = backend.model_inputs(rows, resolved, backend.model.device)  # compiled: the bucket's padding
    kwargs = backend.generate_kwargs(resolved)
    if mask is not None:
        kwargs["attention_mask"] = mask

    def stock(seed):
        def run():  # on the backend's generation thread, as its captured runs: one set of CUDA graphs
            torch.manual_seed(seed)
            cuda_sync()
            t = time.perf_counter()
            out = backend.model.generate(input_ids, **kwargs)
            cuda_sync()
            return time.perf_counter() - t, out.sequences[:, -256:].cpu()

        return backend.on_model_thread(run).result()

    def captured(seed):
        cuda_sync()
        t = time.perf_counter()
        traces = record_batch(backend, prompts, settings.replace(seed=seed))
        cuda_sync()
        return time.perf_counter() - t, traces

    _, reference = stock(11)
    _, traces = captured(11)
    identical = all(list(t.blocks[0].tokens) == reference[i].tolist() for i, t in enumerate(traces))
    times = {"stock": [], "captured": []}
    for rep in range(reps):
        for name in (("stock", "captured") if rep % 2 == 0 else ("captured", "stock")):
            seconds, _ = (stock if name == "stock" else captured)(rep)
            times[name].append(seconds)
    stock_s, captured_s = statistics.median(times["stock"]), statistics.median(times["captured"])
    return dict(batch=batch, reps=reps, stock_s=stock_s, captured_s=captured_s, ratio=captured_s / stock_s,
                identical=identical, stock_all=times["stock"], captured_all=times["captured"])


def planned_prompts(probes, settings, *, seeds: int, items: int, batch: int):
    """(batch of the plan, its prompts as the runner runs them) for the runner's plan of the first `items`
    generations: a compiled run's shorter batches filled to `batch` rows, as `cli.probe_runner` fills them."""
    from cli.probe_runner import filled_prompts, item_of, probe_items
    from visualizer.plan import make_plan

    by_item = {item_of(p, s): p for p in probes for s in range(seeds)}
    for planned in make_plan(probe_items(probes, seeds)[:items], batch_size=batch).batches:
        yield planned, filled_prompts([by_item[item].prompt for item in planned.items], batch, settings)


def stock_over_plan(backend, probes, settings, *, seeds: int, items: int, batch: int) -> float:
    """Seconds stock batched `generate` takes over the very batches the runner ran (same prompts,
    same padding, same seeds): the runner's own cost is its time over this one."""
    import torch

    kwargs = backend.generate_kwargs(backend.resolve(settings))
    total = 0.0
    for planned, prompts in planned_prompts(probes, settings, seeds=seeds, items=items, batch=batch):
        ids = [backend.prompt_ids(prompt) for prompt in prompts]
        input_ids, mask = backend.model_inputs(ids, backend.resolve(settings), backend.model.device)

        def run():
            torch.manual_seed(planned.seed)
            cuda_sync()
            started = time.perf_counter()
            backend.model.generate(input_ids, **kwargs, **({"attention_mask": mask} if mask is not None else {}))
            cuda_sync()
            return time.perf_counter() - started

        total += backend.on_model_thread(run).result()
    return total


def try_rows(backend, probes, settings, rows_list) -> list[dict]:
    """Stock batched generate at each row count: peak memory, or the out-of-memory error."""
    import torch

    out = []
    for rows in rows_list:
        prompts = [probes[i % len(probes)].prompt for i in range(rows)]
        ids = [backend.prompt_ids(p) for p in prompts]
        input_ids, mask = backend.model_inputs(ids, backend.resolve(settings), backend.model.device)
        kwargs = backend.generate_kwargs(backend.resolve(settings))
        if mask is not None:
            kwargs["attention_mask"] = mask
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            torch.manual_seed(0)
            t = time.perf_counter()
            backend.model.generate(input_ids, **kwargs)
            cuda_sync()
            out.append(dict(rows=rows, fits=True, peak_gib=_peak(), seconds=time.perf_counter() - t))
        except torch.cuda.OutOfMemoryError as exc:
            out.append(dict(rows=rows, fits=False, error=str(exc).splitlines()[0][:200]))
        torch.cuda.empty_cache()
        print(f"rows {rows}: {out[-1]}", flush=True)
    return out


def single(args) -> int:
    import torch

    out = Path(args.out)
    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    started = time.perf_counter()
    backend = full_shape_backend(args)
    print(f"{device}: built in {time.perf_counter() - started:.1f} s", flush=True)
    probes, settings = probes_and_settings(args)
    from backends.run import record_trace

    record_trace(backend, probes[0].prompt, settings.replace(max_denoising_steps=2))  # CUDA and cuBLAS warm-up
    compile_s = warm_up_compiled(backend, probes, settings, [1, *(int(b) for b in str(args.batch).split(","))])
    report = dict(compile_s=compile_s, device=device, torch=torch.__version__, steps=args.steps, path="compiled" if args.compiled else "eager")
    report["batch1"] = run_runner(backend, probes, settings, seeds=args.seeds, items=args.batch1_items, batch=1,
                                  out=out / "single-b1")
    print("batch-1 runner:", report["batch1"], flush=True)
    sizes = [int(b) for b in str(args.batch).split(",")]
    report["batched_all"] = []
    for size in sizes:  # each batch size on its own out folder, against the same batch-1 runner
        # the runner and stock generate over the very same batches, alternating (ABBA) `--runner-reps` times,
        # each runner rep into a fresh folder: on a shared machine the load drifts between the two otherwise
        runs, stocks = [], []
        for rep in range(args.runner_reps):
            for which in (("runner", "stock") if rep % 2 == 0 else ("stock", "runner")):
                if which == "runner":
                    runs.append(run_runner(backend, probes, settings, seeds=args.seeds, items=args.items, batch=size,
                                           out=out / f"single-b{size}" / f"rep{rep}"))
                else:
                    stocks.append(stock_over_plan(backend, probes, settings, seeds=args.seeds, items=args.items, batch=size))
        batched = min(runs, key=lambda r: r["work_s"]) | {"work_all": [r["work_s"] for r in runs], "stock_all": stocks}
        batched["speedup"] = batched["generations_per_s"] / report["batch1"]["generations_per_s"]
        batched["stock_s"] = statistics.median(stocks)
        batched["runner_over_stock"] = statistics.median(r["work_s"] for r in runs) / batched["stock_s"]
        batched["runner_over_stock_pairs"] = [r["work_s"] / t for r, t in zip(runs, stocks)]
        report["batched_all"].append(batched)
        print("batched runner:", batched, flush=True)
    report["batched"] = max(report["batched_all"], key=lambda b: b["generations_per_s"])
    report["speedup"] = report["batched"]["speedup"]
    report["capture"] = capture_vs_stock(backend, probes, settings, batch=report["batched"]["batch"], reps=args.reps)
    print("capture:", report["capture"], flush=True)
    if args.try_rows and args.device.startswith("cuda"):
        from backends.memory import rows_that_fit

        report["rows_estimate"] = rows_that_fit(backend)
        report["rows"] = try_rows(backend, probes, settings, [int(r) for r in args.try_rows.split(",")])
    (out / "bench-single.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


def slice_(args) -> int:
    import torch

    from cli import distributed

    cluster = distributed.join_cluster()  # its own GPU first
    out = Path(args.out)
    started = time.perf_counter()
    backend = full_shape_backend(args)
    probes, settings = probes_and_settings(args)
    from backends.run import record_trace

    # CUDA and cuBLAS warm-up, eager: compiled, it would compile batch 1 too, a shape the slice never runs
    record_trace(backend, probes[0].prompt, settings.replace(max_denoising_steps=2, compiled=False))
    compile_s = warm_up_compiled(backend, probes, settings, [int(args.batch)]).get(int(args.batch))
    built = time.perf_counter() - started
    print(f"rank {cluster.rank}: ready at {built:.1f} s", flush=True)
    report = run_runner(backend, probes, settings, seeds=args.seeds, items=args.items, batch=int(args.batch),
                        out=out / "slice", cluster=cluster, progress=True)
    distributed.leave_cluster(cluster)
    if cluster.is_writer:
        import pandas as pd

        frame = pd.read_parquet(out / "slice" / "results" / "generations.parquet")
        positions = pd.read_parquet(out / "slice" / "results" / "positions.parquet")
        report |= dict(device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", build_s=built,
                       compile_s=compile_s, path="compiled" if args.compiled else "eager",
                       pandas_generations=len(frame), pandas_positions=len(positions),
                       regimes=frame.groupby("regime").size().to_dict(),
                       projection_15000_min=15000 / report["generations_per_s"] / 60,
                       # with this rank's start (build, warm-up, compile) paid once, as a real study pays it
                       projection_15000_with_start_min=(built + 15000 / report["generations_per_s"]) / 60)
        (out / "bench-slice.json").write_text(json.dumps(report, indent=1))
        print(json.dumps(report, indent=1), flush=True)
    return 0


def report_(args) -> int:
    folder = Path(args.out)
    single_ = json.loads((folder / "bench-single.json").read_text())
    slice_path = folder / "bench-slice.json"
    b1, bb, cap = single_["batch1"], single_["batched"], single_["capture"]
    print(f"{single_['device']}, torch {single_['torch']}, {single_['path']}, {single_['steps']} steps a block, one 256-token block\n")
    print("| runner | GPUs | batch | generations | generations/s | ratio | peak GiB | runner / stock on its batches |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| batch-1 (today) | 1 | 1 | {b1['generations']} | {b1['generations_per_s']:.3f} | 1.00 | {b1['peak_gib']:.1f} | – |")
    for b in single_.get("batched_all", [bb]):
        print(f"| batched | 1 | {b['batch']} | {b['generations']} | {b['generations_per_s']:.3f} | "
              f"{b['generations_per_s'] / b1['generations_per_s']:.2f} | {b['peak_gib']:.1f} | "
              f"{b.get('runner_over_stock', float('nan')):.3f} |")
    if slice_path.exists():
        sl = json.loads(slice_path.read_text())
        print(f"| batched, slice | {sl['processes']} | {sl['batch']} | {sl['generations']} | {sl['generations_per_s']:.3f} | "
              f"{sl['generations_per_s'] / b1['generations_per_s']:.2f} (x{sl['generations_per_s'] / bb['generations_per_s']:.2f} "
              f"one batched GPU) | {sl['peak_gib']:.1f} |")
    print(f"\ncapture at batch {cap['batch']}: {cap['captured_s']:.2f} s vs stock {cap['stock_s']:.2f} s = "
          f"{cap['ratio']:.3f}x ({cap['reps']} alternating reps); identical to stock: {cap['identical']}")
    for row in single_.get("rows", []):
        print(f"rows {row['rows']}: " + (f"fits, peak {row['peak_gib']:.1f} GiB" if row["fits"] else f"out of memory ({row['error']})"))
    if "rows_estimate" in single_:
        print(f"backends.memory estimate of rows that fit: {single_['rows_estimate']}")
    if slice_path.exists():
        print(f"slice: {sl['generations']} generations in {sl['work_s']:.0f} s on {sl['processes']} GPUs; merge + read back "
              f"{sl['finish_s']:.1f} s; pandas read {sl['pandas_generations']} generations and {sl['pandas_positions']} positions; "
              f"15,000 generations at this rate: {sl['projection_15000_min']:.0f} min")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("single", "slice", "report"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default=None, help="a saved model folder instead of the full-shape random model "
                        "(e.g. assets/models/diffusiongemma-tiny-demo, to measure the runner on a CPU)")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=262_144)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--compiled", action="store_true")
    parser.add_argument("--no-shift", action="store_true", help="record no KL shift (probe --no-shift)")
    parser.add_argument("--batch", default="8", help="rows a batch; single takes several, e.g. 8,12 (the capture is "
                        "timed at the fastest); slice one")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--items", type=int, default=48, help="generations of the batched run (single) or the slice")
    parser.add_argument("--batch1-items", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--runner-reps", type=int, default=1, help="runner and stock over the same batches, alternating")
    parser.add_argument("--try-rows", default="12,16", help="row counts to try for memory (single); empty: skip")
    args = parser.parse_args(argv)
    import logging

    logging.basicConfig(format="%(name)s: %(message)s")
    logging.getLogger("backends.bridge").setLevel(logging.DEBUG)  # a failed run's whole traceback, not one line
    return {"single": single, "slice": slice_, "report": report_}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
