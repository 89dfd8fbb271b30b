"""Where the probe runner's time goes, beyond stock `generate`: a host timeline on the GPU machine.

    python -m benchmarks.bench_runner_cost timeline --out /tmp/cost --batch 8 --items 48 --reps 2
    python -m benchmarks.bench_runner_cost warm --compiled --batch 1,12 --out /tmp/warm   # compile time a size
    python -m benchmarks.bench_runner_cost timeline --device cpu --model assets/models/diffusiongemma-tiny-demo \\
        --batch 4 --items 16 --reps 1 --out /tmp/cost-cpu                                  # a dry run on a CPU

`timeline` runs the same plan's batches three ways, alternating (ABC, then CBA) `--reps` times after
one untimed runner pass (which also fills the backend's decoded-piece table, as the first minutes
of a long study do):
- stock: `model.generate` batch after batch, seeded as the runner seeds them (`stock_over_plan`);
- capture: `record_batch` batch after batch, no writer, nothing started ahead (the capture's own cost);
- runner: the probe's runner (`run_batches` through `run_plan`), with each `model.generate` call it
  makes timestamped on the model's thread.
From the runner's timestamps its wall time splits into: start (runner called -> first generate),
generate (the sum of its generate calls), gaps (between one generate's end and the next one's start:
the model's thread idle) and tail (last generate's end -> runner returned: the writer's last
batches and the merge). "generate" over capture's time is what the runner's concurrent work (the
next batch started ahead, the writer's hand-off) costs inside the model's own calls.

`warm` builds the model and runs the compiled warm-up at each `--batch` size (two prompt lengths
each), printing the seconds each size took: run twice on one host (same DIFFUSIONGEMMA_COMPILE_CACHE)
for the first and the second run's compile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks.bench_probe_scale import cuda_sync, full_shape_backend, planned_prompts, probes_and_settings, run_runner
from benchmarks.bench_probe_scale import stock_over_plan
from benchmarks.bench_probe_scale import warm_up_compiled


def capture_over_plan(backend, probes, settings, *, seeds: int, items: int, batch: int) -> float:
    """Seconds `record_batch` takes over the plan's batches, one after the other, nothing else running."""
    from backends.run import record_batch, record_trace

    total = 0.0
    for planned, prompts in planned_prompts(probes, settings, seeds=seeds, items=items, batch=batch):
        seeded = settings.replace(seed=planned.seed)
        cuda_sync()
        started = time.perf_counter()  # as the runner records a batch: a batch of one is record_trace
        traces = [record_trace(backend, prompts[0], seeded)] if len(prompts) == 1 else record_batch(backend, prompts, seeded)
        cuda_sync()
        total += time.perf_counter() - started
        assert all(t.end.finish_reason in ("eos", "length") for t in traces), traces[0].end
    return total


class GenerateClock:
    """Timestamps of every `model.generate` call (start, end) while installed: on the model's thread."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __enter__(self):
        original = self.model.generate

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.calls.append((started, time.perf_counter()))

        self.model.generate = timed  # an instance attribute shadows the class's method
        return self

    def __exit__(self, *exc):
        del self.model.generate


def timed_runner(backend, probes, settings, *, seeds, items, batch, out: Path) -> dict:
    with GenerateClock(backend.model) as clock:
        started = time.perf_counter()
        report = run_runner(backend, probes, settings, seeds=seeds, items=items, batch=batch, out=out)
        ended = time.perf_counter()
    calls = sorted(clock.calls)
    generate_s = sum(end - start for start, end in calls)
    gaps = [max(0.0, nxt[0] - prev[1]) for prev, nxt in zip(calls, calls[1:])]
    return report | dict(wall_s=ended - started, start_s=calls[0][0] - started, generate_s=generate_s,
                         gaps_s=sum(gaps), largest_gap_s=max(gaps, default=0.0), tail_s=ended - calls[-1][1],
                         generate_calls=len(calls))


def timeline(args) -> int:
    import torch

    out = Path(args.out)
    backend = full_shape_backend(args)
    probes, settings = probes_and_settings(args)
    settings = settings.replace(record_shift=not args.no_shift)
    batch = int(args.batch)
    from backends.run import record_trace

    # CUDA and cuBLAS warm-up, eager (compiled, it would compile batch 1 too, minutes at the real shape)
    record_trace(backend, probes[0].prompt, settings.replace(max_denoising_steps=2, compiled=False))
    compile_s = warm_up_compiled(backend, probes, settings, [batch])
    import cli.probe_runner

    cli.probe_runner.BATCHES_AHEAD = args.ahead  # the runner's own knob, to see what starting ahead costs
    plan = dict(seeds=args.seeds, items=args.items, batch=batch)
    timed_runner(backend, probes, settings, **plan, out=out / "untimed")  # pieces decoded, writer imports cached
    runs = {"stock": [], "capture": [], "runner": []}
    order = ("stock", "capture", "runner")
    for rep in range(args.reps):
        for name in (order if rep % 2 == 0 else order[::-1]):
            if name == "stock":
                runs["stock"].append(stock_over_plan(backend, probes, settings, **plan))
            elif name == "capture":
                runs["capture"].append(capture_over_plan(backend, probes, settings, **plan))
            else:
                runs["runner"].append(timed_runner(backend, probes, settings, **plan, out=out / f"rep{rep}"))
            print(name, runs[name][-1], flush=True)
    stock, capture = statistics.median(runs["stock"]), statistics.median(runs["capture"])
    runner = {k: statistics.median(r[k] for r in runs["runner"]) for k in
              ("wall_s", "work_s", "start_s", "generate_s", "gaps_s", "tail_s", "largest_gap_s")}
    report = dict(device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", torch=torch.__version__,
                  path="compiled" if args.compiled else "eager", shift=not args.no_shift, ahead=args.ahead, compile_s=compile_s, **plan,
                  reps=args.reps, stock_s=stock, capture_s=capture, runner=runner, runs=runs,
                  capture_over_stock=capture / stock, runner_over_stock=runner["work_s"] / stock,
                  runner_over_capture=runner["work_s"] / capture,
                  share_of_stock={k: runner[k] / stock for k in ("start_s", "gaps_s", "tail_s")},
                  generate_over_capture=runner["generate_s"] / capture)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-runner-cost.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    print(f"\n{report['device']}, {report['path']}, shift {'on' if report['shift'] else 'off'}, batch {batch}, "
          f"{args.items} generations, {args.ahead} batch(es) started ahead, median of {args.reps}")
    print("| part | seconds | x stock |\n|---|---|---|")
    print(f"| stock generate over the batches | {stock:.2f} | 1.000 |")
    print(f"| capture (record_batch) over them | {capture:.2f} | {capture / stock:.3f} |")
    print(f"| runner, in all (run_plan's work) | {runner['work_s']:.2f} | {runner['work_s'] / stock:.3f} |")
    for part in ("start_s", "generate_s", "gaps_s", "tail_s"):
        print(f"| runner: {part[:-2]} | {runner[part]:.2f} | {runner[part] / stock:.3f} |")
    return 0


def warm(args) -> int:
    import torch

    started = time.perf_counter()
    backend = full_shape_backend(args)
    probes, settings = probes_and_settings(args)
    settings = settings.replace(record_shift=not args.no_shift)
    from backends.compile_cache import cache_folder
    from backends.run import record_trace

    built = time.perf_counter() - started
    record_trace(backend, probes[0].prompt, settings.replace(max_denoising_steps=2, compiled=False))
    seconds = warm_up_compiled(backend, probes, settings, [int(b) for b in str(args.batch).split(",")])
    report = dict(device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", built_s=built,
                  compile_s=seconds, cache=str(cache_folder()), shift=not args.no_shift, **compile_breakdown())
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "bench-warm.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    return 0


def compile_breakdown() -> dict:
    """Where this process's compile time went, as torch counts it: the seconds of each timed phase
    (Dynamo's tracing, AOT autograd, Inductor, loading from the caches, CUDA graphs) summed over every
    graph, and the caches' hit and miss counters: what a second run on the same host still pays."""
    from torch._dynamo import utils

    headers, values = utils.compile_times(repr="csv", aggregate=True)
    phases = {name: float(value) for name, value in zip(headers, values) if _is_number(value)}
    counters = {group: dict(named) for group, named in utils.counters.items()
                if any(word in group for word in ("inductor", "aot_autograd", "stats"))}
    return dict(phase_s=dict(sorted(phases.items(), key=lambda kv: -kv[1])), counters=counters)


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("timeline", "warm"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default=None, help="a saved model folder instead of the full-shape random model")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=262_144)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--compiled", action="store_true")
    parser.add_argument("--no-shift", action="store_true", help="record no KL shift (probe --no-shift)")
    parser.add_argument("--batch", default="8", help="rows a batch (warm: several sizes, e.g. 1,12)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--items", type=int, default=48)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--ahead", type=int, default=1, help="timeline: cli.probe_runner.BATCHES_AHEAD")
    args = parser.parse_args(argv)
    return {"timeline": timeline, "warm": warm}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
