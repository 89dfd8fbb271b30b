"""What looking inside the network costs per step: per-layer capture with the logit lens, and the shift (KL).

    python -m benchmarks.bench_layers --paths eager --reps 5           # the real 26B shape, random bf16 weights, one GPU
    python -m benchmarks.bench_layers --paths compiled --reps 3        # static cache + torch.compile (compiles twice)
    python -m benchmarks.bench_layers --paths compiled --no-hook-guards   # what guarding module hooks costs (compare stock)
    python -m benchmarks.bench_layers --dry-run                        # a tiny model on the CPU (CI runs this)

The model is built at the published shape exactly as `bench_capture_fullshape.py` builds it (meta device,
tied, one allocation per distinct tensor, random bf16 weights; 25.4 B parameters, ~47.5 GiB). First, the
lens itself: the layer outputs of one real step (hooks on the recorded layers during a short stock run)
go through `block_lens` and through its plain reference (float32 capped logits,
the definition), which must agree (ids and ranks exactly, probabilities to float16), each timed per
layer-step with CUDA events. Then for each path (eager; static cache + torch.compile) it times, in one
process and alternating `--reps` times:

    stock             plain `model.generate`
    captured          the project's capture as recorded by default before issue 44 (entropy, top-5), no shift
    captured+layers   that plus `--layers` (RMS of each layer's output; at block end the logit lens: top-1, rank)
    captured+shift    that plus the KL of each position's distribution from the previous step's
    captured+both     layers and shift together
    captured+pins     the capture with 4 pinned tokens (`PINS`): the one intervention, so not stock's sequence

checks that every variant but the pinned one gives the stock sequence bit for bit first (the pinned one: its
pins on the canvas and accepted at every step of the first block and committed, a second run with the same
seed and pins giving the same sequence, and that sequence not stock's), and prints the median ms per step
with min-max, the ratios to stock's and to captured's medians (same run), peak GPU memory, and the trace
bytes per step each variant writes (JSON, as `Trace.save` writes it; a block's lens counted per step).
It also prints the paired ratio: each repetition runs every variant back to back, so a variant's time over
stock's in the same repetition cancels the host's slow drift (eager steps on a lent GPU host spread by tens
of percent over minutes); its median over the repetitions, with a 95% bootstrap interval, is the figure
to read where the eager runs' spread hides the variants' difference.
Random weights never converge early, so every block runs all its steps.

Compiling is reported apart from the steady step: each variant's first run (the checked one) against its
median timed run. On the compiled path the first stock run compiles the decoder; with module hooks guarded
(`layer_capture.guard_hooks`, set when the backends are imported) the first captured+layers run compiles
it once more (the hooks are part of the graph), and later runs with the same layers reuse that graph;
the guard's own cost is inside every compiled figure. To see it, run once more with `--no-hook-guards`
(torch's default: no +layers variants then) on the same warm machine and compare the two stock rows.
The memory the shift keeps (one float32 distribution a row) is printed as computed and as measured
(captured+shift's peak minus captured's).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time

import numpy as np
import scipy.stats
import torch

from backends import layer_capture
from backends.captured import block_record, step_record
from backends.capture import capture_steps
from backends.layer_capture import LayerTaps, block_lens, block_lens_reference, guard_hooks
from visualizer.records import ModelInfo, RunStart, frozen_array
from visualizer.trace import Trace

VARIANTS = ("stock", "captured", "captured+layers", "captured+shift", "captured+both", "captured+pins")
# captured+pins: three consecutive tokens and one more, on the first block (the tiny model's vocabulary has them too)
PINS = ((5, 1000), (6, 1001), (7, 1002), (200, 2042))
TOPK = 5  # the capture's default candidates (visualizer.settings.DEFAULT_RECORD_TOPK)


class _NoPieces:
    """The piece table of a benchmark run: no tokenizer, so no text (the bytes counted are the arrays')."""

    def new(self, ids) -> dict:
        return {}


def build_model(args):
    """(model, parameters, what): the real shape on the GPU, or the project's tiny test model (--dry-run)."""
    if args.dry_run:
        from transformers import DiffusionGemmaForBlockDiffusion

        from backends.random_model import set_generation_defaults
        from backends.small_models import small_config

        torch.manual_seed(0)
        model = DiffusionGemmaForBlockDiffusion(small_config(args.vocab, "test")).eval()

        class _Ids:  # set_generation_defaults reads these from a tokenizer
            eos_token_id, pad_token_id, bos_token_id = 1, 0, 2

            def convert_tokens_to_ids(self, token):
                return 106

        set_generation_defaults(model, _Ids())
        with torch.no_grad():
            model.get_output_embeddings().weight[[1, 106]] = 0  # no EOS: every block stays full
        return model, sum(p.numel() for p in {id(p): p for p in model.parameters()}.values()), "tiny test model"
    from benchmarks.bench_capture_fullshape import build, full_shape_config

    model, params = build(full_shape_config(layers=args.model_layers, experts=128, vocab=262_144), args.device)
    return model, params, "real 26B-A4B shape, random bf16 weights"


def run(model, prompt, *, seed: int, compiled: bool, variant: str, device: str, layers: tuple, steps: int) -> dict:
    """One generation: sequences, seconds, peak memory, and the captured items (for the trace bytes)."""
    items, blocks = [], []
    kwargs = dict(max_new_tokens=256, max_denoising_steps=steps, cache_implementation="static" if compiled else None)
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
    watch = contextlib.nullcontext()
    if variant != "stock":
        watch = capture_steps(
            model, items.append, blocks.append, topk=TOPK,
            layers=layers if variant in ("captured+layers", "captured+both") else (),
            shift=variant in ("captured+shift", "captured+both"), pins=PINS if variant == "captured+pins" else (),
        )
    started = time.perf_counter()
    with watch:
        out = model.generate(prompt, **kwargs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    return dict(sequences=out.sequences.cpu(), seconds=seconds, peak=peak, items=items, blocks=blocks)


def pins_held(result: dict) -> bool:
    """Every pinned token on the canvas and accepted at every step of the first block, and committed there."""
    where, ids = np.array([p for p, _ in PINS]), np.array([t for _, t in PINS])
    steps = [item for item in result["items"] if item.block == 0]
    held = all(item.accepted[where].all() and np.array_equal(item.canvas[where], ids) for item in steps)
    first = next(block for block in result["blocks"] if block.block == 0)
    return bool(steps) and held and np.array_equal(first.tokens[where], ids)


def paired_ratios(variant_runs: list, stock_runs: list) -> tuple:
    """A variant's seconds over stock's in the same repetition (back to back: the host's drift cancels):
    their median and its 95% bootstrap interval (percentile, 10,000 resamples, fixed seed)."""
    ratios = np.array([v["seconds"] / s["seconds"] for v, s in zip(variant_runs, stock_runs)])
    median = float(np.median(ratios))
    if len(ratios) < 3 or np.ptp(ratios) == 0:
        return median, median, median
    interval = scipy.stats.bootstrap((ratios,), np.median, n_resamples=10_000, method="percentile",
                                     random_state=0).confidence_interval
    return median, float(interval.low), float(interval.high)


def trace_bytes_per_step(model, result: dict, layers: tuple, shift: bool) -> float:
    """JSON bytes per step of a trace holding this run's steps and blocks (a block's lens with it), as saved."""
    canvas, vocab = model.config.canvas_length, model.config.text_config.vocab_size
    info = ModelInfo(name="bench", source="bench", backend="transformers", device="-", dtype="-", canvas_length=canvas,
                     vocab_size=vocab, eos_token_ids=(1,), pad_token_id=0, max_context=10**6, layers=len(model.model.decoder.layers))

    def size(blocks: list) -> int:
        settings = {"max_new_tokens": 256 * max(len(blocks), 1), "record_topk": TOPK, "record_shift": shift,
                    "layers": list(layers) or None}
        trace = Trace(model=info, prompt="bench")
        trace.append(RunStart(prompt_ids=frozen_array([2], np.int32), settings=settings, max_blocks=max(len(blocks), 1)))
        for block in blocks:
            for item in result["items"]:
                if item.block == block.block:
                    trace.append(step_record(item, _NoPieces()))
            trace.append(block_record(block, _NoPieces(), info.eos_token_ids))
        return len(trace.to_json().encode())

    return (size(result["blocks"]) - size([])) / max(len(result["items"]), 1)


def check_lens(model, prompt, layers: tuple, device: str) -> bool:
    """The fast lens against its plain reference on one real step's layer outputs; prints both timings."""
    with LayerTaps(model, layers) as taps:  # a short eager stock run: the taps keep its last step's outputs
        torch.manual_seed(0)
        model.generate(prompt, max_new_tokens=256, max_denoising_steps=2)
        hiddens = taps.take()
    tokens = torch.randint(0, model.config.text_config.vocab_size, hiddens[0].shape[:2], device=hiddens[0].device)
    timed = {}

    def one_product_a_layer(work):  # the head's product on each layer output alone (before they were merged)
        def alone():
            merged, layer_capture.POSITIONS_PER_PRODUCT = layer_capture.POSITIONS_PER_PRODUCT, 1
            try:
                return work()
            finally:
                layer_capture.POSITIONS_PER_PRODUCT = merged
        return alone

    for name, work in (("block_lens", lambda: block_lens(model, hiddens, tokens)),
                       ("block_lens_alone", one_product_a_layer(lambda: block_lens(model, hiddens, tokens))),
                       ("block_lens_reference", lambda: block_lens_reference(model, hiddens, tokens))):
        result = work()  # the first call compiles the fused passes (CUDA) and builds the softcap table
        times = []
        for _ in range(3 if device.startswith("cuda") else 1):
            started = time.perf_counter()
            if device.startswith("cuda"):
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                result = work()
                end.record()
                torch.cuda.synchronize()
                times.append(begin.elapsed_time(end))
            else:
                result = work()
                times.append((time.perf_counter() - started) * 1e3)
        timed[name] = (result, statistics.median(times) / len(hiddens))
    (ids, probs, ranks), (ref_ids, ref_probs, ref_ranks) = timed["block_lens"][0], timed["block_lens_reference"][0]
    same_ids, same_ranks = torch.equal(ids, ref_ids), torch.equal(ranks, ref_ranks)
    prob_gap = (probs.float() - ref_probs.float()).abs().max().item()
    alone = timed["block_lens_alone"][0]
    same_alone = torch.equal(alone[0], ids) and torch.equal(alone[2], ranks)
    head = model.lm_head.weight.dtype  # bf16 on a GPU: the fast path; float32 (the CPU dry run): the reference itself
    print(f"lens ({head} head) on one real step's outputs of layers {layers}: top ids equal to the reference: {same_ids}, "
          f"ranks equal: {same_ranks}, largest probability gap {prob_gap:.2e} (float16); "
          f"one head product a layer gives the same ids and ranks: {same_alone}")
    print(f"| lens (per layer and step) | fast ms (up to {layer_capture.POSITIONS_PER_PRODUCT} positions a product) | "
          "one product a layer ms | reference ms | reference / fast |")
    print("|---|---|---|---|---|")
    quick, one, slow = (timed[name][1] for name in ("block_lens", "block_lens_alone", "block_lens_reference"))
    print(f"| block_lens (top id, probability, rank) | {quick:.3f} | {one:.3f} | {slow:.3f} | {slow / quick:.1f} |")
    print(flush=True)
    return same_ids and same_ranks and prob_gap <= 1e-3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--paths", default="eager,compiled")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="which of them (stock always runs)")
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5, help="timed runs of each variant, alternating")
    parser.add_argument("--layers", default="0,9,19,29", help="the recorded layers of the +layers variants")
    parser.add_argument("--model-layers", type=int, default=30, help="decoder layers of the built model (30: the real one)")
    parser.add_argument("--steps", type=int, default=48, help="denoising steps per block (all of them run)")
    parser.add_argument("--no-hook-guards", action="store_true",
                        help="leave torch.compile's module-hook guards off (its default) and skip the +layers variants: "
                        "run once with and once without on the same machine to see what the guards cost the compiled path")
    parser.add_argument("--dry-run", action="store_true",
                        help="the project's tiny test model on the CPU, 4 steps, 1 repetition, eager: checks the script end to end")
    args = parser.parse_args(argv)
    args.vocab = 3072
    variants = ("stock",) + tuple(v for v in VARIANTS[1:] if v in args.variants.split(","))
    if args.no_hook_guards:  # importing the backends and every capture turn them on: off for the whole run
        layer_capture.HOOK_GUARDS = False
        variants = tuple(v for v in variants if v not in ("captured+layers", "captured+both"))
    guard_hooks()  # in this thread, as every capture does in its own (said here: the compiled figures depend on it)
    if args.dry_run:
        args.device, args.steps, args.reps, args.prompt_length = "cpu", 4, 1, 16
        args.paths = "eager" if args.paths == parser.get_default("paths") else args.paths
    import transformers

    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"device: {name}, torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    started = time.perf_counter()
    model, params, what = build_model(args)
    n_layers = len(model.model.decoder.layers)
    layers = tuple(i for i in (int(x) for x in args.layers.split(",")) if i < n_layers)
    layers = (0, n_layers - 1) if args.dry_run else layers or (n_layers - 1,)
    vocab = model.config.text_config.vocab_size
    canvas = model.config.canvas_length
    shift_bytes = canvas * vocab * 4  # the shift keeps one float32 log-distribution per row (logit_summary.shift_nats)
    print(f"built {what}: {params / 1e9:.3f} B distinct parameters, {n_layers} layers, in {time.perf_counter() - started:.1f} s; "
          f"recording layers {layers}", flush=True)
    prompt = torch.randint(107, vocab, (1, args.prompt_length), generator=torch.Generator().manual_seed(1)).to(args.device)
    lens_ok = check_lens(model, prompt, layers, args.device) if not args.no_hook_guards else True
    rows, firsts, identical, pins_ok = [], [], True, True
    for path in args.paths.split(","):
        compiled = path == "compiled"
        common = dict(compiled=compiled, device=args.device, layers=layers, steps=args.steps)
        warm = time.perf_counter()
        reference = run(model, prompt, seed=11, variant="stock", **common)
        checked = {"stock": reference}
        first_seconds = {"stock": time.perf_counter() - warm}
        for variant in variants[1:]:
            warm = time.perf_counter()
            checked[variant] = run(model, prompt, seed=11, variant=variant, **common)
            first_seconds[variant] = time.perf_counter() - warm
            same = torch.equal(reference["sequences"], checked[variant]["sequences"])
            if variant == "captured+pins":
                again = run(model, prompt, seed=11, variant=variant, **common)
                replays = torch.equal(again["sequences"], checked[variant]["sequences"])
                held = pins_held(checked[variant]) and pins_held(again)
                pins_ok &= held and replays and not same
                print(f"{path}: {variant} pins held at every step and committed: {held}, replays from its seed: "
                      f"{replays}, differs from stock: {not same} (first run {first_seconds[variant]:.1f} s)", flush=True)
                continue
            identical &= same
            print(f"{path}: {variant} identical to stock: {same} (first run {first_seconds[variant]:.1f} s)", flush=True)
        runs = {v: [] for v in variants}
        for rep in range(args.reps):
            for variant in variants if rep % 2 == 0 else variants[::-1]:  # alternate: drift hits every variant alike
                runs[variant].append(run(model, prompt, seed=rep, variant=variant, **common))
                print(f"{path}: {variant} rep {rep}: {runs[variant][-1]['seconds'] / args.steps * 1e3:.2f} ms/step",
                      flush=True)  # a run stopped by a time limit still gives its timings
        median_of = {v: statistics.median(r["seconds"] for r in runs[v]) for v in variants}
        paired_of = {v: paired_ratios(runs[v], runs["stock"]) for v in variants}
        stock = median_of["stock"] / args.steps * 1e3
        captured = median_of.get("captured", float("nan")) / args.steps * 1e3
        for variant in variants:
            per_step = [r["seconds"] / args.steps * 1e3 for r in runs[variant]]
            median = statistics.median(per_step)
            has_layers, has_shift = variant in ("captured+layers", "captured+both"), variant in ("captured+shift", "captured+both")
            nbytes = trace_bytes_per_step(model, checked[variant], layers if has_layers else (), has_shift) if variant != "stock" else 0
            rows.append((path, variant, median, min(per_step), max(per_step), median / stock, median / captured,
                         paired_of[variant], max(r["peak"] for r in runs[variant]), nbytes))
            firsts.append((path, variant, first_seconds[variant], median_of[variant]))
    print(f"\n{what}, {name}, prompt {args.prompt_length}, canvas {canvas}, {args.steps} steps, {args.reps} alternating "
          f"repetitions, layers {','.join(map(str, layers))}, top-{TOPK} candidates in every captured variant\n")
    print("| path | variant | ms/step median (min-max) | x stock | x captured | x stock paired: median [95% interval] "
          "| peak GiB | trace bytes/step |")
    print("|---|---|---|---|---|---|---|---|")
    for path, variant, median, low, high, ratio, to_captured, paired, peak, nbytes in rows:
        print(f"| {path} | {variant} | {median:.2f} ({low:.2f}-{high:.2f}) | {ratio:.3f} | "
              f"{'–' if variant == 'stock' else f'{to_captured:.3f}'} | "
              f"{'–' if variant == 'stock' else f'{paired[0]:.3f} [{paired[1]:.3f}-{paired[2]:.3f}]'} | {peak:.1f} | "
              f"{'–' if variant == 'stock' else f'{nbytes:,.0f}'} |")
    print("\nCompiling, apart from the steady step: each variant's first run (in this order: stock compiles the graph, "
          "captured+layers recompiles it with the hooks on the compiled path) against its median timed run")
    print("| path | variant | first run s | steady run s | first minus steady s |")
    print("|---|---|---|---|---|")
    for path, variant, first, steady in firsts:
        print(f"| {path} | {variant} | {first:.1f} | {steady:.2f} | {first - steady:.1f} |")
    peaks = {(r[0], r[1]): r[8] for r in rows}
    for path in args.paths.split(","):
        if (path, "captured+shift") in peaks and (path, "captured") in peaks:
            measured = peaks[(path, "captured+shift")] - peaks[(path, "captured")]
            print(f"\n{path}: the shift keeps {shift_bytes / 2**20:.0f} MiB a row (canvas {canvas} x vocabulary {vocab:,} x 4 bytes)"
                  + ("" if measured != measured else f"; peak with it {measured:+.2f} GiB against captured"))
    print(f"module-hook guards: {'off (torch default)' if args.no_hook_guards else 'on (as the backends run)'}")
    print(f"the fast lens equal to its reference: {lens_ok}")
    print(f"\nall captured runs bit-identical to stock: {identical}" + (" (the pinned one apart)" if "captured+pins" in variants else ""))
    if "captured+pins" in variants:
        print(f"pins {PINS}: held, committed and replayed on every path: {pins_ok}")
    return 0 if identical and lens_ok and pins_ok else 1


if __name__ == "__main__":
    sys.exit(main())
