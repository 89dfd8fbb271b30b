"""The capture at the real 26B-A4B shape: bit-identical to stock, and what watching costs per step.

    python -m benchmarks.bench_capture_fullshape --paths eager                 # on the GPU machine
    python -m benchmarks.bench_capture_fullshape --paths compiled --reps 5
    python -m benchmarks.bench_capture_fullshape --paths compiled --topk 0           # without the candidates
    python -m benchmarks.bench_capture_fullshape --batch 8 --paths eager,compiled --prompt-lengths 64 --reps 3   # batched
    python -m benchmarks.bench_capture_fullshape --device cpu --layers 2 --experts 8 --vocab 4096 --paths eager --prompt-lengths 16 --reps 1   # dry run
    python -m benchmarks.bench_capture_fullshape --pipeline diffusers --scheduler entropy-bound --paths eager   # diffusers' pipeline

No hub is reachable, so the model is `DiffusionGemmaForBlockDiffusion` built from the published
shape (docs/architecture.md, "The real model's shape": 30 layers, hidden 2816, 128 experts of which 8 are active, 262,144-token
vocabulary, ...) with random bf16 weights, made without ever holding two copies:
1. build on the meta device (no memory), with bf16 as the default dtype;
2. `tie_weights()`, so encoder and decoder share their parameters as in the checkpoint;
3. give each *distinct* parameter one CUDA tensor and set it into every module that shared the
   old one (building directly on the GPU allocates the shared MoE weights twice: ~100 GB);
4. materialize meta buffers and run `_init_weights` on every module (it also recomputes the
   rotary buffers).

For each path (eager; static cache + torch.compile) and each prompt length (64 and 1,024 tokens):
captured runs ("captured": entropy only; "captured+top-k": also the `--topk` candidates of every
position, as the app records by default; "records": that, each step also turned into a StepRecord
with a piece table on a consuming thread, as `bridge.stream` does) must give the same sequences
as stock runs with the same seed, bit for bit; then
stock and captured runs alternate `--reps` times (seeded, so every run takes the same steps) and
the table reports the median ms per denoising step with its min-max, the ratio of the medians
(measured in this run), the paired ratio (each variant's run over stock's in the same repetition, so the
host's drift cancels: its median and 95% bootstrap interval, `bench_layers.paired_ratios`), the peak GPU memory of each, the first step record's latency (from the
`generate` call to the first record in Python), and the bf16 memory floor of a step: reading
every weight the step touches once at the device's bandwidth (`--bandwidth-tbs`, 3.35 for an
H100 SXM, 4.8 for an H200).  Random weights never converge early, so every block runs all its steps.

`--pipeline diffusers` times diffusers' DiffusionGemmaPipeline on the same model object instead, with
`--scheduler` (entropy-bound, discrete-ddim, block-refinement): stock is the pipeline without a
callback, captured is `backends.diffusers_capture` (callback_on_step_end, the scheduler.step wrap,
the encoder pre-hook), with the same seeded generator. Eager only: the pipeline compiles nothing
itself (its static cache is there for a decoder the caller compiles).

`--batch B` runs B prompts of the same length as one batched `generate` (the capture records every
row: B step records a step) against stock batched runs with the same seed; the table adds the canvas
tokens per second of the batch (B x 256 / seconds).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from backends.capture import capture_steps
from benchmarks.bench_layers import paired_ratios

# The published shape of google/diffusiongemma-26B-A4B-it (docs/architecture.md, "The real model's shape").
REAL_SHAPE = dict(
    vocab_size=262_144, hidden_size=2816, intermediate_size=2112, num_hidden_layers=30, num_attention_heads=16,
    num_key_value_heads=8, num_global_key_value_heads=2, head_dim=256, global_head_dim=512, num_experts=128,
    top_k_experts=8, moe_intermediate_size=704, sliding_window=1024, max_position_embeddings=8192,
)
TINY_VISION = dict(  # the checkpoint's vision tower plays no part in text generation
    model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
    num_attention_heads=1, num_key_value_heads=1, head_dim=16,
)


def full_shape_config(*, layers: int, experts: int, vocab: int):
    from transformers import DiffusionGemmaConfig

    text = dict(REAL_SHAPE, num_hidden_layers=layers, num_experts=experts, top_k_experts=min(8, experts), vocab_size=vocab)
    text |= dict(use_bidirectional_attention="vision", pad_token_id=0, eos_token_id=1, bos_token_id=2)
    return DiffusionGemmaConfig(text_config=text, vision_config=TINY_VISION, canvas_length=256)


def build(config, device: str):
    """Meta build, tie, one allocation per distinct tensor, init: see the module docstring."""
    from transformers import DiffusionGemmaForBlockDiffusion
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            model = DiffusionGemmaForBlockDiffusion(config)
    finally:
        torch.set_default_dtype(previous)
    model.tie_weights()
    real: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            if id(param) not in real:
                real[id(param)] = torch.nn.Parameter(torch.empty(param.shape, dtype=param.dtype, device=device),
                                                     requires_grad=False)
            module._parameters[name] = real[id(param)]
        for name, buffer in list(module._buffers.items()):
            if buffer is not None and buffer.is_meta:
                module._buffers[name] = torch.zeros(buffer.shape, dtype=buffer.dtype, device=device)
    torch.manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            try:
                model._init_weights(module)
            except KeyError:  # transformers 5.17's vision rotary embedding ('axial'); not on the text path
                pass
    model.eval()
    g = model.generation_config
    g.eos_token_id, g.pad_token_id = [1, 106], 0
    g.max_denoising_steps, g.t_min, g.t_max = 48, 0.4, 0.8
    g.stability_threshold, g.confidence_threshold = 1, 0.005
    g.sampler_config = EntropyBoundSamplerConfig(entropy_bound=0.1)
    with torch.no_grad():  # random weights put an EOS in every other canvas; keep each block full
        model.get_output_embeddings().weight[[1, 106]] = 0
    return model, sum(p.numel() for p in real.values())


def step_floor_ms(model, bandwidth_tbs: float) -> float:
    """Bytes a step must read once (every distinct weight: 256 canvas tokens reach nearly all experts)."""
    weights = {id(p): p for p in model.parameters()}.values()
    nbytes = sum(p.numel() * p.element_size() for p in weights)
    return nbytes / (bandwidth_tbs * 1e12) * 1e3


def add_shape_arguments(parser) -> None:
    """--device and the model's shape (the real one by default; smaller only for a dry run on the CPU)."""
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--layers", type=int, default=REAL_SHAPE["num_hidden_layers"])
    parser.add_argument("--experts", type=int, default=REAL_SHAPE["num_experts"])
    parser.add_argument("--vocab", type=int, default=REAL_SHAPE["vocab_size"], help="smaller only for a dry run")


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step_recorder():
    """(steps, first-record latency, start time, on_step): what each timed run collects, shared by both pipelines."""
    steps, first, started = [], [], [0.0]

    def on_step(step):
        if not first:
            first.append(time.perf_counter() - started[0])
        steps.append(step)

    return steps, first, started, on_step


def generate(model, prompt, *, seed: int, compiled: bool, variant: str, device: str, topk: int) -> dict:
    """One run: sequences, seconds, steps, peak memory, and the first record's latency."""
    steps, first, started, on_step = step_recorder()

    kwargs = dict(max_new_tokens=256, cache_implementation="static" if compiled else None)
    torch.manual_seed(seed)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    sync(device)
    started[0] = time.perf_counter()
    if variant == "stock":
        out = model.generate(prompt, **kwargs)
    elif variant == "records":
        with RecordConsumer() as consumer, capture_steps(model, lambda s: (on_step(s), consumer.put(s)), lambda b: None, topk=topk):
            out = model.generate(prompt, **kwargs)
    else:
        with capture_steps(model, on_step, lambda block: None, topk=topk if variant == "captured+top-k" else 0):
            out = model.generate(prompt, **kwargs)
    sync(device)
    seconds = time.perf_counter() - started[0]
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    return dict(sequences=out.sequences.cpu(), seconds=seconds, steps=len(steps), peak_gib=peak,
                first_s=first[0] if first else float("nan"))


def generate_diffusers(model, prompt, *, seed: int, compiled: bool, variant: str, device: str, topk: int, scheduler: str) -> dict:
    """One run of diffusers' pipeline, stock or captured, measured as `generate` measures transformers'."""
    from diffusers import DiffusionGemmaPipeline

    from backends.diffusers_backend import IdsProcessor, scheduler_for
    from backends.diffusers_capture import CALLBACK_TENSORS, capture_pipeline
    from visualizer.settings import GenerationSettings

    if compiled:
        raise SystemExit("--pipeline diffusers times the eager path only")
    settings = GenerationSettings(sampler=scheduler, entropy_bound=0.1, t_min=0.4, t_max=0.8, temperature=0.0,
                                  corrector_steps=0, corrector_k=1, refine_threshold=0.95)
    pipe = DiffusionGemmaPipeline(model=model, scheduler=scheduler_for(settings), processor=IdsProcessor(None, prompt[0].tolist()))
    pipe.set_progress_bar_config(disable=True)
    steps, first, started, on_step = step_recorder()

    kwargs = dict(prompt="", gen_length=256, num_inference_steps=48, output_type="seq",
                  generator=torch.Generator(device=device).manual_seed(seed))
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    sync(device)
    started[0] = time.perf_counter()
    if variant == "stock":
        out = pipe(**kwargs)
    else:
        with capture_pipeline(pipe, on_step, lambda block: None, topk=topk if variant == "captured+top-k" else 0,
                              scaled_entropy=scheduler == "entropy-bound", eos_ids=(1,), pad_id=0) as capture:
            out = pipe(callback_on_step_end=capture.callback, callback_on_step_end_tensor_inputs=CALLBACK_TENSORS, **kwargs)
            capture.finish(out.sequences)
    sync(device)
    seconds = time.perf_counter() - started[0]
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    return dict(sequences=out.sequences.cpu(), seconds=seconds, steps=len(steps), peak_gib=peak,
                first_s=first[0] if first else float("nan"))


class RecordConsumer:
    """What `bridge.stream` does with each captured step: a consuming thread turns it into a
    StepRecord with the run's piece table (`captured.step_record`), while the model's thread goes on.
    The stand-in tokenizer decodes an id to a short string (no tokenizer has the random vocabulary)."""

    class _Tokenizer:
        def batch_decode(self, ids, skip_special_tokens=False):
            return [f"<{i[0]}>" for i in ids]

    def __enter__(self):
        import queue
        import threading

        from backends.text import PieceTable

        self.queue = queue.Queue(maxsize=64 * 64)
        tables: dict[int, PieceTable] = {}

        def consume():
            from backends.captured import step_record

            while (item := self.queue.get()) is not None:
                if item.row not in tables:
                    tables[item.row] = PieceTable(self._Tokenizer())
                step_record(item, tables[item.row])

        self.thread = threading.Thread(target=consume, name="records")
        self.thread.start()
        return self

    def put(self, item) -> None:
        self.queue.put(item)

    def __exit__(self, *exc):
        self.queue.put(None)
        self.thread.join()  # every record built: its time counts


def variants(topk: int) -> list[str]:
    """Stock, captured, captured with the top-k candidates and captured into records (as the
    backend does) unless --topk is 0."""
    return ["stock", "captured"] + (["captured+top-k", "records"] if topk else [])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--paths", default="eager,compiled")
    parser.add_argument("--prompt-lengths", default="64,1024")
    parser.add_argument("--reps", type=int, default=5, help="timed runs of each variant, alternating")
    parser.add_argument("--batch", type=int, default=1, help="prompts per generate call (rows of one batch)")
    parser.add_argument("--layers", type=int, default=REAL_SHAPE["num_hidden_layers"])
    parser.add_argument("--experts", type=int, default=REAL_SHAPE["num_experts"])
    parser.add_argument("--vocab", type=int, default=REAL_SHAPE["vocab_size"], help="smaller only for a dry run")
    parser.add_argument("--topk", type=int, default=5, help="candidates per position of the top-k variant; 0 leaves it out")
    parser.add_argument("--bandwidth-tbs", type=float, default=3.35, help="device memory bandwidth (H100 SXM 3.35)")
    parser.add_argument("--pipeline", choices=("transformers", "diffusers"), default="transformers",
                        help="whose generation loop to time: transformers' generate or diffusers' DiffusionGemmaPipeline")
    parser.add_argument("--scheduler", default="entropy-bound", choices=("entropy-bound", "discrete-ddim", "block-refinement"),
                        help="--pipeline diffusers: which scheduler")
    args = parser.parse_args(argv)
    run = generate
    if args.pipeline == "diffusers":
        import functools

        run = functools.partial(generate_diffusers, scheduler=args.scheduler)
    import transformers

    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"device: {name}, torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    started = time.perf_counter()
    model, params = build(full_shape_config(layers=args.layers, experts=args.experts, vocab=args.vocab), args.device)
    floor = step_floor_ms(model, args.bandwidth_tbs)
    print(f"built {params / 1e9:.2f} B distinct parameters in {time.perf_counter() - started:.1f} s; "
          f"bf16 floor {floor:.1f} ms/step at {args.bandwidth_tbs} TB/s", flush=True)
    names = variants(args.topk)
    if args.pipeline == "diffusers":  # the records variant times transformers' batched capture
        if args.batch != 1:
            raise SystemExit("--pipeline diffusers runs batch 1 (the backend's)")
        names = [v for v in names if v != "records"]
    rows, identical = [], True
    for path in args.paths.split(","):
        compiled = path == "compiled"
        for length in (int(n) for n in args.prompt_lengths.split(",")):
            prompt = torch.randint(107, args.vocab, (args.batch, length),
                                   generator=torch.Generator().manual_seed(length)).to(args.device)
            warm = time.perf_counter()
            reference = run(model, prompt, seed=11, compiled=compiled, variant="stock", device=args.device, topk=args.topk)
            for variant in names[1:]:
                same = torch.equal(reference["sequences"],
                                   run(model, prompt, seed=11, compiled=compiled, variant=variant, device=args.device, topk=args.topk)["sequences"])
                identical &= same
                print(f"{path} prompt {length}: {variant} identical to stock: {same}", flush=True)
            print(f"{path} prompt {length}: checks and warm-up {time.perf_counter() - warm:.0f} s", flush=True)
            runs = {v: [] for v in names}
            for rep in range(args.reps):
                order = names if rep % 2 == 0 else names[::-1]  # alternate, so drift hits every variant alike
                for variant in order:
                    runs[variant].append(run(model, prompt, seed=rep, compiled=compiled, variant=variant, device=args.device, topk=args.topk))
                    print(f"{path} prompt {length} {variant} rep {rep}: {runs[variant][-1]['seconds'] / 48 * 1e3:.2f} ms/step",
                          flush=True)  # a run stopped by the time limit still gives its timings
            stock_median = statistics.median(r["seconds"] / 48 for r in runs["stock"]) * 1e3
            for variant in names:
                per_step = [r["seconds"] / 48 * 1e3 for r in runs[variant]]
                median = statistics.median(per_step)
                rows.append(dict(
                    path=path, prompt=length, variant=variant, median=median, low=min(per_step), high=max(per_step),
                    ratio=median / stock_median, paired=paired_ratios(runs[variant], runs["stock"]), peak=max(r["peak_gib"] for r in runs[variant]),
                    first=statistics.median(r["first_s"] for r in runs[variant]) * 1e3, floor=median / floor,
                    tokens=args.batch * 256 * 1e3 / (median * 48),
                ))
                print(f"{path} prompt {length} {variant}: {median:.2f} ms/step ({min(per_step):.2f}-{max(per_step):.2f})",
                      flush=True)
    print(f"\n{args.pipeline}" + (f" ({args.scheduler})" if args.pipeline == "diffusers" else "")
          + f", {name}, {params / 1e9:.2f} B parameters ({args.layers} layers, {args.experts} experts), batch {args.batch}, canvas 256, "
          f"48 steps, {args.reps} alternating repetitions; floor = {floor:.1f} ms/step\n")
    print("| path | prompt | variant | ms/step median (min-max) | ratio to stock | x stock paired: median [95% interval] "
          "| canvas tok/s | peak GiB | first record ms | x floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        first = "–" if r["variant"] == "stock" else f"{r['first']:.0f}"
        paired = "–" if r["variant"] == "stock" else "{:.3f} [{:.3f}-{:.3f}]".format(*r["paired"])
        print(f"| {r['path']} | {r['prompt']} | {r['variant']} | {r['median']:.2f} ({r['low']:.2f}-{r['high']:.2f}) | "
              f"{r['ratio']:.3f} | {paired} | {r['tokens']:.0f} | {r['peak']:.1f} | {first} | {r['floor']:.2f} |")
    print(f"\nall captured runs bit-identical to stock: {identical}")
    from backends import logit_summary

    if args.topk:  # which implementation summarized the logits (Triton kernels, or the torch.compile fallback)
        print(f"top-{args.topk} summary computed by: {'triton' if logit_summary.triton_in_use() else 'torch.compile'}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
