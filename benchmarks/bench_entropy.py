"""The capture's per-step summary of the logits: every way of computing it, checked and timed on one real-shaped step.

    python -m benchmarks.bench_entropy                     # on the GPU machine (H100 or H200): 256 x 262,144, ~3 minutes
    python -m benchmarks.bench_entropy --device cpu --canvas 16 --vocab 16384 --rep-ms 5 --no-sweep   # a dry run here

The logits: batch 1, canvas 256, vocabulary 262,144, float32 (268 MB), made on the device: softcapped
at 30 and divided by a schedule temperature, from near-flat to near-certain rows, with rows a processor
masked (-inf outside 2% of the vocabulary), near-one-hot rows, plain N(0, 3) rows, rows of coarse
(bfloat16) values tied across slices, and four edge rows: +inf in one, NaN in one, only three finite
logits (the rest of the top-k is -inf), none finite.

The variants (k = --topk, 5 by default):

    read floor                  x.amax(-1): one read of the logits and nothing else, the memory floor
    categorical                 Categorical(logits).entropy(), the sampler's formula (the capture of old)
    compiled entropy            torch.compile'd logit_summary.summarize_in_torch, entropy only
    compiled + top-k two-stage  the same with the top-k in two torch.topk stages (the CUDA path until issue 12)
    compiled + top-k one pass   the same with one torch.topk over the vocabulary
    inductor sort top-k         one pass with Inductor's sort-based topk (decompose_sort_ops), with --inductor-sort
                                where this torch has it: it sorts all 262,144 ids of a row, and may compile for minutes
    triton entropy              logit_summary_triton's kernels, k = 0
    triton + top-k              the kernels with the default launch plan (the CUDA path now), k = 1, k, 16
    triton plan B/S/W           --topk with other chunk sizes B, slices per row S, warps W (--no-sweep skips them)

Each variant is first checked: its entropy against the float64 entropy (max difference over the rows
where it is finite; NaN exactly where the float64 one is) and against the sampler's float32 value;
its ids against the first k of a stable descending sort ("exact": the same ids, ties to the lowest
id, as the kernels promise; "values": torch.topk's values, other ids of a tied value; else "WRONG");
its probabilities against the float64 softmax at those ids. The kernels write into outputs poisoned
first (NaN, -7), so a slot they leave unwritten fails the check. Then it is timed: on CUDA with
`triton.testing.do_bench` (warm-up, L2 cleared before every call, median of --rep-ms worth of calls)
over --buffers copies of the logits used in turn; "host us" is the CPU time of one call with the GPU
idle (launch overhead, which a step pays too). The table comes last; "x floor" is the time over the
read floor's.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

import torch

from backends.logit_summary import summarize_in_torch

SWEEP = [(2048, 16, 4), (4096, 8, 8), (4096, 32, 8), (8192, 16, 8), (1024, 64, 4), (2048, 32, 4)]  # (block, slices, warps)


def step_logits(canvas: int, vocab: int, device: str) -> torch.Tensor:
    """(canvas, vocab) float32 logits shaped like a real step's, with the awkward rows the docstring lists."""
    g = torch.Generator(device=device).manual_seed(0)
    scale = torch.logspace(-1, 1.5, canvas, device=device)[:, None]
    x = torch.tanh(torch.randn(canvas, vocab, generator=g, device=device) * scale / 30) * 30 / 0.4
    rows = torch.arange(canvas, device=device)
    masked = rows[rows % 8 == 1]
    keep = torch.rand(len(masked), vocab, generator=g, device=device) < 0.02
    x[masked] = torch.where(keep, x[masked], -float("inf"))
    x[rows[rows % 8 == 2], 7] += 40  # near one-hot
    x[rows[rows % 8 == 5]] = torch.randn(len(rows[rows % 8 == 5]), vocab, generator=g, device=device) * 3
    tied = rows[rows % 8 == 3]
    x[tied] = x[tied].to(torch.bfloat16).float()
    x[tied[:, None], torch.tensor([5, vocab // 2, vocab - 3], device=device)] = x[tied].amax(-1, keepdim=True) + 1
    x[-4, vocab // 3] = float("inf")
    x[-3, vocab // 5] = float("nan")
    x[-2] = -float("inf")
    x[-2, [0, vocab // 2, vocab - 1]] = torch.tensor([1.0, 2.0, 1.0], device=device)
    x[-1] = -float("inf")
    return x


def timed(fn, buffers: list[torch.Tensor], *, device: str, rep_ms: int) -> tuple[float, float]:
    """(median ms per call, host us per call): do_bench on CUDA over the buffers in turn; perf_counter elsewhere."""
    turn = iter(range(10**9))

    def call():
        return fn(buffers[next(turn) % len(buffers)])

    call()
    call()  # compilation, first launches
    if not device.startswith("cuda"):
        times = []
        deadline = time.perf_counter() + rep_ms / 1e3
        while not times or time.perf_counter() < deadline:
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1e3)
        return statistics.median(times), statistics.median(times) * 1e3
    import triton.testing

    ms = triton.testing.do_bench(call, warmup=25, rep=rep_ms, return_mode="median")
    host = []
    for _ in range(20):
        torch.cuda.synchronize()
        started = time.perf_counter()
        call()
        host.append((time.perf_counter() - started) * 1e6)
    torch.cuda.synchronize()
    return ms, statistics.median(host)


class Reference:
    """What every variant is checked against, computed once: float64 entropy, the sampler's, a stable sort."""

    def __init__(self, x: torch.Tensor, k_max: int):
        self.x = x
        self.truth = torch.distributions.Categorical(logits=x.double(), validate_args=False).entropy()
        self.sampler = torch.distributions.Categorical(logits=x, validate_args=False).entropy()
        self.order = torch.sort(x, dim=-1, descending=True, stable=True).indices[:, :k_max].clone()  # not the whole sort
        self.topk_values = {}

    def check(self, entropy: torch.Tensor, ids: torch.Tensor | None, probs: torch.Tensor | None) -> dict:
        entropy = entropy.reshape(self.truth.shape)
        finite = ~torch.isnan(self.truth)
        nan_ok = torch.equal(torch.isnan(entropy), ~finite)
        result = dict(
            to_truth=(entropy.double() - self.truth)[finite].abs().max().item(),
            to_sampler=(entropy - self.sampler)[finite & ~torch.isnan(self.sampler)].abs().max().item(),
            nan_ok=nan_ok, ids="–", probs=float("nan"),
        )
        if ids is None:
            return result
        ids = ids.reshape(self.x.shape[0], -1).long()
        k = ids.shape[1]
        if k not in self.topk_values:
            self.topk_values[k] = torch.topk(self.x, k, dim=-1).values
        if torch.equal(ids, self.order[:, :k]):
            result["ids"] = "exact"
        elif ids.min() >= 0 and torch.allclose(self.x.gather(-1, ids.clamp(0, self.x.shape[1] - 1)), self.topk_values[k],
                                                rtol=0, atol=0, equal_nan=True):
            result["ids"] = "values"
        else:
            result["ids"] = "WRONG"
        if result["ids"] != "WRONG":
            expected = torch.softmax(self.x.double(), dim=-1).gather(-1, ids)
            ours = probs.reshape(expected.shape).double()
            good = finite[:, None] & (expected > 1e-4)  # float16 keeps ~3 digits; below 1e-4 it is subnormal
            result["probs"] = ((ours - expected).abs() / expected)[good.expand_as(expected)].max().item()
        return result


def summary_of(out) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(entropy, ids, probs) of what a variant returns: an entropy tensor, a LogitSummary or the kernels' tuple."""
    return (out, None, None) if isinstance(out, torch.Tensor) else tuple(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--canvas", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=262_144)
    parser.add_argument("--topk", type=int, default=5)
    parser.add_argument("--rep-ms", type=int, default=300, help="how long do_bench times each variant")
    parser.add_argument("--buffers", type=int, default=3, help="copies of the logits used in turn")
    parser.add_argument("--no-sweep", action="store_true", help="skip the other launch plans")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants (slow to compile)")
    parser.add_argument("--inductor-sort", action="store_true", help="also Inductor's sort-based topk, where this torch has it")
    args = parser.parse_args(argv)
    cuda = args.device.startswith("cuda")
    if not cuda:
        os.environ.setdefault("TRITON_INTERPRET", "1")  # the kernels on CPU tensors; before triton is imported
    try:
        import triton

        from backends import logit_summary_triton as kernels
    except ImportError as error:
        triton, kernels = None, None
        print(f"no Triton ({error}): its variants are left out", flush=True)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    import torch._inductor.config as inductor_config

    inductor_sort = hasattr(inductor_config.triton, "decompose_sort_ops")
    print(f"device: {name}, torch {torch.__version__}, triton {triton.__version__ if triton else '–'}; "
          f"logits ({args.canvas}, {args.vocab}) float32; Inductor's topk: "
          f"{'aten fallback; a sort-based lowering exists (decompose_sort_ops, --inductor-sort)' if inductor_sort else 'aten fallback only'}",
          flush=True)

    x = step_logits(args.canvas, args.vocab, args.device)
    buffers = [x] + [x.clone() for _ in range(args.buffers - 1)]
    started = time.perf_counter()
    reference = Reference(x, max(16, args.topk))
    print(f"references in {time.perf_counter() - started:.1f} s", flush=True)
    k = args.topk

    variants = {"read floor": lambda t: t.amax(dim=-1), "categorical": lambda t: torch.distributions.Categorical(logits=t, validate_args=False).entropy()}
    if not args.no_compile:
        compile_ = functools.partial(torch.compile, dynamic=False)
        variants["compiled entropy"] = compile_(functools.partial(summarize_in_torch, k=0))
        variants[f"compiled + top-{k} two-stage"] = compile_(functools.partial(summarize_in_torch, k=k, two_stage=True))
        variants[f"compiled + top-{k} one pass"] = compile_(functools.partial(summarize_in_torch, k=k, two_stage=False))
        if inductor_sort and cuda and args.inductor_sort:
            variants[f"inductor sort top-{k}"] = torch.compile(functools.partial(summarize_in_torch, k=k, two_stage=False), dynamic=False,
                                                               options={"triton.decompose_sort_ops": True})
    plans = {}
    if kernels is not None:
        default = (kernels.BLOCK, kernels.SLICES, kernels.NUM_WARPS)
        plans["triton entropy"] = (0, default)
        for kk in sorted({1, k, 16}):
            plans[f"triton + top-{kk}"] = (kk, default)
        if not args.no_sweep:
            for plan in SWEEP:
                plans[f"triton plan {plan[0]}/{plan[1]}/{plan[2]} top-{k}"] = (k, plan)
        for label, (kk, (block, slices, warps)) in plans.items():
            variants[label] = functools.partial(kernels.summarize_triton, k=kk, block=block, slices=slices, num_warps=warps)

    rows = []
    for label, fn in variants.items():
        try:
            if label in plans:  # into poisoned outputs: every slot must be written
                kk, (block, slices, warps) = plans[label]
                entropy = torch.full((args.canvas,), float("nan"), device=args.device)
                ids = torch.full((args.canvas, kk), -7, dtype=torch.int32, device=args.device) if kk else None
                probs = torch.full((args.canvas, kk), float("nan"), dtype=torch.float16, device=args.device) if kk else None
                launched = kernels.summarize_into(x, kk, entropy, ids, probs, block=block, slices=slices, num_warps=warps)
                regs = f"{launched.n_regs} regs, {launched.n_spills} spills" if launched is not None and hasattr(launched, "n_regs") else "–"
            else:
                entropy, ids, probs = summary_of(fn(x))
                regs = "–"
            checked = reference.check(entropy, ids, probs) if label != "read floor" else None
            ms, host_us = timed(fn, buffers, device=args.device, rep_ms=args.rep_ms)
        except Exception as error:  # noqa: BLE001 - report a variant that fails and go on to the next
            print(f"{label}: FAILED {type(error).__name__}: {str(error)[:300]}", flush=True)
            rows.append((label, None, None, None, None))
            continue
        rows.append((label, ms, host_us, checked, regs))
        print(f"{label}: {ms:.3f} ms, host {host_us:.0f} us, {checked}, {regs}", flush=True)

    floor = rows[0][1]
    gbytes = x.numel() * x.element_size() / 1e9
    timing = f"median of do_bench ({args.rep_ms} ms, L2 cleared)" if cuda else "median of perf_counter (CPU: Triton interpreted)"
    print(f"\n{name}, torch {torch.__version__}, triton {triton.__version__ if triton else '–'}; logits ({args.canvas}, "
          f"{args.vocab}) float32 = {gbytes * 1e3:.0f} MB; {timing}, {args.buffers} buffers in turn; top-k = {k}\n")
    print("| variant | ms | x floor | GB/s | host us | max diff to float64, nats | to sampler, nats | NaN rows right | ids | probs max rel diff | kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, ms, host_us, checked, regs in rows:
        if ms is None:
            print(f"| {label} | FAILED | | | | | | | | | |")
            continue
        c = checked or dict(to_truth=float("nan"), to_sampler=float("nan"), nan_ok="–", ids="–", probs=float("nan"))
        print(f"| {label} | {ms:.3f} | {ms / floor:.2f} | {gbytes / ms * 1e3:.0f} | {host_us:.0f} | {c['to_truth']:.2e} | "
              f"{c['to_sampler']:.2e} | {c['nan_ok']} | {c['ids']} | {c['probs']:.1e} | {regs} |")
    good = [(ms, label) for label, ms, _, c, _ in rows
            if ms is not None and c and c["ids"] == "exact" and c["nan_ok"] and f"top-{k}" in label]
    old = next((ms for label, ms, *_ in rows if label == f"compiled + top-{k} two-stage"), None)
    if good:
        best_ms, best = min(good)
        print(f"\nfastest with exact top-{k}: {best} ({best_ms:.3f} ms"
              + (f"; the two-stage compiled one took {old:.3f} ms, {old / best_ms:.1f}x" if old else "") + ")")
    return 0 if all(r[1] is not None for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
