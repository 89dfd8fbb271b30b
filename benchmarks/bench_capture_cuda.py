"""The capture on a GPU: bit-identical to stock generation, and what it costs per step.

    python -m benchmarks.bench_capture_cuda                 # on the GPU machine (CUDA)
    python -m benchmarks.bench_capture_cuda --topk 0                        # the capture without candidates
    python -m benchmarks.bench_capture_cuda --device cpu --sizes tiny --reps 1 --vocab 8192   # a dry run here

For each model size and each path (eager; static cache + torch.compile with CUDA graphs), it
1. checks that `capture_steps` (the backend's real capture, CPU copies included, with the
   `--topk` candidates of every position: 5 by default, as the app records) leaves the
   sequences of `model.generate` bit-identical, for one block and for three blocks;
2. times stock and captured runs alternately, `--reps` times each, on the same seed (same steps),
   and prints the median time per denoising step of each and their ratio, measured in this run.
Models are DiffusionGemma with random bf16 weights at the real vocabulary (262,144) and the real
head sizes; "mid" is a scaled-down 26B (fewer layers and experts) so a run fits in minutes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from backends.capture import capture_steps
from backends.small_models import Preset, small_config

SIZES = {
    # hidden, layers, heads, kv heads, head dim, dense MLP, experts, top-k, expert MLP
    "tiny": Preset(64, 2, 2, 1, 32, 128, 4, 2, 32, 4096),
    "mid": Preset(1024, 6, 8, 4, 256, 2112, 16, 4, 704, 4096),
}
REAL_VOCAB = 262_144


def build(size: str, device: str, vocab: int):
    from transformers import DiffusionGemmaForBlockDiffusion
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    model = DiffusionGemmaForBlockDiffusion(small_config(vocab, SIZES[size])).to(device=device, dtype=dtype).eval()
    g = model.generation_config
    g.eos_token_id, g.pad_token_id = [1, 106], 0
    g.max_denoising_steps, g.t_min, g.t_max = 48, 0.4, 0.8
    g.stability_threshold, g.confidence_threshold = 1, 0.005
    g.sampler_config = EntropyBoundSamplerConfig(entropy_bound=0.1)
    # Random weights put an EOS in a canvas about every other time; pin EOS logits low so runs fill every block.
    with torch.no_grad():
        model.get_output_embeddings().weight[[1, 106]] = 0
    return model


def run(model, prompt, *, seed, max_new_tokens, compiled, capture, topk=0):
    steps = []
    torch.manual_seed(seed)
    kwargs = dict(max_new_tokens=max_new_tokens, cache_implementation="static" if compiled else None)
    if capture:
        with capture_steps(model, steps.append, lambda block: None, topk=topk):
            out = model.generate(prompt, **kwargs)
    else:
        out = model.generate(prompt, **kwargs)
    return out.sequences.cpu(), steps


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(model, prompt, device, *, compiled, reps, topk):
    """Median seconds per step of stock and captured runs, alternating so drift hits both alike."""
    stock, captured = [], []
    steps_per_run = 48  # random weights never converge early: every block runs all its steps
    for rep in range(reps):
        for capture, bucket in ((False, stock), (True, captured)) if rep % 2 == 0 else ((True, captured), (False, stock)):
            sync(device)
            start = time.perf_counter()
            run(model, prompt, seed=rep, max_new_tokens=256, compiled=compiled, capture=capture, topk=topk)
            sync(device)
            bucket.append((time.perf_counter() - start) / steps_per_run)
    return statistics.median(stock), statistics.median(captured)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", default="tiny,mid")
    parser.add_argument("--paths", default="eager,compiled")
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--vocab", type=int, default=REAL_VOCAB)
    parser.add_argument("--topk", type=int, default=5, help="candidates recorded per position; 0: none")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda"):
        print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    import transformers

    print(f"transformers {transformers.__version__}", flush=True)
    rows = []
    for size in args.sizes.split(","):
        model = build(size, args.device, args.vocab)
        params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
        prompt = torch.randint(107, args.vocab, (1, 64), generator=torch.Generator().manual_seed(1)).to(args.device)
        for path in args.paths.split(","):
            compiled = path == "compiled"
            start = time.perf_counter()
            equal = True
            for max_new_tokens in (256, 768):
                a, _ = run(model, prompt, seed=11, max_new_tokens=max_new_tokens, compiled=compiled, capture=False)
                b, steps = run(model, prompt, seed=11, max_new_tokens=max_new_tokens, compiled=compiled, capture=True, topk=args.topk)
                same = torch.equal(a, b)
                equal &= same
                print(f"{size} {path} {max_new_tokens} tokens: identical={same}, {len(steps)} steps captured, "
                      f"entropy range {min(s.entropy_nats.min() for s in steps):.3f}..{max(s.entropy_nats.max() for s in steps):.3f} nats",
                      flush=True)
            warm = time.perf_counter() - start
            stock, captured = measure(model, prompt, args.device, compiled=compiled, reps=args.reps, topk=args.topk)
            rows.append((size, f"{params / 1e6:.0f}M", path, equal, stock * 1e3, captured * 1e3, captured / stock, warm))
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    print(f"\ncaptured with the top-{args.topk} candidates of every position" if args.topk else "\ncaptured without candidates")
    print("| size | params | path | identical | stock ms/step | captured ms/step | ratio | checks + warm-up s |")
    print("|---|---|---|---|---|---|---|---|")
    for size, params, path, equal, stock, captured, ratio, warm in rows:
        print(f"| {size} | {params} | {path} | {equal} | {stock:.2f} | {captured:.2f} | {ratio:.3f} | {warm:.0f} |")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
