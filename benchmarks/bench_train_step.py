"""Where a training step's time goes: ms per step of the real `train_step`, per batch size, eager
with compiled layers, with answers that fit a short canvas trained on one (`--short-canvas`), and
with the MoE router's per-expert scale indexed as transformers does it or gathered (`--routing`,
training/routing.py).

The training time budget depends on the step time.  For each variant (batch size x eager or
`--compile both`) this builds the demo preset from the same seed and makes `--steps` real batches
(training.data.TaskBatches, the training run's own batches; making them is not timed).  Contexts
vary in length, so every batch is a new shape and the first step on each shape pays one-time
costs (kernel selection, and for compiled layers the compile itself); a long run has seen its
shapes after a few hundred steps.  So each round first runs one untimed pass over the batches,
then times a second pass over the same batches, self-conditioning every other step as the
default share does.  Rounds go through the variants in turn, so none always runs first; the
spread between rounds says what is noise.  It prints ms per step for each round, examples per
second at the best round and the ratio to the first variant, all taken in this one run;
`--profile` adds the share of the step's wall time that CUDA kernels ran (low means the step
waits on Python and kernel launches, not the GPU) and, with `--top-ops N`, the N operators and
kernels that took the most GPU time, and `--recipe-steps` the minutes that many
steps take with the first variant.

    python -m benchmarks.bench_train_step --compile both --batch-sizes 256 512      # the comparison
    python -m benchmarks.bench_train_step --profile --recipe-steps 4538
    python -m benchmarks.bench_train_step --batch-sizes 1024 2048 --short-canvas 64 --profile --top-ops 15
    python -m benchmarks.bench_train_step --batch-sizes 1024 --short-canvas 64 --routing stock gather --profile
    python -m benchmarks.bench_train_step --batch-sizes 512 1024 --short-canvas 0 64
    python -m benchmarks.bench_train_step --preset test --batch-sizes 4 8 --steps 3 --device cpu
"""

from __future__ import annotations

import argparse
import time

from backends.small_models import PRESETS
from training.train import TOKENIZER_DIR, TrainConfig, make_optimizer, train_step

ROUTING = ("stock", "gather")  # transformers' router as it is; training/routing.py's gathered per-expert scale


def kernel_share(one_pass, variant, steps: int, top_ops: int = 0) -> float:
    """Share of the wall time of one timed pass during which CUDA kernels ran (summed kernel time / wall);
    with `top_ops`, also prints the operators and kernels that took the most GPU time in that pass (an
    operator's row includes its kernels' time, which have rows of their own: the rows overlap)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall_us = one_pass(variant) * steps * 1000
    kernels_us = sum(e.device_time for e in prof.events() if e.device_type == DeviceType.CUDA)
    if top_ops:
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=top_ops, max_name_column_width=60),
              flush=True)
    return kernels_us / wall_us


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="demo", choices=list(PRESETS))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--steps", type=int, default=20, help="batches per pass (each round: one untimed, one timed)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compile", choices=("off", "on", "both"), default="off",
                        help="compiled layers (training.train.compile_layers): off, on, or both as separate variants")
    parser.add_argument("--routing", nargs="+", choices=ROUTING, default=["stock"],
                        help="router per variant: transformers' indexed per-expert scale, or training.routing's gathered one")
    parser.add_argument("--short-canvas", type=int, nargs="+", default=[0],
                        help="TaskBatches' short canvas per variant (0: every answer on the full canvas)")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--profile", action="store_true", help="also measure the share of time kernels ran (CUDA)")
    parser.add_argument("--top-ops", type=int, default=0,
                        help="with --profile: print the N operators and kernels that took the most GPU time, per variant")
    parser.add_argument("--recipe-steps", type=int, default=None, help="print the minutes this many steps take")
    args = parser.parse_args(argv)
    if min(args.batch_sizes) < 1 or min(args.steps, args.rounds) < 1:
        parser.error("batch sizes, --steps and --rounds must be at least 1")
    if args.top_ops and not args.profile:
        parser.error("--top-ops prints the profile: add --profile")

    import torch
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from backends.small_models import small_config
    from training.data import TaskBatches
    from training.objective import to_device
    from training.routing import use_gather_routing
    from training.train import compile_layers

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    on_cuda = device.type == "cuda"
    if on_cuda:
        torch.backends.cuda.matmul.allow_tf32 = True  # as training.train does

    def sync():
        if on_cuda:
            torch.cuda.synchronize()

    vocab = len(AutoTokenizer.from_pretrained(TOKENIZER_DIR))
    name = torch.cuda.get_device_name(device) if on_cuda else "cpu"
    print(f"preset {args.preset}, {name}, torch {torch.__version__}", flush=True)
    compiles = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    variants = [(batch_size, compiled, short, routing) for batch_size in args.batch_sizes for compiled in compiles
                for short in args.short_canvas for routing in args.routing]

    runs = {}  # variant -> (model, optimizer, generator, config, batches)
    for batch_size, compiled, short, routing in variants:
        config = TrainConfig(preset=args.preset, batch_size=batch_size)
        torch.manual_seed(0)
        model = DiffusionGemmaForBlockDiffusion(small_config(vocab, args.preset)).to(device).train()
        if routing == "gather":
            use_gather_routing(model)
        if compiled:
            compile_layers(model)
        source = TaskBatches(TOKENIZER_DIR, batch_size, seed=0, short_canvas=short or None)
        batches = [[to_device(part, device) for part in source[i]] for i in range(args.steps)]
        runs[batch_size, compiled, short, routing] = (model, make_optimizer(model, config), torch.Generator(device=device).manual_seed(0),
                                      config, batches)

    def one_pass(variant) -> float:
        model, optimizer, generator, config, batches = runs[variant]
        sync()
        started = time.perf_counter()
        for i, batch in enumerate(batches):
            train_step(model, optimizer, batch, config, self_condition=i % 2 == 0, generator=generator)
        sync()
        return (time.perf_counter() - started) / len(batches) * 1000

    timings = {variant: [] for variant in variants}
    for _ in range(args.rounds):
        for variant in list(timings):
            try:
                one_pass(variant)  # every shape once: one-time costs stay out of the timed pass
                timings[variant].append(one_pass(variant))
            except torch.OutOfMemoryError:
                print(f"batch {variant[0]}: out of GPU memory, left out", flush=True)
                del timings[variant], runs[variant]
                torch.cuda.empty_cache()

    first = None
    for variant, rounds in timings.items():
        batch_size, compiled, short, routing = variant
        best = min(rounds)
        first = first or (batch_size, best)
        speedup = (batch_size / best) / (first[0] / first[1])
        line = (f"batch {batch_size:4d} {'compiled' if compiled else 'eager   '}"
                f"{f', short canvas {short}' if short else ''}{', gathered routing' if routing == 'gather' else ''}: "
                f"{' / '.join(f'{ms:.1f}' for ms in rounds)} ms/step (rounds), "
                f"{batch_size / best * 1000:.0f} examples/s, x{speedup:.2f} examples/s vs the first")
        if args.profile and on_cuda:
            line += f", kernels busy {kernel_share(one_pass, variant, args.steps, args.top_ops):.0%} of the step"
        print(line, flush=True)
    if args.recipe_steps and first:
        print(f"{args.recipe_steps} steps at batch {first[0]}: {args.recipe_steps * first[1] / 60000:.1f} min "
              "(the optimisation loop only)", flush=True)


if __name__ == "__main__":
    main()
