"""How many rows of a batched generation fit in this process's GPU: `--batch-size auto`.

    rows = rows_that_fit(backend)     # None: no CUDA GPU here; at most FASTEST_ROWS

Most of a row's memory is the sampler's vocabulary-sized float32 tensors over the canvas (one
256 x 262,144 float32 tensor is 268 MB); at the real 26B shape a row cost about 1.9 GiB beyond the
47.5 GiB of weights in eager runs of 8 to 12 rows and compiled runs of 8 on an H100, about 7 such tensors
(BENCHMARKS.md, "The probe at scale").  The estimate counts `VOCAB_TENSORS_PER_ROW` of them, and
leaves `HEADROOM` of the free memory unused for the allocator's fragmentation and the capture's copies.
It is an estimate: the runner records the batch size it chose in the plan and never changes it
during a run; an out-of-memory error says how many rows this estimate allows now.

More rows than fit is never chosen, and more than `FASTEST_ROWS` neither: a measured table, not a probe at start,
because each new row count costs the compiled path another compile of 150-270 s, more than a probe would win.
"""

from __future__ import annotations

VOCAB_TENSORS_PER_ROW = 8  # measured ~7 (BENCHMARKS.md, as above); one more for the capture's entropy and top-k
# The shift (KL from the previous step, recorded by default) keeps one step's float32 distribution per row and
# needs the step's log-probabilities beside it: the peak of 8 rows went from ~49 + 8 x 1.9 to 64.3 GiB with it
# on one H100 (BENCHMARKS.md, "The probe runner after the overlap").
SHIFT_TENSORS_PER_ROW = 2
# Compiled (CUDA graphs), the graphs' private memory pools keep more of a step's tensors: 12 rows with the capture
# and no shift ran out of memory on an H100 in the warm-up, with 76.25 GiB in use (5.66 GiB of it the graphs' pools)
# and 3 GiB more asked: at least (76.25 + 3 - 47.5) / 12 = 2.65 GiB a row, 10.6 such tensors (BENCHMARKS.md, "A
# compiled study on 4 H100s"); 8 rows ran.
COMPILED_TENSORS_PER_ROW = 3
HEADROOM = 0.15  # share of free memory left unused
# The row count with the most generations a second, measured on one H200 at the real shape, compiled, capture with
# the shift (benchmarks/bench_batch_rows.py, BENCHMARKS.md "`--batch-size auto` on an H200: 8, 12 and 16 rows"):
# 8 rows 1.70/s, 12 rows 1.90/s, 16 rows 1.92/s. A step is compute-bound from about 12 rows on, so more rows add
# memory (78.3 GiB peak at 16) and rows that wait for the batch's slowest (visualizer.batch_cost), not throughput.
FASTEST_ROWS = 16
CPU_AUTO_ROWS = 8  # no GPU memory to measure: a batch that keeps a CPU busy without swapping


def row_bytes(config, *, canvas: int, shift: bool = True, compiled: bool = False) -> int:
    """Estimated bytes one more row of a batch needs at this model shape: its vocabulary-sized
    float32 tensors, the shift's too when it is recorded, and what CUDA graphs keep when compiled
    (the KV cache of a row, ~80 MB at the real shape, is left out: 4% of them)."""
    vocab = int(getattr(config, "text_config", config).vocab_size)
    tensors = VOCAB_TENSORS_PER_ROW + (SHIFT_TENSORS_PER_ROW if shift else 0) + (COMPILED_TENSORS_PER_ROW if compiled else 0)
    return tensors * canvas * vocab * 4


def rows_that_fit(backend, *, shift: bool = True, compiled: bool = False) -> int | None:
    """Rows of one batch the free memory of this process's GPU holds (at least 1, at most `FASTEST_ROWS`); None without CUDA.
    `shift`: the run records the step-to-step KL (`GenerationSettings.record_shift`); `compiled`: it runs
    through torch.compile and CUDA graphs (`GenerationSettings.compiled`)."""
    import torch

    model = getattr(backend, "model", None)  # a torch backend's model; MLX has no CUDA memory to read
    if model is None or not torch.cuda.is_available():
        return None
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info()
    per_row = row_bytes(model.config, canvas=int(getattr(model.config, "canvas_length", 256)), shift=shift, compiled=compiled)
    return auto_rows(free, per_row)


def auto_rows(free_bytes: int, per_row_bytes: int) -> int:
    """Rows for `--batch-size auto`: as many as `free_bytes` holds less `HEADROOM`, at least 1, at most the fastest
    measured count (`FASTEST_ROWS`)."""
    return max(1, min(FASTEST_ROWS, int(free_bytes * (1 - HEADROOM) // per_row_bytes)))
