"""How many rows of a batched generation fit in this process's GPU: `--batch-size auto`.

    rows = rows_that_fit(backend, settings, prompt_tokens=64)     # None: no CUDA GPU here

Most of a row's memory is the sampler's vocabulary-sized float32 tensors over the canvas (one
256 x 262,144 float32 tensor is 268 MB); at the real 26B shape a row cost about 1.9 GiB more
in eager and compiled runs of 8 rows (REFERENCE.md, "Batches"), about 7 such tensors.  The
estimate counts `VOCAB_TENSORS_PER_ROW` of them plus the row's KV cache, and leaves
`HEADROOM` of the free memory unused for the allocator's fragmentation and the capture's copies.
It is an estimate: the runner records the batch size it chose in the plan and never changes it
during a run; an out-of-memory error says how many rows this estimate allows now.
"""

from __future__ import annotations

VOCAB_TENSORS_PER_ROW = 8  # measured ~7 (REFERENCE.md); one more for the capture's entropy and top-k
HEADROOM = 0.15  # share of free memory left unused
MAX_AUTO_ROWS = 64  # beyond this a step is compute-bound: more rows add no throughput
CPU_AUTO_ROWS = 8  # no GPU memory to measure: a batch that keeps a CPU busy without swapping


def row_bytes(config, *, canvas: int, prompt_tokens: int, max_new_tokens: int) -> int:
    """Estimated bytes one more row of a batch needs at this model shape."""
    text = getattr(config, "text_config", config)
    vocab = int(text.vocab_size)
    layers = int(getattr(text, "num_hidden_layers", 1))
    kv_heads = int(getattr(text, "num_key_value_heads", 1) or 1)
    head_dim = int(getattr(text, "head_dim", 0) or text.hidden_size // text.num_attention_heads)
    sampler = VOCAB_TENSORS_PER_ROW * canvas * vocab * 4
    kv_cache = 2 * layers * kv_heads * head_dim * (prompt_tokens + max_new_tokens) * 2  # bf16 keys and values
    return sampler + kv_cache


def rows_that_fit(backend, settings, *, prompt_tokens: int) -> int | None:
    """Rows of one batch the free memory of this process's GPU holds (at least 1); None without CUDA."""
    import torch

    model = getattr(backend, "model", None)  # a torch backend's model; MLX has no CUDA memory to read
    if model is None or not torch.cuda.is_available():
        return None
    torch.cuda.empty_cache()
    free, _total = torch.cuda.mem_get_info()
    canvas = int(getattr(model.config, "canvas_length", 256))
    defaults = backend.default_settings()
    new_tokens = settings.max_new_tokens or defaults.max_new_tokens or canvas
    per_row = row_bytes(model.config, canvas=canvas, prompt_tokens=prompt_tokens, max_new_tokens=new_tokens)
    return max(1, min(MAX_AUTO_ROWS, int(free * (1 - HEADROOM) // per_row)))
