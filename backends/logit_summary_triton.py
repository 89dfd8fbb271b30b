"""The capture's logit summary as two Triton kernels: one read of the logits for the entropy and the top-k.

    from backends.logit_summary_triton import summarize_triton
    entropy, ids, probs = summarize_triton(logits, k=5)   # the fields of logit_summary.LogitSummary

`backends.logit_summary.summarize_logits` calls this on CUDA; import it only where Triton is
installed. It imports nothing of the project (logit_summary imports it, lazily). Two launches:

1. `_slice_kernel`, one program per (row, slice of `slice_len` ids): reads its slice once, in
   chunks of BLOCK, and keeps, online, the slice's max m, s = sum exp(x - m), t = sum exp(x - m) (x - m)
   (the max-shifted entropy's parts, rescaled when m grows) and its own best K candidates.
2. `_combine_kernel`, one program per row: merges the slices' parts into the entropy
   H = log s - t / s and their candidates into the row's top K with their probabilities
   exp(x - m) / s, the same formulas as `logit_summary.summarize_in_torch`.

A candidate is one int64, (order key of the value) << 32 | (0x7FFFFFFF - id), so one integer max
gives the best value and, among equal values, the lowest id. The key orders floats as torch.topk
does: -0.0 equals 0.0, NaN ranks above +inf. So the candidates are exactly the first K of a stable
descending sort of the row (`torch.sort(x, descending=True, stable=True)`): torch.topk's values, and
among tied values the lowest ids (torch.topk may pick other ids of an equal value).

The slice kernel keeps its best K in an unordered vector: a chunk's best element enters only if it
beats the worst kept one (`floor`), so the search is a `while` loop of integer maxima over the chunk
that runs K times on a slice's first chunk and, on random logits, ever fewer times after it.
Rows holding NaN or +inf give a NaN entropy and NaN probabilities, as
`torch.distributions.Categorical` does; their ids still follow the order above.

Under TRITON_INTERPRET=1 the same kernels run on CPU tensors: tests/test_logit_summary_triton.py
checks them that way. Pitfalls of Triton's interpreter (3.6) met here:
- It must be on when triton is first imported (tl.max and the like are jit functions made then)
  and while the kernels run; torch.compile imports triton wherever it is installed.
- A `range` over tensor bounds fails with numpy 2.4 (a 1-element array is no index): the number
  of chunks per slice is a constexpr, CHUNKS.
- `libdevice.exp` returns None in it, so `tl.exp` is used (ex2.approx.f32 in the sm_90 PTX);
  the benchmark reports the entropy's distance to float64 on the GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

MAX_TOPK = 16  # next_power_of_2(k) candidates per program live in registers; logit_summary.TRITON_MAX_TOPK
# Launch plan: 256 x 262,144 float32 logits make 256 rows x 16 slices = 4,096 programs (~31 per H100 SM),
# each reading 8 chunks of 2,048 ids with 4 warps (16 per thread; 80 registers, no spills at sm_90). The
# fastest of the seven plans benchmarks/bench_entropy.py timed on an H100: 0.215 ms for the top-5 of a step
# (4096 / 16 / 8 warps, the first choice: 0.307 ms; BENCHMARKS.md, "Second measurement").
BLOCK = 2048
SLICES = 16
NUM_WARPS = 4

_EMPTY = tl.constexpr(-(2**63))  # a candidate slot holding nothing: below every real candidate
_NEVER = tl.constexpr(2**63 - 1)  # a padding slot (k < its power of two): never the worst, never replaced


@triton.jit
def _order_key(x):
    """int32 keys that order float32 values as torch.topk does: -0.0 == 0.0, every NaN above +inf."""
    bits = x.to(tl.int32, bitcast=True)
    key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)
    key = tl.where(x == 0.0, 0, key)
    return tl.where(x != x, 0x7FFFFFFF, key)


@triton.jit
def _key_value(key):
    """The float32 value of an order key (NaN for the NaN key; 0.0 for both zeros)."""
    bits = tl.where(key >= 0, key, key ^ 0x7FFFFFFF)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _slice_kernel(
    logits_ptr, row_stride, vocab, slice_len,
    peak_ptr, total_ptr, moment_ptr, cand_ptr,
    K: tl.constexpr, KP: tl.constexpr, BLOCK: tl.constexpr, CHUNKS: tl.constexpr,
):
    row = tl.program_id(0)
    part = tl.program_id(1)
    parts = tl.num_programs(1)
    row_ptr = logits_ptr + row.to(tl.int64) * row_stride
    start = part * slice_len
    end = tl.minimum(start + slice_len, vocab)
    offsets = tl.arange(0, BLOCK)
    slots = tl.arange(0, KP)

    peak = -float("inf")  # m: the largest logit read so far
    total = 0.0  # s = sum exp(x - m) so far
    moment = 0.0  # t = sum exp(x - m) (x - m) so far
    kept = tl.where(slots < K, _EMPTY, _NEVER)  # the slice's best K candidates so far, unordered
    floor = tl.min(kept, axis=0)  # the worst of them: what a new candidate must beat
    for chunk in range(CHUNKS):  # a constexpr count: the interpreter cannot loop over tensor bounds
        ids = start + chunk * BLOCK + offsets
        inside = ids < end
        x = tl.load(row_ptr + ids, mask=inside, other=-float("inf")).to(tl.float32)

        # Entropy parts, online: rescale what was summed to the new max. Guards keep -inf logits
        # (and an all -inf start) from making 0 * inf = NaN; NaN and +inf logits stay NaN.
        new_peak = tl.maximum(peak, tl.max(x, axis=0))
        shift_to = tl.where(new_peak == -float("inf"), 0.0, new_peak)
        scale = tl.exp(peak - shift_to)
        moved = tl.where(total == 0.0, 0.0, (peak - shift_to) * total)
        shifted = x - shift_to
        weight = tl.exp(shifted)
        term = tl.where(weight == 0.0, 0.0, weight * shifted)
        moment = scale * (moment + moved) + tl.sum(term, axis=0)
        total = scale * total + tl.sum(weight, axis=0)
        peak = new_peak

        if K > 0:
            packed = (_order_key(x).to(tl.int64) << 32) | (0x7FFFFFFF - ids).to(tl.int64)
            packed = tl.where(inside, packed, _EMPTY)
            best = tl.max(packed, axis=0)
            while best > floor:  # the chunk's best beats the worst kept: it takes that slot
                worst_slot = tl.min(tl.where(kept == floor, slots, KP), axis=0)
                kept = tl.where(slots == worst_slot, best, kept)
                floor = tl.min(kept, axis=0)
                packed = tl.where(packed == best, _EMPTY, packed)
                best = tl.max(packed, axis=0)

    at = row * parts + part
    tl.store(peak_ptr + at, peak)
    tl.store(total_ptr + at, total)
    tl.store(moment_ptr + at, moment)
    if K > 0:
        tl.store(cand_ptr + at * KP + slots, tl.where(slots < K, kept, _EMPTY))


@triton.jit
def _combine_kernel(
    peak_ptr, total_ptr, moment_ptr, cand_ptr,
    entropy_ptr, ids_ptr, probs_ptr, lse_ptr, parts,
    K: tl.constexpr, KP: tl.constexpr, PARTS: tl.constexpr, LSE: tl.constexpr,
):
    row = tl.program_id(0)
    part = tl.arange(0, PARTS)
    used = part < parts
    peaks = tl.load(peak_ptr + row * parts + part, mask=used, other=-float("inf"))
    totals = tl.load(total_ptr + row * parts + part, mask=used, other=0.0)
    moments = tl.load(moment_ptr + row * parts + part, mask=used, other=0.0)
    peak = tl.max(peaks, axis=0)
    shift_to = tl.where(peak == -float("inf"), 0.0, peak)
    scales = tl.where(totals == 0.0, 0.0, tl.exp(peaks - shift_to))
    moved = tl.where(totals == 0.0, 0.0, (peaks - shift_to) * totals)
    total = tl.sum(scales * totals, axis=0)
    moment = tl.sum(scales * (moments + moved), axis=0)
    tl.store(entropy_ptr + row, tl.log(total) - moment / total)
    if LSE:  # log sum exp of the row, for the shift (logit_summary.shift_nats): no second read of the logits for it
        tl.store(lse_ptr + row, shift_to + tl.log(total))

    if K > 0:
        slots = tl.arange(0, KP)
        everything = tl.arange(0, PARTS * KP)
        cands = tl.load(cand_ptr + row * parts * KP + everything, mask=everything < parts * KP, other=_EMPTY)
        ids = tl.zeros((KP,), tl.int32)
        values = tl.zeros((KP,), tl.float32)
        for i in tl.static_range(K):
            best = tl.max(cands, axis=0)
            cands = tl.where(cands == best, _EMPTY, cands)
            ids = tl.where(slots == i, (0x7FFFFFFF - (best & 0x7FFFFFFF)).to(tl.int32), ids)
            values = tl.where(slots == i, _key_value((best >> 32).to(tl.int32)), values)
        probs = tl.exp(values - peak) / total
        tl.store(ids_ptr + row * K + slots, ids, mask=slots < K)
        tl.store(probs_ptr + row * K + slots, probs.to(tl.float16), mask=slots < K)


def launch_plan(vocab: int, *, block: int = BLOCK, slices: int = SLICES) -> tuple[int, int, int]:
    """(block, slice_len, parts): chunk size, ids per slice program (a multiple of block), slices per row."""
    block = min(block, triton.next_power_of_2(vocab))
    slice_len = triton.cdiv(triton.cdiv(vocab, slices), block) * block
    return block, slice_len, triton.cdiv(vocab, slice_len)


def summarize_into(
    x: torch.Tensor, k: int, entropy: torch.Tensor, ids: torch.Tensor | None, probs: torch.Tensor | None,
    *, log_partition: torch.Tensor | None = None, block: int = BLOCK, slices: int = SLICES, num_warps: int = NUM_WARPS,
):
    """Write the summary of (rows, vocab) logits x into given outputs: (rows,) float32 entropy,
    (rows, k) int32 ids and float16 probabilities (None when k == 0), and where given the (rows,) float32
    log sum exp of each row. Reads x only.

    Returns the launched slice kernel (its `n_regs` and `n_spills` on a GPU; None in the interpreter)."""
    rows, vocab = x.shape
    block, slice_len, parts = launch_plan(vocab, block=block, slices=slices)
    kp = triton.next_power_of_2(max(k, 1))
    parts_p = triton.next_power_of_2(parts)
    peak, total, moment = (torch.empty(rows, parts, dtype=torch.float32, device=x.device) for _ in range(3))
    cands = torch.empty(rows, parts, kp, dtype=torch.int64, device=x.device) if k else peak
    launched = _slice_kernel[(rows, parts)](
        x, x.stride(0), vocab, slice_len, peak, total, moment, cands,
        K=k, KP=kp, BLOCK=block, CHUNKS=slice_len // block, num_warps=num_warps,
    )
    _combine_kernel[(rows,)](
        peak, total, moment, cands, entropy,
        ids if k else entropy, probs if k else entropy, entropy if log_partition is None else log_partition, parts,
        K=k, KP=kp, PARTS=parts_p, LSE=log_partition is not None, num_warps=4 if parts_p * kp >= 512 else 1,
    )
    return launched


def summarize_triton(
    logits: torch.Tensor, k: int, *, log_partition: bool = False, block: int = BLOCK, slices: int = SLICES,
    num_warps: int = NUM_WARPS,
) -> tuple:
    """(entropy, top-k ids, their probabilities) of logits (..., vocab): (...) float32, (..., k) int32 and
    float16 (None when k == 0), as `logit_summary.summarize_in_torch` gives them (see the module docstring);
    with `log_partition`, a fourth: the (...) float32 log sum exp of each row."""
    *lead, vocab = logits.shape
    if not 0 <= k <= min(MAX_TOPK, vocab):
        raise ValueError(f"k must be in 0..{min(MAX_TOPK, vocab)} here, got {k}")
    x = logits.reshape(-1, vocab)
    if x.stride(-1) != 1:
        x = x.contiguous()
    rows = x.shape[0]
    entropy = torch.empty(rows, dtype=torch.float32, device=x.device)
    ids = torch.empty(rows, k, dtype=torch.int32, device=x.device) if k else None
    probs = torch.empty(rows, k, dtype=torch.float16, device=x.device) if k else None
    lse = torch.empty(rows, dtype=torch.float32, device=x.device) if log_partition else None
    if rows:
        summarize_into(x, k, entropy, ids, probs, log_partition=lse, block=block, slices=slices, num_warps=num_warps)
    summary = (entropy.reshape(lead), None, None) if not k else (entropy.reshape(lead), ids.reshape(*lead, k), probs.reshape(*lead, k))
    return summary + (lse.reshape(lead),) if log_partition else summary
