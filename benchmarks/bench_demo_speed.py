"""How long a demo prompt takes end to end on the CPU with the built-in model (target: <= 10 s on 2 threads).

For each demo prompt: one warm-up run, then `--repeats` timed runs (seeds 0, 1, ...) through
`TransformersBackend.generate` with the checkpoint's defaults, from the call to the last
record (tokenization, every denoising step, the step capture, decoding).  Prints the median,
min and max seconds, the steps used and the seconds per step; all figures from this one run.

    python -m benchmarks.bench_demo_speed                       # 2 threads, median of 5
    taskset -c 0,1 python -m benchmarks.bench_demo_speed        # pin to 2 cores as well
    python -m benchmarks.bench_demo_speed --demos acrostic --repeats 3 --model path/to/folder
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from prompts.demos import DEMO_NAMES, demo_prompt

DEFAULT_MODEL = Path(__file__).resolve().parent.parent / "assets" / "models" / "diffusiongemma-tiny-demo"
TARGET_S = 10.0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(DEFAULT_MODEL))
    parser.add_argument("--demos", nargs="*", default=list(DEMO_NAMES), choices=DEMO_NAMES)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.threads < 1:
        parser.error("--repeats and --threads must be at least 1")
    if not (Path(args.model) / "config.json").is_file():
        parser.error(f"no model folder at {args.model}")

    import torch

    torch.set_num_threads(args.threads)
    from backends.transformers_backend import TransformersBackend
    from backends import record_trace
    from visualizer.settings import GenerationSettings

    started = time.perf_counter()
    backend = TransformersBackend(args.model, device="cpu")
    print(f"model {backend.info.name}: {backend.info.parameters / 1e6:.2f}M parameters, {backend.info.dtype}, "
          f"loaded in {time.perf_counter() - started:.1f} s; torch threads {torch.get_num_threads()}")
    print(f"{'demo':12s} {'median s':>8s} {'min s':>6s} {'max s':>6s} {'steps':>9s} {'s/step':>7s} {'<=10 s':>6s}")
    medians = []
    for name in args.demos:
        prompt = demo_prompt(name)
        record_trace(backend, prompt, GenerationSettings(seed=0))  # warm-up: first-call costs
        times, steps = [], []
        for seed in range(args.repeats):
            t0 = time.perf_counter()
            trace = record_trace(backend, prompt, GenerationSettings(seed=seed))
            times.append(time.perf_counter() - t0)
            steps.append(len(trace.steps))
        median = statistics.median(times)
        medians.append(median)
        print(f"{name:12s} {median:8.2f} {min(times):6.2f} {max(times):6.2f} "
              f"{min(steps):4d}-{max(steps):<4d} {sum(times) / sum(steps):7.3f} {'yes' if median <= TARGET_S else 'NO':>6s}")
    print(f"slowest demo median {max(medians):.2f} s (target <= {TARGET_S:.0f} s)")


if __name__ == "__main__":
    main()
