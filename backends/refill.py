"""A refilling step loop: a row whose generation has finished takes the next one at once, inside the block.

    traces, row_passes = refill_traces(backend, prompts, seeds, settings, rows=8)    # one Trace per prompt
    row_passes = refill_generate(model, jobs, rows=8, generate_kwargs=kw, on_step=..., on_block=...)  # the loop

transformers' `generate` runs a batch in lock step: one step counter, one cache and one random draw for all its
rows, and a block ends only when every row has finished (`torch.all(finished_denoising)`), so a row that is done
is computed until the slowest row ends (visualizer/batch_cost.py).  This loop keeps the model's own pieces and
owns only the loop around them.  Each generation (`_Generation`) is stock `generate` on its prompt alone, taken
apart into the same calls in the same order: its own generation config, sampler, logits processors (the capture's
`_StepRecorder`, batch 1, records them), stopping criteria, step counter (`cur_step` for the temperature schedule
and the renoising), cache (the encoder writes its prompt, then each block, alone), and random generator (seeded
as that generation alone would be, swapped in around each of its draws).  Only the decoder pass, the costly part,
runs for every active row at once (`_decoder_pass`); its logits are handed to each row's stock `_denoising_step`
in place of the decoder call.  A finished row is replaced before the next pass; with nothing left to refill the
batch shrinks (eager: every shape runs without compiling), so no pass computes a finished row.

Three parts of the pass run row by row, each on exactly the tensors of the row's pass alone: the
attention (a row's keys are its own cache joined to its canvas, so prompts of different lengths need no padding:
a right- or left-padded row's logits differ from its pass alone), the experts (grouped by expert over the whole
batch, an expert's product over more tokens rounds differently in float32; `_by_row`) and the self-conditioning
input (a product summed over the whole vocabulary, whose GPU kernel splits the sum differently for more rows;
`_soft_embeddings`).  The projections, norms, dense MLP and
head are batched: each row's logits then equal its pass alone bit for bit on the CPU (the built-in model, float32,
as the backend loads it; checked by tests/test_refill.py), so each refilled trace equals its generation run alone
with stock `generate`, step for step.  On a GPU the batched parts' kernels are chosen by the product's size, so an
exact loop there calls the decoder on at most CUDA_EXACT_CALL_ROWS rows at a time (4, bit-identical to alone on an
H200 at the real shape; 8 were not); the row-by-row parts only cost launches there.
`exact=False` batches those three parts too (one padded, masked attention call, the experts grouped over every row,
one self-conditioning product), and the rows starting a block in the same pass with as many tokens share one encoder
call (`_start_blocks`; the exact loop encodes each row alone, as its run alone does): a trace then depends on its pass-mates, like a stock batch's rows, for a pass that
costs about a stock pass.  Eager only: no static cache, no compile; no pins, layers, forks or KL to the final step (the backend refuses them).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from visualizer.records import FINISH_CANCELLED, FINISH_ERROR
from visualizer.samplers import SAMPLER_ENTROPY_BOUND
from visualizer.trace import Trace

from .base import BackendError, run_end
from .bridge import GenerationCancelled
from .capture import _StepRecorder
from .captured import CapturedBlock, CapturedStep, block_record, step_record
from .layer_capture import guard_hooks
from .text import PieceTable

_BY_ROW = "refill_rows"  # the attention and experts implementation the batched decoder pass runs under
_BATCHED = "refill_batched"  # the attention implementation of `exact=False`: every row in one padded, masked call
# (the active rows' caches in batch order, the model's own experts implementation, the canvas length)
_ROWS: contextvars.ContextVar = contextvars.ContextVar("refill_rows")


@dataclass(frozen=True)
class Job:
    ids: list[int]  # the templated prompt ids
    seed: int  # seeds this generation alone, as `torch.manual_seed(seed)` before stock `generate`
    steps: int | None = None  # this generation's own max_denoising_steps (benchmarks force early stops with it)


class _Rng:
    """A generation's own random stream on the model's device: the state stock `generate` would draw from after
    `torch.manual_seed(seed)`, swapped in around each of this generation's draws and out again after."""

    def __init__(self, seed: int, device: torch.device):
        self.cuda = device.type == "cuda"
        self.index = device.index if device.index is not None else (torch.cuda.current_device() if self.cuda else None)
        with self._kept():
            torch.manual_seed(seed)
            self.state = self._get()

    def _get(self):
        return torch.cuda.get_rng_state(self.index) if self.cuda else torch.get_rng_state()

    def _set(self, state) -> None:
        if self.cuda:
            torch.cuda.set_rng_state(state, self.index)
        else:
            torch.set_rng_state(state)

    @contextlib.contextmanager
    def _kept(self):
        outer = self._get()
        try:
            yield
        finally:
            self._set(outer)

    @contextlib.contextmanager
    def drawing(self):
        with self._kept():
            self._set(self.state)
            yield
            self.state = self._get()


class _Given:
    """Stands in for the decoder inside a row's stock `_denoising_step`: returns the row's slice of the batched pass."""

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def __call__(self, **inputs):
        return SimpleNamespace(logits=self.logits)


class _Generation:
    """One stock `generate` call on one prompt, as a state machine the loop advances one decoder pass at a time.
    Each method runs the calls `generate_diffusion_gemma.py` makes, in its order, with batch size 1."""

    def __init__(self, model, job: Job, generate_kwargs: dict, recorder: _StepRecorder, together: bool = False):
        """`together`: the loop starts this generation's blocks (`_start_blocks`, with others' in one encoder call);
        `starting` says when one is due.  Else each block starts here, alone."""
        self.model, self.recorder, self.together = model, recorder, together
        device = model.device
        self.rng = _Rng(job.seed, device)
        if job.steps is not None:
            generate_kwargs = generate_kwargs | {"max_denoising_steps": job.steps}
        config, self.model_kwargs = model._prepare_generation_config(None, **generate_kwargs)
        self.config = config
        self.input_ids = torch.tensor([job.ids], device=device)
        self.cur_len = len(job.ids)
        self.max_length, max_new_tokens = model._prepare_generated_length(config, self.cur_len)
        self.canvases_left = math.ceil(max_new_tokens / model.config.canvas_length)
        self.canvas_length = model.config.canvas_length
        self.finished_sequences = torch.zeros(1, dtype=torch.bool, device=device)
        self.cache = model._prepare_cache_for_generation(generation_config=config, batch_size=1, max_length=self.max_length)
        self.eos = None if config.eos_token_id is None else torch.tensor(config.eos_token_id, device=device)
        self.encoder_position_ids = torch.arange(0, self.cur_len, dtype=torch.int32, device=device).unsqueeze(0)
        self.decoder_position_ids = torch.arange(self.cur_len, self.cur_len + self.canvas_length, dtype=torch.int32,
                                                 device=device).unsqueeze(0)
        self.attention_mask = torch.ones((1, self.cur_len), dtype=torch.bool, device=device)
        self.decoder_attention_mask = torch.nn.functional.pad(self.attention_mask, (0, self.canvas_length), value=True)
        self.sampler = model._prepare_sampler(config)
        self.logits_processor = recorder._prepare_logits_processor(config, None)
        self.stopping_criteria = model._prepare_ar_stopping_criteria(config, None)
        self.diffusion_stopping = model._prepare_diffusion_stopping_criteria(config)
        self.is_prefill, self.done, self.starting = True, False, True
        if not together:
            self._start_block()

    def _start_block(self) -> None:
        """Encode what is new (the prompt, then each committed block) into this row's cache; a fresh canvas."""
        _encode([self])
        self._new_canvas()

    def _new_canvas(self) -> None:
        """The block's canvas of random tokens and its step counter, as stock draws them after the encoder."""
        self.is_prefill, self.starting = False, False
        with self.rng.drawing():  # the canvas's random tokens
            self.canvas, self.self_conditioning, self.mask_mapping, self.finished_denoising = (
                self.recorder._prepare_denoiser_inputs(
                    decoder_attention_mask=self.decoder_attention_mask, past_key_values=self.cache, sampler=self.sampler,
                    diffusion_stopping_criteria=self.diffusion_stopping, batch_size=1, device=self.input_ids.device,
                    model_kwargs=self.model_kwargs))
        self.argmax = self.canvas
        self.steps = iter(reversed(range(1, self.config.max_denoising_steps + 1)))
        self.cur_step = next(self.steps)

    def step(self, logits: torch.Tensor) -> None:
        """The stock denoising step on this row's logits of the batched pass; the block's end when it ends."""
        with self.rng.drawing():  # the sample and the renoising
            self.canvas, self.argmax, self.self_conditioning, self.finished_denoising = self.recorder._denoising_step(
                decoder_forward=_Given(logits), current_canvas=self.canvas, argmax_canvas=self.argmax,
                input_ids=self.input_ids, decoder_position_ids=self.decoder_position_ids,
                self_conditioning_logits=self.self_conditioning, mask_mapping=self.mask_mapping,
                past_key_values=self.cache, finished_denoising=self.finished_denoising, cur_step=self.cur_step,
                sampler=self.sampler, logits_processor=self.logits_processor,
                diffusion_stopping_criteria=self.diffusion_stopping, **self.model_kwargs)
        self.cur_step = next(self.steps, None)
        if self.cur_step is not None and not torch.all(self.finished_denoising):
            return
        self.input_ids = torch.cat([self.input_ids, self.argmax], dim=-1)
        self.input_ids, self.finished_sequences = self.recorder._finalize_canvas(
            input_ids=self.input_ids, finished_sequences=self.finished_sequences, generation_config=self.config,
            stopping_criteria=self.stopping_criteria, canvas_length=self.canvas_length, eos_tensor=self.eos)
        self.canvases_left -= 1
        if torch.all(self.finished_sequences) or self.canvases_left == 0:
            self.done = True
            return
        self.cur_len, self.decoder_attention_mask, self.attention_mask, self.encoder_position_ids, \
            self.decoder_position_ids = self.model._prepare_kwargs_for_next_canvas(
                attention_mask=self.attention_mask, decoder_attention_mask=self.decoder_attention_mask,
                decoder_position_ids=self.decoder_position_ids, canvas_length=self.canvas_length, cur_len=self.cur_len)
        if self.together:
            self.starting = True
        else:
            self._start_block()


class _CachesOfRows:
    """The caches of rows encoded in one call (`_encode`): each layer's `update` split by row, every row's own cache
    updated with its slice as its call alone would; what else the encoder reads (lengths, mask sizes) from the first
    row's, equal for all since the rows were grouped by what they hold."""

    def __init__(self, caches: list):
        self.caches = caches

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        outs = [cache.update(key_states[r:r + 1], value_states[r:r + 1], layer_idx, *args, **kwargs)
                for r, cache in enumerate(self.caches)]
        return torch.cat([keys for keys, _ in outs]), torch.cat([values for _, values in outs])

    def __getattr__(self, name):
        return getattr(self.caches[0], name)


def _encode(rows: list[_Generation]) -> None:
    """What is new of each row (its prompt, or its last committed block) through the encoder in one call, into each
    row's own cache.  The rows hold equally many tokens and are all at their prompt or all past it (`_start_blocks`
    groups them so): their inputs, positions and masks then stack, and their caches agree on every length."""
    first = rows[0]
    model, kwargs = first.model, first.model_kwargs
    input_ids = torch.cat([g.input_ids for g in rows])
    positions = torch.cat([g.encoder_position_ids for g in rows])
    cache = first.cache if len(rows) == 1 else _CachesOfRows([g.cache for g in rows])
    ids, mask = model._prepare_encoder_inputs(
        input_ids=input_ids, attention_mask=torch.cat([g.attention_mask for g in rows]), encoder_position_ids=positions,
        past_key_values=cache, is_prefill=first.is_prefill, canvas_length=first.canvas_length, batch_size=len(rows),
        **kwargs)
    model.model.encoder(input_ids=ids, attention_mask=mask, past_key_values=cache, position_ids=positions, **kwargs)


def _start_blocks(generations: list[_Generation], together: bool) -> None:
    """Start the due block of each generation (`starting`): with `together`, rows holding as many tokens (at their
    prompt, or past it) share one encoder call, as a stock batch's rows do (each row's keys differ from its call
    alone in rounding, like the rest of `exact=False`'s pass); else each row alone, its run alone bit for bit.
    The encoder's weights are read once a call: alone, 16 rows of a 64-token prompt cost 16 calls of about what one
    call of all 16 costs (~0.1 s each on an H200 at the real shape, benchmarks/bench_refill_profile.py)."""
    due = [g for g in generations if g.starting]
    groups: dict[tuple, list[_Generation]] = {}
    for g in due:
        groups.setdefault((g.is_prefill, g.input_ids.shape[1]) if together else id(g), []).append(g)
    for rows in groups.values():
        _encode(rows)
    for g in due:
        g._new_canvas()


def _row_attention(module, query, key, value, attention_mask, **kwargs):
    """Each row's attention alone: its own cache's keys and values joined to its canvas's (the batched pass's
    cache is empty, so `key` and `value` hold the canvases), then transformers' SDPA without a mask, as the row's
    pass alone runs it (an unpadded dynamic cache needs none)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    outputs = []
    for row, cache in enumerate(_ROWS.get()[0]):
        layer = cache.layers[module.layer_idx]
        keys = torch.cat([layer.keys, key[row:row + 1]], dim=-2)
        values = torch.cat([layer.values, value[row:row + 1]], dim=-2)
        outputs.append(sdpa_attention_forward(module, query[row:row + 1], keys, values, None, **kwargs)[0])
    return torch.cat(outputs), None


def _rows_attention(module, query, key, value, attention_mask, **kwargs):
    """Every row's attention in one SDPA call (`exact=False`): each row's cached keys and values left-padded to the
    longest row's, joined to its canvas's, the padding masked out.  Not each row's pass alone: a masked, padded
    product rounds differently, as a padded row's logits differ from its pass alone (module docstring)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    layers = [cache.layers[module.layer_idx] for cache in _ROWS.get()[0]]
    longest = max(layer.keys.shape[-2] for layer in layers)

    def padded(tensors: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat([torch.nn.functional.pad(t, (0, 0, longest - t.shape[-2], 0)) for t in tensors])

    keys = torch.cat([padded([layer.keys for layer in layers]), key], dim=-2)
    values = torch.cat([padded([layer.values for layer in layers]), value], dim=-2)
    mask = None
    if any(layer.keys.shape[-2] != longest for layer in layers):  # True where a row's key is its own, not padding
        lengths = torch.tensor([layer.keys.shape[-2] for layer in layers], device=query.device)
        columns = torch.arange(keys.shape[-2], device=query.device)
        mask = (columns[None, :] >= (longest - lengths)[:, None])[:, None, None, :]
    return sdpa_attention_forward(module, query, keys, values, mask, **kwargs)


def _row_experts(module, hidden_states, top_k_index, top_k_weights):
    """Each row's tokens through the experts alone: a batch's tokens are grouped by expert, and an expert's matrix
    product over more tokens rounds differently in float32 on the CPU (checked on the built-in model), so each
    row's canvas (`canvas_length` consecutive tokens) runs the model's own experts implementation by itself."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    _, implementation, canvas = _ROWS.get()
    alone = ALL_EXPERTS_FUNCTIONS.get_interface(implementation, type(module).forward.__wrapped__)
    return torch.cat([alone(module, hidden_states[start:start + canvas], top_k_index[start:start + canvas],
                            top_k_weights[start:start + canvas]) for start in range(0, len(hidden_states), canvas)])


def _register_by_row() -> None:
    from transformers import AttentionInterface
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS

    AttentionInterface.register(_BY_ROW, _row_attention)
    AttentionInterface.register(_BATCHED, _rows_attention)
    ALL_EXPERTS_FUNCTIONS.register(_BY_ROW, _row_experts)


@contextlib.contextmanager
def _by_row(model, caches: list, exact: bool = True):
    """The decoder's attention and experts run row by row on `caches` for the duration (the text config's
    implementations, restored after); without `exact`, the attention in one padded call and the experts batched."""
    config = model.config.get_text_config()
    attention, experts = config._attn_implementation, getattr(config, "_experts_implementation", None)
    token = _ROWS.set((caches, experts, model.config.canvas_length))
    config._attn_implementation = _BY_ROW if exact else _BATCHED
    if experts is not None and exact:
        config._experts_implementation = _BY_ROW
    try:
        yield
    finally:
        config._attn_implementation = attention
        if experts is not None and exact:
            config._experts_implementation = experts
        _ROWS.reset(token)


def _soft_embeddings(decoder, logits: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The self-conditioning input of the rows of `logits`, as the stock decoder computes it
    (`DiffusionGemmaDecoderModel.forward`): the previous step's distribution times the embedding matrix.  The exact
    loop calls it row by row because that product sums over the whole vocabulary (262,144 at the real shape), and on a GPU its kernel splits that sum differently for more rows:
    on an H200 a refilled row's first pass with self-conditioning was the first to differ from its pass alone
    (benchmarks/bench_refill_identity.py)."""
    weight = decoder.embed_tokens.weight
    return torch.matmul(logits.softmax(dim=-1, dtype=torch.float32).to(weight.dtype), weight) * (
        decoder.embed_tokens.embed_scale.to(dtype))


@contextlib.contextmanager
def _given_soft_embeddings(decoder, soft: torch.Tensor):
    """The decoder's self-conditioning block fed `soft` in place of the zeros it computes when given no logits."""
    def replace(module, args):
        return args[0], soft

    handle = decoder.self_conditioning.register_forward_pre_hook(replace)
    try:
        yield
    finally:
        handle.remove()


# The most rows one decoder call takes on a CUDA device when the loop runs exact.  The projections, norms, dense MLP
# and head are batched over a call's rows, and cuBLAS picks its kernel by the product's size: on one H200 at the real
# 26B shape (bf16) a call of up to 4 rows (1,024 canvas tokens) gave every row's logits bit for bit as its pass
# alone, and a call of 8 or 16 rows differed from the first pass on (agreeing on 66-78% of a block's tokens,
# benchmarks/bench_refill_identity.py --rows 8).  Another GPU or shape: measure with that bench and pass `call_rows`.
CUDA_EXACT_CALL_ROWS = 4


def _call_rows(model, exact: bool, call_rows: int | None) -> int | None:
    """The rows one decoder call takes: the caller's choice, else CUDA_EXACT_CALL_ROWS for an exact loop on CUDA,
    else all the active rows (the CPU's float32 kernels give each row its pass alone at any batch)."""
    if call_rows is not None:
        return call_rows
    return CUDA_EXACT_CALL_ROWS if exact and model.device.type == "cuda" else None


def _decoder_pass(model, rows: list[_Generation], exact: bool = True, call_rows: int | None = None) -> torch.Tensor:
    """One decoder pass over every active row: (rows, canvas, vocab) logits, with `exact` each row's as its pass
    alone gives; in calls of at most `call_rows` rows when given."""
    if call_rows is not None and len(rows) > call_rows:
        return torch.cat([_decoder_pass(model, rows[start:start + call_rows], exact)
                          for start in range(0, len(rows), call_rows)])
    canvas = torch.cat([g.canvas for g in rows])
    decoder = model.model.decoder
    soft = contextlib.nullcontext()
    if any(g.self_conditioning is not None for g in rows):  # a row at its block's first step has zeros, as alone
        dtype = decoder.embed_tokens.weight.dtype
        given = [i for i, g in enumerate(rows) if g.self_conditioning is not None]
        previous = [rows[i].self_conditioning for i in given]
        # exact: one product a row, as its pass alone computes it; else one product over every such row
        products = ([_soft_embeddings(decoder, p, dtype) for p in previous] if exact
                    else _soft_embeddings(decoder, torch.cat(previous), dtype).split(1))
        embedded = [torch.zeros_like(products[0])] * len(rows)
        for i, product in zip(given, products):
            embedded[i] = product
        soft = _given_soft_embeddings(decoder, torch.cat(embedded))
    # an empty cache: the decoder joins it to the canvases, and `_row_attention` joins each row's own
    empty = [SimpleNamespace(keys=layer.keys.new_zeros(len(rows), layer.keys.shape[1], 0, layer.keys.shape[3]),
                             values=layer.values.new_zeros(len(rows), layer.values.shape[1], 0, layer.values.shape[3]))
             for layer in rows[0].cache.layers]
    cache = SimpleNamespace(layers=empty, is_compileable=False)
    with _by_row(model, [g.cache for g in rows], exact), soft:
        return model(decoder_input_ids=canvas, self_conditioning_logits=None,
                     decoder_attention_mask={"full_attention": None, "sliding_attention": None}, past_key_values=cache,
                     decoder_position_ids=torch.cat([g.decoder_position_ids for g in rows])).logits


def refill_generate(model, jobs: Sequence[Job], *, rows: int, generate_kwargs: dict,
                    on_step: Callable[[int, CapturedStep], None], on_block: Callable[[int, CapturedBlock], None],
                    on_done: Callable[[int], None] = lambda job: None, should_stop: Callable[[], bool] | None = None,
                    topk: int = 0, shift: bool = False, exact: bool = True, call_rows: int | None = None) -> int:
    """Generate every job with at most `rows` at a time, each finished row refilled with the next job before the
    next decoder pass; `on_step(job, step)` and `on_block(job, block)` get each job's records (their `row` is 0:
    each is a run of one), `on_done(job)` when its generation ends.  Returns the row-passes the loop ran (each
    pass counts its rows).  `exact=False` runs the whole pass batched: the experts in one grouped pass over every
    row's tokens (each expert's weights read once a pass, not once a row), the attention in one padded, masked call
    (`_rows_attention`) and the self-conditioning input in one product: each trace then depends on which rows shared
    its passes, as a stock batch's rows do (reproducible from the plan, not equal to the run alone), and a pass costs
    about what a stock pass of as many rows costs.
    `call_rows` caps the rows one decoder call takes (`_call_rows`: by default 4 for an exact loop on CUDA, all on
    the CPU); a pass over more active rows makes several calls."""
    if rows < 1:
        raise ValueError(f"rows must be at least 1 (got {rows})")
    guard_hooks()
    _register_by_row()
    call_rows = _call_rows(model, exact, call_rows)
    waiting = deque(enumerate(jobs))
    active: list[tuple[int, _Generation]] = []
    row_passes = 0
    with torch.no_grad():
        while waiting or active:
            while waiting and len(active) < rows:
                index, job = waiting.popleft()
                recorder = _StepRecorder(model, lambda step, i=index: on_step(i, step),
                                         lambda block, i=index: on_block(i, block), should_stop,
                                         topk=topk, agree=None, shift=shift, pins=())
                active.append((index, _Generation(model, job, generate_kwargs, recorder, together=True)))
            _start_blocks([g for _, g in active], together=not exact)  # the new rows', and the next blocks'
            logits = _decoder_pass(model, [g for _, g in active], exact, call_rows)
            row_passes += len(active)
            for (_, generation), row_logits in zip(active, logits.split(1)):
                generation.step(row_logits)
            for index, generation in active:
                if generation.done:
                    on_done(index)
            active = [(i, g) for i, g in active if not g.done]
    return row_passes


def refill_traces(backend, prompts: Sequence[str], seeds: Sequence[int], settings, *, rows: int,
                  stop: threading.Event | None = None, exact: bool = True) -> tuple[list[Trace], int]:
    """One Trace per prompt, each generated with its own seed by `refill_generate` on at most `rows` rows: each
    equal to `record_trace(backend, prompt, settings.replace(seed=seed))` but for its times (a RunEnd's is the
    time since this call began); with `exact=False` the loop's whole pass batched (`refill_generate`'s).  Also the row-passes the loop ran.  A transformers backend, eager, stock runs
    only: anything else is a BackendError with one line.  `stop` ends every unfinished run ("cancelled"); an error
    in the model ends them with its message ("error")."""
    if len(prompts) != len(seeds):
        raise ValueError("one seed per prompt")
    model = getattr(backend, "model", None)
    if getattr(backend, "name", None) != "transformers" or model is None:
        raise BackendError("refilling rows runs transformers' DiffusionGemma only: use --batch-order suite")
    resolved = [backend.resolve(settings.replace(seed=seed)) for seed in seeds]
    first = resolved[0] if resolved else backend.resolve(settings)
    if first.compiled:
        raise BackendError("refilling rows runs eager only (a compiled graph keeps its batch shape): leave out --compiled")
    if first.sampler not in (None, SAMPLER_ENTROPY_BOUND):
        raise BackendError(f"refilling rows runs transformers' own sampler ({SAMPLER_ENTROPY_BOUND}), not {first.sampler}")
    if first.pins or first.layers or first.kl_to_final or backend.fork_plan is not None or backend.parallel is not None:
        raise BackendError("refilling rows records stock runs on one model: no pins, --layers, --kl-to-final or --parallel")
    ids = [backend._check_row(p, s, row, len(prompts)) for row, (p, s) in enumerate(zip(prompts, resolved))]
    stop = stop or threading.Event()
    started = time.perf_counter()
    decoder = backend._piece_decoder()
    tables = [PieceTable(decoder=decoder) for _ in prompts]
    traces = [Trace(model=backend.info, prompt=p) for p in prompts]
    blocks: list[list] = [[] for _ in prompts]
    for trace, row_ids, s, table in zip(traces, ids, resolved, tables):
        trace.append(backend.run_start(row_ids, s, table, batch=None))

    def on_step(job: int, step: CapturedStep) -> None:
        traces[job].append(step_record(step, tables[job]))

    def on_block(job: int, block: CapturedBlock) -> None:
        record = block_record(block, tables[job], backend.info.eos_token_ids)
        blocks[job].append(record.tokens)
        traces[job].append(record)

    def on_done(job: int) -> None:
        traces[job].append(run_end(backend, blocks[job], finish=None, error=None, started=started))

    def work() -> int:
        return refill_generate(model, [Job(i, s.seed) for i, s in zip(ids, resolved)], rows=rows,
                               generate_kwargs=backend.generate_kwargs(first), on_step=on_step, on_block=on_block,
                               on_done=on_done, should_stop=stop.is_set,
                               topk=min(first.record_topk, backend.info.vocab_size), shift=bool(first.record_shift),
                               exact=exact)

    row_passes, finish, error = 0, None, None
    try:
        row_passes = backend._launch(work).result()
    except GenerationCancelled:
        finish = FINISH_CANCELLED
    except Exception as exc:  # noqa: BLE001 -- the model's failure ends the unfinished runs, as a batch's does
        finish, error = FINISH_ERROR, backend.failure_message(exc)
    for job, trace in enumerate(traces):
        if trace.end is None:
            trace.append(run_end(backend, blocks[job], finish=finish or FINISH_CANCELLED, error=error, started=started))
    return traces, row_passes
