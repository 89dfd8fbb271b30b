"""The 26B shape over several GPUs: per-GPU memory, ms per step, all-reduce cost, captured == stock.

    torchrun --nproc-per-node 4 -m benchmarks.bench_sharded --kind expert      # on nvidia-h100-x4
    torchrun --nproc-per-node 2 -m benchmarks.bench_sharded --kind tensor
    torchrun --nproc-per-node 4 -m benchmarks.bench_sharded --kind expert --compiled  # and --kind none --compiled
    python -m benchmarks.bench_sharded --kind none                               # the one-GPU baseline
    torchrun --nproc-per-node 2 -m benchmarks.bench_sharded --kind expert --device cpu --layers 2 --experts 8 --vocab 4096 --reps 1   # dry run

No hub is reachable, so the model is the published shape with random bf16 weights
(bench_capture_fullshape.py), and every rank builds only its own shard, never the whole model:
1. the plans of backends/sharded.py and transformers' own mesh (`prepare_distribute_model`) and
   hooks (`maybe_distribute_model`) applied to a model built on the meta device;
2. `tie_weights()`, so the encoder's modules hold the decoder's sharded parameters, as after loading;
3. one allocation per distinct parameter: the local shard of a DTensor (random, seeded per rank)
   or the whole of a replicated one (`_init_weights`, seeded alike on every rank, so the replicas agree).

Rank 0 runs the project's capture, the followers the stock `generate`, as `record --parallel` does.
Printed by rank 0: captured == stock for every seed on every rank (the followers' stock runs against each
other) and every run's tokens compared across ranks; median ms per denoising step over `--reps`
alternating stock/captured runs; peak memory of every GPU; and the all-reduces of one run (count per
step and their time on the GPU, from CUDA events around each `dist.all_reduce`).
`--compiled` runs every generate with `cache_implementation="static"` (the app's and the CLI's compiled
path): the first, untimed run compiles; the all-reduce clock is skipped there (a Python wrapper around
`dist.all_reduce` would only be seen by dynamo as a reason to recompile).
`--profile` adds one more stock run under torch.profiler and prints where the GPU's time per step went, by
kind of kernel (all-reduce, experts, attention, other GEMMs, inductor's fused kernels); it works on the
compiled path too (CUPTI sees the kernels inside CUDA graphs), so it is what gives the all-reduces' cost there.
Sharded, every rank first calls `sharded.compile_alike()`, as loading a sharded model in the app or the CLI
does: inductor picks reduction configs by fixed rules, not by timing them on each rank, so the ranks compute
alike. `--autotuned-reductions` leaves it out (then the ranks' tokens can differ: 8 of 8 runs on 4 H200s).
`--deterministic` turns on torch's deterministic algorithms, inductor's filter among them (slower: BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from backends import sharded
from backends.capture import capture_steps
from backends.process_group import end_process
from benchmarks.bench_capture_fullshape import build, full_shape_config

STEPS = 48  # random weights never converge: every block runs all its steps


def build_shard(config, kind: str, device: str):
    """Build this rank's shard of the model: see the module docstring."""
    from torch.distributed.tensor import DTensor
    from transformers import DiffusionGemmaForBlockDiffusion as Model

    dist_config, _, mesh_manager = Model.prepare_distribute_model(sharded.distributed_config(kind, sharded.world_size()))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if device == "cuda" else torch.float32)
    try:
        with torch.device("meta"):
            model = Model(config)
    finally:
        torch.set_default_dtype(previous)
    # Untie first (fresh meta parameters): transformers resolves the plans by parameter name, and a tied
    # decoder parameter would be named only once, on the encoder's side, as when loading a checkpoint.
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None:
                module._parameters[name] = torch.nn.Parameter(torch.empty_like(param), requires_grad=False)
    model = Model.maybe_distribute_model(model, dist_config, mesh_manager)
    model.tie_weights()
    here = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else torch.device("cpu")
    real: dict[int, torch.nn.Parameter] = {}
    local_gen = torch.Generator(device=here).manual_seed(1000 + sharded.rank())
    sharded_modules = set()
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            if id(param) not in real:
                if isinstance(param, DTensor):
                    local = torch.empty(param.to_local().shape, dtype=param.dtype, device=here)
                    local.normal_(0.0, 0.02, generator=local_gen)
                    value = DTensor.from_local(local, param.device_mesh, param.placements, run_check=False,
                                               shape=param.shape, stride=param.stride())
                else:
                    value = torch.empty(param.shape, dtype=param.dtype, device=here)
                real[id(param)] = torch.nn.Parameter(value, requires_grad=False)
            if isinstance(param, DTensor):
                sharded_modules.add(module)
            module._parameters[name] = real[id(param)]
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and buffer.is_meta:
                module._buffers[name] = torch.zeros(buffer.shape, dtype=buffer.dtype, device=here)
    torch.manual_seed(0)  # the replicated weights: the same on every rank
    with torch.no_grad():
        for module in model.modules():
            if module in sharded_modules:
                continue  # its shards were drawn above
            try:
                model._init_weights(module)
            except KeyError:  # transformers 5.17's vision rotary embedding ('axial'); not on the text path
                pass
    return finish(model), real


def finish(model):
    """The generation settings bench_capture_fullshape uses, and no EOS (every block stays full)."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    model.eval()
    g = model.generation_config
    g.eos_token_id, g.pad_token_id = [1, 106], 0
    g.max_denoising_steps, g.t_min, g.t_max = STEPS, 0.4, 0.8
    g.stability_threshold, g.confidence_threshold = 1, 0.005
    g.sampler_config = EntropyBoundSamplerConfig(entropy_bound=0.1)
    with torch.no_grad():
        model.get_output_embeddings().weight[[1, 106]] = 0
    return model


def local_bytes(params) -> int:
    from torch.distributed.tensor import DTensor

    return sum((p.to_local() if isinstance(p, DTensor) else p).nbytes for p in params)


def say(line: str) -> None:
    """Progress on rank 0's stderr: a call cut short while compiling still tells how far it got."""
    if sharded.rank() == 0:
        print(f"[bench_sharded {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run(model, prompt, *, seed: int, captured: bool, device: str, compiled: bool = False) -> dict:
    kwargs = {"max_new_tokens": 256, "cache_implementation": "static" if compiled else None}
    torch.manual_seed(seed)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sync(device)
    started = time.perf_counter()
    if captured:
        with capture_steps(model, lambda step: None, lambda block: None, topk=5):
            out = model.generate(prompt, **kwargs)
    else:
        out = model.generate(prompt, **kwargs)
    sync(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    return dict(sequences=out.sequences.cpu(), ms_per_step=seconds / STEPS * 1e3, peak_gib=peak)


class AllReduceClock:
    """Counts `dist.all_reduce` calls and times each on the GPU with a pair of CUDA events (no sync)."""

    def __init__(self, device: str):
        import torch.distributed as dist

        self.dist, self.device, self.events, self.calls = dist, device, [], 0
        self.original = dist.all_reduce

    def __enter__(self):
        def timed(tensor, *args, **kwargs):
            self.calls += 1
            if self.device != "cuda":
                return self.original(tensor, *args, **kwargs)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = self.original(tensor, *args, **kwargs)
            end.record()
            self.events.append((start, end))
            return result

        self.dist.all_reduce = timed
        return self

    def __exit__(self, *exc):
        self.dist.all_reduce = self.original

    def milliseconds(self) -> float:
        sync(self.device)
        return sum(s.elapsed_time(e) for s, e in self.events)


# Kinds of GPU kernel, by substrings of their names; the first that matches wins. Inductor's Triton
# kernels come first: they are named after every op they fused, so one that prepares an all-reduce's
# input or follows the grouped GEMM would otherwise be counted as the all-reduce or the GEMM itself.
KERNEL_KINDS = (
    ("inductor's fused kernels", ("triton",)),
    ("all-reduce", ("nccl", "allreduce", "all_reduce")),  # on CPU: gloo's c10d::allreduce_, _AllReduceForward
    ("experts (grouped GEMM)", ("group",)),  # torch._grouped_mm: CUTLASS's "GroupProblemShape"
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("other GEMM", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul", "splitk")),
)


def kernel_kind(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, parts in KERNEL_KINDS if any(part in lowered for part in parts)), "other")


def profile_run(model, prompt, *, device: str, compiled: bool, top: int = 20) -> dict:
    """One stock run under torch.profiler: its wall time and its kernels' time per step, by kind.

    Kernel time is summed over streams, so where NCCL overlaps compute the kinds can add up to more
    than the wall time; wall minus the kernels' sum is (at least) the GPU's idle time. On CPU the
    "kernels" are aten operators (self time), which only checks that the path runs.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    on_gpu = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        wall = run(model, prompt, seed=0, captured=False, device=device, compiled=compiled)["ms_per_step"]
    events = [e for e in prof.key_averages() if (e.device_type == DeviceType.CUDA) == on_gpu]

    def ms(event) -> float:  # per denoising step; profiler times are microseconds
        return (event.self_device_time_total if on_gpu else event.self_cpu_time_total) / 1e3 / STEPS

    by_kind: dict[str, float] = {}
    for event in events:
        kind = kernel_kind(event.key)
        by_kind[kind] = by_kind.get(kind, 0.0) + ms(event)
    busiest = sorted(events, key=ms, reverse=True)[:top]
    return dict(wall_ms=wall, kernel_ms=sum(by_kind.values()), by_kind=dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
                top=[dict(name=e.key[:120], kind=kernel_kind(e.key), ms=ms(e), calls=e.count / STEPS) for e in busiest])


def describe_profile(profiled: dict) -> str:
    lines = [f"profiled run: {profiled['wall_ms']:.1f} ms/step wall, {profiled['kernel_ms']:.1f} ms/step in kernels"]
    lines += [f"  {kind:<26} {ms:7.2f} ms/step" for kind, ms in profiled["by_kind"].items()]
    lines += ["  busiest:"] + [f"    {k['ms']:6.2f} ms {k['calls']:6.1f}x  [{k['kind']}] {k['name']}" for k in profiled["top"]]
    return "\n".join(lines)


def inductor_config():
    import torch._inductor.config as config  # imported here: it loads inductor, which eager runs never need

    return config


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", default="expert", choices=(*sharded.TORCHRUN_KINDS, "none"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3, help="timed runs of stock and of captured, alternating")
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=262_144, help="smaller only for a dry run")
    parser.add_argument("--compiled", action="store_true", help="torch.compile through the static cache")
    parser.add_argument("--profile", action="store_true", help="one more stock run under torch.profiler: time by kernel kind")
    parser.add_argument("--deterministic", action="store_true",
                        help="torch.use_deterministic_algorithms(True, warn_only=True): deterministic kernels, and "
                             "inductor without timing-based choices of reduction configs, so every rank compiles alike")
    parser.add_argument("--autotuned-reductions", action="store_true",
                        help="sharded, leave out the product's sharded.compile_alike(): each rank times its own "
                             "reduction configs (their canvases can differ, docs/sharded.md)")
    parser.add_argument("--json", help="rank 0 appends its row here")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        torch.set_num_threads(1)
    if args.deterministic:
        # Not inductor's `deterministic` config nor TORCHINDUCTOR_DETERMINISTIC: dynamo restores the prior
        # use_deterministic_algorithms mode after compiling each frame, and that call rewrites inductor's flag.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS's deterministic workspace
        torch.use_deterministic_algorithms(True, warn_only=True)
    # as the product loads a sharded model (transformers_backend.py), unless measuring without it
    alike = sharded.compile_alike() if args.kind != "none" and not args.autotuned_reductions else None
    config = full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab)
    n = sharded.world_size()
    started = time.perf_counter()
    if args.kind == "none":
        model, count = build(config, args.device)
        weights = local_bytes({id(p): p for p in model.parameters()}.values())
    else:
        sharded.check_fits(args.kind, n, config.text_config)
        model, real = build_shard(config, args.kind, args.device)
        weights = local_bytes(real.values())
    built_s = time.perf_counter() - started
    device = args.device
    say(f"built in {built_s:.0f} s")
    prompt = torch.randint(107, args.vocab, (1, args.prompt_length), generator=torch.Generator().manual_seed(1))
    prompt = prompt.to(model.device)
    is_rank0 = sharded.rank() == 0

    # captured (rank 0) == stock (every rank), same seed; then the timed runs, alternating
    compiled = args.compiled
    started = time.perf_counter()
    stock = run(model, prompt, seed=11, captured=False, device=device, compiled=compiled)  # compiles, when compiled
    first_run_s = time.perf_counter() - started
    say(f"first run{' (compiles)' if compiled else ''} in {first_run_s:.0f} s")
    if compiled:  # where the compile's time went (dynamo's tracing, AOT, inductor), summed over the graphs
        from torch._dynamo.utils import compile_times

        say("compile times (s):\n" + compile_times(repr="str", aggregate=True))
    mine = run(model, prompt, seed=11, captured=is_rank0, device=device, compiled=compiled)
    timed = {"stock": [], "captured": []}
    for rep in range(args.reps):
        for variant in (("stock", "captured") if rep % 2 == 0 else ("captured", "stock")):
            timed[variant].append(run(model, prompt, seed=rep, captured=variant == "captured" and is_rank0, device=device,
                                      compiled=compiled))
    pairs = [(stock, mine), *zip(timed["stock"], timed["captured"])]  # each pair: one seed
    reduce_calls = reduce_ms = None
    if not compiled:
        with AllReduceClock(device) as clock:
            run(model, prompt, seed=0, captured=False, device=device)
        reduce_calls, reduce_ms = clock.calls / STEPS, clock.milliseconds() / STEPS
    profiled = profile_run(model, prompt, device=device, compiled=compiled) if args.profile else None
    if profiled:
        say(describe_profile(profiled))

    row = dict(
        kind=args.kind, processes=n, path="compiled" if compiled else "eager", first_run_s=round(first_run_s, 1), device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
        built_s=round(built_s, 1), weights_gib=weights / 2**30,
        stock_ms=statistics.median(r["ms_per_step"] for r in timed["stock"]),
        stock_range=[min(r["ms_per_step"] for r in timed["stock"]), max(r["ms_per_step"] for r in timed["stock"])],
        captured_ms=statistics.median(r["ms_per_step"] for r in timed["captured"]),
        peak_gib=max(r["peak_gib"] for rs in timed.values() for r in rs),
        all_reduces_per_step=reduce_calls, all_reduce_ms_per_step=reduce_ms,
        # rank 0: captured == stock for each seed; the followers: stock == stock, their repeatability
        same_per_seed=[torch.equal(a["sequences"], b["sequences"]) for a, b in pairs],
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        inductor_deterministic=bool(inductor_config().deterministic) if compiled else None,  # read after the compile
        compile_alike=alike,
        profile=profiled,
    )
    row["identical"] = all(row["same_per_seed"])
    if n > 1:
        import torch.distributed as dist

        rows = [None] * n
        sequences = [r["sequences"].tolist() for pair in pairs for r in pair]
        dist.all_gather_object(rows, dict(row, sequences=sequences))
        row["peak_gib_per_rank"] = [r["peak_gib"] for r in rows]
        row["weights_gib_per_rank"] = [r["weights_gib"] for r in rows]
        if profiled:
            row["profile_by_kind_per_rank"] = [r["profile"]["by_kind"] for r in rows]
        row["same_per_seed_per_rank"] = [r["same_per_seed"] for r in rows]
        # every run, every rank: the same tokens as rank 0 (replicated work computed alike everywhere)
        row["ranks_agree_per_run"] = [all(r["sequences"][i] == rows[0]["sequences"][i] for r in rows)
                                      for i in range(len(sequences))]
        row["identical"] = all(r["identical"] for r in rows) and all(row["ranks_agree_per_run"])
    if is_rank0:
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    # The group ends in order where it can (not NCCL after compiled runs: destroy_process_group never
    # returned on 2 H200s, torch 2.11, seen twice); backends/process_group.py.
    return end_process(0 if row["identical"] else 1)


if __name__ == "__main__":
    sys.exit(main())
