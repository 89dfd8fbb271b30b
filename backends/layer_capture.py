"""Inside the network: the output of chosen decoder layers at every denoising step, read and never written.

    with LayerTaps(model, (0, 9, 19, 29)) as taps:      # forward hooks on those decoder layers
        ...one decoder forward...
        hiddens = taps.take()
        rms = layer_rms(hiddens)                             # (batch, layers, canvas), recorded with the step
    ids, probs, ranks = block_lens(model, every_steps_outputs, tokens)   # at the block's end, its tokens known

What is kept per layer, position and step (never a vocabulary-sized tensor):
- the RMS of the layer's output over the hidden size (float32), with the step;
- the logit lens: the layer's output through the model's own final norm, tied head and final logit
  softcap, exactly as `DiffusionGemmaForBlockDiffusion.forward` turns the last layer's output into
  logits (so the last layer's lens is the model's raw logits), kept as the top token's id and its
  probability at temperature 1, and the rank of the position's committed token under it.
  The committed token is unknown before the block is committed, so the lens runs then, for every step of
  the block at once, from one head product per layer output (the top id, its probability and the rank all
  come from it: computing the top id at its step would take a second product of the 262,144-id head).
  The capture keeps the steps' layer outputs on the device until then, canvas x hidden x dtype bytes per
  layer and step (1.4 MB a layer-step at the real shape, 277 MB a row for 4 layers over 48 steps).

Pitfalls of the libraries this works around:
- transformers' `output_hidden_states` holds the embeddings, then layers 0..n-2, then the *final norm's*
  output in place of layer n-1's: a hook on the layer is the only place its own output is seen.
- torch.compile guards no module hooks by default (`torch._dynamo.config.skip_nnmodule_hook_guards`):
  a hook added after the decoder was compiled would silently never run. `guard_hooks()` turns the guards
  on; the guards are made when a function is compiled, so it has to happen before the decoder's first
  compile, *in the thread that compiles*: since torch 2.12 dynamo's config is thread-local (each setting
  a ContextVar; pytorch/pytorch#186537), and a new thread starts from the defaults. Importing this module
  sets it for the importing thread, and every capture sets it again in the thread it runs in
  (`capture.capture_steps`, `diffusers_capture.capture_pipeline`: the backends generate on a worker
  thread, where the decoder compiles). So on the compiled path adding the hooks costs one recompile
  (cached for the next run with the same layers) and removing them falls back to the stock graph. A
  decoder compiled without the guards (outside the project's captures) keeps unguarded graphs:
  `LayerTaps.take` then says the hooks did not run, never records a wrong value. (Before the captures
  set it, a compiled run with layers refused so on torch 2.13 whenever its decoder had first been
  compiled by an earlier run on a worker thread: the order-dependent test failure once seen.)
"""

from __future__ import annotations

import contextlib

import torch


# A compiled run with taps is not bit-identical to the compiled run without them in bf16: what and why is
# `visualizer.settings.COMPILED_LAYERS_NOTE`, which the command line prints before such a run.


def decoder_layers(model) -> list:
    """The decoder's layers of a DiffusionGemmaForBlockDiffusion (the canvas runs through these only)."""
    return list(model.model.decoder.layers)


HOOK_GUARDS = True  # False: torch's default, no hook guards (benchmarks/bench_layers.py --no-hook-guards measures them)


def guard_hooks() -> None:
    """Make torch.compile guard module hooks from now on in the calling thread (as HOOK_GUARDS says; see the
    module docstring: dynamo's config is thread-local since torch 2.12); idempotent."""
    torch._dynamo.config.skip_nnmodule_hook_guards = not HOOK_GUARDS


guard_hooks()


class LayerTaps:
    """Forward hooks on the chosen decoder layers that keep each one's latest output (detached).

    A context manager: every handle it added is removed in `finally`, on success, an error or a stop;
    a second LayerTaps on the same layers is refused (one capture at a time)."""

    def __init__(self, model, layers: tuple[int, ...]):
        self.model, self.layers = model, tuple(layers)
        self.outputs: dict[int, torch.Tensor] = {}
        self._handles: list = []

    def __enter__(self) -> "LayerTaps":
        modules = decoder_layers(self.model)
        try:
            for index in self.layers:
                module = modules[index]
                if any(getattr(hook, "_layer_tap", False) for hook in module._forward_hooks.values()):
                    raise RuntimeError(f"decoder layer {index} is already tapped: one layer capture at a time")
                self._handles.append(module.register_forward_hook(self._hook(index)))
        except BaseException:
            self.close()
            raise
        return self

    def _hook(self, index: int):
        outputs = self.outputs

        def keep(module, args, output):  # reads the output, returns nothing: the model's tensor goes on unchanged
            outputs[index] = (output[0] if isinstance(output, tuple) else output).detach()

        keep._layer_tap = True
        return keep

    def take(self) -> list[torch.Tensor]:
        """The outputs of the last forward, in the order of `layers` ((batch, canvas, hidden) each), then forgotten."""
        missing = [i for i in self.layers if i not in self.outputs]
        if missing:
            raise RuntimeError(
                f"the hooks on decoder layer(s) {missing} did not run in this step's forward: a decoder compiled "
                "without module-hook guards ignores them (layer_capture.guard_hooks() in the thread that compiles, before it "
                "compiles; or run eager)"
            )
        taken = [self.outputs[i] for i in self.layers]
        self.outputs.clear()
        return taken

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.outputs.clear()

    def __exit__(self, *exc) -> None:
        self.close()


def head_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The tied head's raw output on a layer output (after the final norm), in the head's dtype (bf16 on a GPU)."""
    return model.lm_head(model.model.decoder.norm(hidden))


def softcap(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """The model's final logit softcap on float32 logits, written as `DiffusionGemmaForBlockDiffusion.forward` does."""
    return torch.tanh(logits / cap) * cap if cap else logits


def lens_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The model's own readout of a layer output: final norm, tied head, float32, final softcap (the definition)."""
    return softcap(head_logits(model, hidden).to(torch.float32), getattr(model, "final_logit_softcapping", None))


def layer_rms(hiddens: list[torch.Tensor]) -> torch.Tensor:
    """(batch, layers, canvas) float32: the RMS over the hidden size of each layer output (recorded every step)."""
    return torch.stack([hidden.float().pow(2).mean(dim=-1).sqrt() for hidden in hiddens], 1)


# ---- the plain reference: the definition, one float32 vocabulary-sized tensor at a time --------------------------
@torch.no_grad()
def block_lens_reference(model, hiddens: list[torch.Tensor], tokens: torch.Tensor):
    """What `block_lens` returns, computed on the float32 capped logits themselves (slow at a large vocabulary)."""
    index = tokens[..., None].to(torch.int64)
    each = [_lens_of_capped(lens_logits(model, hidden), index) for hidden in hiddens]
    return tuple(torch.stack(values, 1) for values in zip(*each))


def _lens_of_capped(logits: torch.Tensor, index: torch.Tensor):
    """(top id int32, its probability float16, the rank of `index`'s token int32) of float32 capped logits."""
    best, where = logits.max(dim=-1)  # the first id among equal maxima
    prob = (1.0 / torch.exp(logits - best[..., None]).sum(dim=-1)).to(torch.float16)
    rank = (logits > logits.gather(-1, index)).sum(dim=-1).to(torch.int32)
    return where.to(torch.int32), prob, rank


# ---- the fast path: order on the head's 16-bit output, through a table of the softcap ----------------------------
class CapTable:
    """The softcap of every 16-bit value, sorted by value: order questions about capped logits, answered on raw ones.

    The head's output on a GPU is bf16: a capped logit is a function of one of 65,536 values, computed here once
    with the very ops of `lens_logits` on the same device (an elementwise op gives a value the same result wherever
    it sits in a tensor). Where that function is non-decreasing (checked here, not assumed: a float32 tanh is not
    promised monotonic), "capped above c(t)" is "raw above hi(t)", the largest raw value whose capped value equals
    c(t): so the top id and the rank are exact on the raw logits, ties included. Ties are the point: tanh
    flattens, and distinct raw values near saturation round to one capped float32 value (the definition's argmax
    is then the first of them, not the raw argmax; its rank counts neither).
    """

    def __init__(self, dtype: torch.dtype, device, cap: float | None):
        every = torch.arange(-(2**15), 2**15, dtype=torch.int32, device=device).to(torch.int16).view(dtype)
        capped = softcap(every.to(torch.float32), cap)  # all 65,536 at once: the same kernel path as the lens
        keep = ~torch.isnan(every)
        values, capped = every[keep].to(torch.float32), capped[keep]
        order = torch.argsort(values, stable=True)
        self.values, self.capped = values[order], capped[order]  # (n,) float32 each, values ascending
        self.monotonic = bool((self.capped[1:] >= self.capped[:-1]).all())

    def capped_of(self, raw: torch.Tensor) -> torch.Tensor:
        """The capped value of raw 16-bit values (looked up: every non-NaN value is in the table)."""
        return self.capped[torch.searchsorted(self.values, raw.to(torch.float32))]

    def lowest_equal(self, raw: torch.Tensor) -> torch.Tensor:
        """The smallest raw value whose capped value equals raw's, in raw's dtype."""
        return self.values[torch.searchsorted(self.capped, self.capped_of(raw))].to(raw.dtype)

    def highest_equal(self, raw: torch.Tensor) -> torch.Tensor:
        """The largest raw value whose capped value equals raw's, in raw's dtype."""
        return self.values[torch.searchsorted(self.capped, self.capped_of(raw), right=True) - 1].to(raw.dtype)


_tables: dict = {}


def cap_table(dtype: torch.dtype, device, cap: float | None) -> CapTable | None:
    """The table for the head's dtype, or None where the fast path does not apply (float32 logits, or a softcap
    that is not non-decreasing in that dtype: then the reference runs)."""
    if dtype not in (torch.bfloat16, torch.float16):
        return None
    key = (dtype, torch.device(device), cap)
    if key not in _tables:
        _tables[key] = CapTable(dtype, device, cap)
    table = _tables[key]
    return table if table.monotonic else None


def _peak_and_count(raw: torch.Tensor, above: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first read of a product's logits: (the raw maximum, how many raw values exceed `above`)."""
    return raw.amax(dim=-1), (raw > above).sum(dim=-1)


def _first_and_partition(raw: torch.Tensor, lowest: torch.Tensor, top: torch.Tensor, cap: float | None):
    """The second read: (the first id at or above `lowest`, sum over the vocabulary of exp(capped - top))."""
    ids = torch.arange(raw.shape[-1], device=raw.device, dtype=torch.int32)
    first = torch.where(raw >= lowest[..., None], ids, raw.shape[-1]).amin(dim=-1)
    return first, torch.exp(softcap(raw.to(torch.float32), cap) - top[..., None]).sum(dim=-1)


_compiled: dict = {}


def _fused(function):
    """`function` compiled on CUDA, once: Inductor reads the bf16 logits once per function, with its reductions
    fused and no float32 vocabulary-sized tensor made. The partition feeds a float16 probability only: Inductor's
    rounding (a division by the cap may become a product) moves it by float32 ulps, never an id or a rank."""
    if function not in _compiled:
        _compiled[function] = torch.compile(function, dynamic=False)
    return _compiled[function]


def _cap_of(model) -> float | None:
    return getattr(model, "final_logit_softcapping", None)


# Where the head's output is 16-bit (a GPU), the product runs on the layer outputs of several layers (or steps) at
# once, up to this many positions: one pass over the 262,144 x 2,816 tied head (1.5 GB in bf16) instead of one per
# layer output, while the bf16 logits of a product stay at most 512 MiB (4 layers of a one-row 256-token canvas).
POSITIONS_PER_PRODUCT = 1024


def _products(model, hiddens: list[torch.Tensor]):
    """(raw head output, how many of `hiddens` it covers) for consecutive groups of `hiddens` ((batch, canvas,
    hidden) each), concatenated along the batch where the head's output is 16-bit; one at a time elsewhere
    (a CPU model's float32 logits: the product of each, exactly as the reference makes it)."""
    head = getattr(model.lm_head, "weight", hiddens[0] if hiddens else None)  # (a stand-in head without weights)
    merge = head is not None and head.dtype in (torch.bfloat16, torch.float16)
    start = 0
    while start < len(hiddens):
        group = 1
        if merge:
            positions = hiddens[start].shape[0] * hiddens[start].shape[1]
            while (start + group < len(hiddens)
                   and (group + 1) * positions <= POSITIONS_PER_PRODUCT
                   and hiddens[start + group].shape == hiddens[start].shape):
                group += 1
        chosen = hiddens[start:start + group]
        yield head_logits(model, chosen[0] if group == 1 else torch.cat(chosen)), group
        start += group


@torch.no_grad()
def block_lens(model, hiddens: list[torch.Tensor], tokens: torch.Tensor):
    """The logit lens of a block's layer outputs, once its tokens are known: (top id int32, its probability
    float16, the rank of the committed token int32), each (batch, len(hiddens), canvas). `hiddens` holds every
    step's outputs of the recorded layers ((batch, canvas, hidden) each); `tokens` (batch, canvas) the committed
    ones. Rank: how many tokens the lens ranks strictly above the committed one (0: its top token).

    One head product per layer output gives all three. Equal to `block_lens_reference` (ids and ranks exactly,
    probabilities to float16 rounding); where the head's output is 16-bit (a GPU), computed on it through
    `CapTable` with no float32 vocabulary-sized tensor, in two reads of the bf16 logits (`_peak_and_count`,
    `_first_and_partition`, each fused when compiled)."""
    cap = _cap_of(model)
    ids, probs, ranks = [], [], []
    for raw, group in _products(model, hiddens):
        index = tokens[..., None].to(torch.int64).repeat(group, 1, 1)
        table = cap_table(raw.dtype, raw.device, cap)
        if table is None:  # float32 logits (a CPU model): the definition itself
            where, prob, rank = _lens_of_capped(softcap(raw.to(torch.float32), cap), index)
        else:
            passes = (_fused(_peak_and_count), _fused(_first_and_partition)) if raw.is_cuda else (
                _peak_and_count, _first_and_partition)
            # capped above the token's is raw above the largest raw value capped equal to it
            peak, rank = passes[0](raw, table.highest_equal(raw.gather(-1, index)))
            # the definition's argmax is the first id whose capped value is the maximum: the first raw value at
            # or above the lowest raw value capped to the maximum
            where, total = passes[1](raw, table.lowest_equal(peak), table.capped_of(peak), cap)
            where, prob, rank = where.to(torch.int32), (1.0 / total).to(torch.float16), rank.to(torch.int32)
        ids.extend(where.chunk(group))
        probs.extend(prob.chunk(group))
        ranks.extend(rank.chunk(group))
        del raw
    return torch.stack(ids, 1), torch.stack(probs, 1), torch.stack(ranks, 1)


@contextlib.contextmanager
def no_taps():
    """The stand-in for LayerTaps when no layer is recorded."""
    yield None
