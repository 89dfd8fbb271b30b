"""Records: the small, plain-data messages a backend yields while it generates.

A backend turns one generation into a stream of records:

    RunStart, StepRecord*, BlockRecord, StepRecord*, BlockRecord, ..., RunEnd

one `StepRecord` per denoising step, one `BlockRecord` per finished block (canvas) and a
`RunEnd` at the end (also after a cancel or an error, so nothing already recorded is lost).
Everything downstream (trace, states, metrics, renderers, app) works on these records alone,
so a saved trace replays exactly like a live run.

Records hold CPU numpy arrays of fixed dtypes (ids int32, masks bool, entropies float32,
candidate probabilities float16), never tensors or logits: about 2 KB a step for a 256-token
canvas, plus 7.5 KB with the top-5 candidates of every position.  Arrays are made read-only
so a record cannot be changed after it was yielded.

Words: "accepted" is the sampler's accepted set at a step; "argmax" is the all-position argmax
of the processed logits (transformers calls it the *draft*; we keep the two words apart);
"committed" means the block is finished.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Union

import numpy as np

STOP_CONVERGED = "converged"  # ended early: stability + confidence fired, or (MLX confidence-threshold) all revealed
STOP_OUT_OF_STEPS = "out_of_steps"  # the block used every denoising step it was allowed
BLOCK_STOP_REASONS = (STOP_CONVERGED, STOP_OUT_OF_STEPS)

FINISH_EOS = "eos"  # a block held an end-of-sequence token
FINISH_LENGTH = "length"  # max_new_tokens was reached without an EOS
FINISH_CANCELLED = "cancelled"  # the user stopped the run between two steps
FINISH_ERROR = "error"  # the backend failed; `RunEnd.error` says why
FINISH_REASONS = (FINISH_EOS, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR)


def frozen_array(values, dtype) -> np.ndarray:
    """A read-only 1-D numpy copy of `values` with the given dtype.

    A record's arrays are one run's: a (batch, canvas) array is a ValueError, never flattened
    into a plausible-looking longer record (a batched capture hands over one row at a time)."""
    array = np.array(values, dtype=dtype)
    if array.ndim > 1:
        raise ValueError(f"a record array must be 1-D (one run's row), got shape {array.shape}")
    array = array.reshape(-1)
    array.flags.writeable = False
    return array


def frozen_matrix(values, dtype, columns: int) -> np.ndarray:
    """A read-only (rows, columns) numpy copy of `values` with the given dtype."""
    array = np.array(values, dtype=dtype).reshape(-1, columns)
    array.flags.writeable = False
    return array


def frozen_cube(values, dtype, shape: tuple[int, int]) -> np.ndarray:
    """A read-only (n, *shape) numpy copy of `values` with the given dtype (the lens ranks of a block)."""
    array = np.array(values, dtype=dtype).reshape(-1, *shape)
    array.flags.writeable = False
    return array


def _array(dtype, **kwargs):
    """A record's numpy field with its dtype declared beside it (`array_dtypes` reads it back)."""
    return field(metadata={"dtype": dtype}, **kwargs)


def array_dtypes(record: type) -> dict[str, type]:
    """{field name: dtype} of a record type's numpy fields, in field order: what its converters
    (`backends.captured`) and the trace file's reader (`trace_format`) make each array as."""
    return {f.name: f.metadata["dtype"] for f in dataclasses.fields(record) if "dtype" in f.metadata}


class _ArrayRecord:
    """Equality for frozen dataclasses whose fields may be numpy arrays."""

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        for f in dataclasses.fields(self):
            if not f.compare:
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
                if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
                    return False
                if a.dtype != b.dtype or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None


@dataclass(frozen=True, eq=False)
class ModelInfo(_ArrayRecord):
    """What a loaded model is: shown in the UI and stored in every trace."""

    name: str  # display name, e.g. "google/diffusiongemma-26B-A4B-it" or "built-in demo model"
    source: str  # hub id or local folder it was loaded from
    backend: str  # the registry name of the backend that ran it (`backends.registry`), shown, never branched on
    device: str  # "cuda:0", "cpu", "mps", "metal", ...
    dtype: str  # "bfloat16", "float32", "4-bit", ...
    canvas_length: int  # tokens per block (256 for DiffusionGemma)
    vocab_size: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int | None
    max_context: int  # longest prompt + output the model accepts, in tokens
    builtin: bool = False  # True for the small models shipped in assets/, never the 26B one
    parameters: int = 0  # number of distinct parameters, 0 if unknown
    layers: int = 0  # decoder layers (what `settings.layers` may name), 0 if unknown or not recordable


@dataclass(frozen=True, eq=False)
class RunStart(_ArrayRecord):
    """First record of a run: the tokenized prompt and the resolved knobs."""

    prompt_ids: np.ndarray = _array(np.int32)  # (prompt_len,) int32, the chat-templated prompt fed to the encoder
    settings: dict  # every knob with the value actually used (checkpoint defaults filled in)
    max_blocks: int  # ceil(max_new_tokens / canvas_length): fixes the layout before any step
    # The sampler's accept rule (`visualizer.samplers.AcceptRule.to_dict()`); None in traces written
    # before rules were recorded (version 2), whose rule `Trace.sampler_rule` derives.
    sampler_rule: dict | None = None
    # The batch this run was generated in, when it shared one call of the model with other prompts:
    # {"size": prompts in the batch, "row": this prompt's index}. A row's samples depend on its
    # batch (one seed per batch, batched kernels), so reproducing it needs the same batch, in the
    # same order. None: generated alone (a batch of one).
    batch: dict | None = None
    # Pinned tokens (settings.pins, tokenized): ((position in the first block, token id), ...), sorted by
    # position; placed on the canvas before the first step and kept accepted at every step. (): none.
    pins: tuple = ()
    new_pieces: dict = field(default_factory=dict, compare=False)  # {token id: text} for prompt ids


@dataclass(frozen=True, eq=False)
class StepRecord(_ArrayRecord):
    """One denoising step of one block, recorded after the sampler decided."""

    block: int  # block (canvas) index, 0-based
    step: int  # step index within the block, 0-based
    steps_remaining: int  # the sampler's `cur_step`: max_denoising_steps at step 0, counting down to 1
    accepted: np.ndarray = _array(bool)  # (canvas,) bool: positions whose sampled token the sampler kept this step
    canvas: np.ndarray = _array(np.int32)  # (canvas,) int32: canvas fed to the next step (accepted samples, fresh noise elsewhere)
    argmax: np.ndarray = _array(np.int32)  # (canvas,) int32: argmax of the processed logits at every position
    entropy_nats: np.ndarray = _array(np.float32)  # (canvas,) float32: entropy of the processed (temperature-scaled) logits
    wall_time_s: float  # seconds this step took, device work included
    new_pieces: dict = field(default_factory=dict, compare=False)  # {id: text} for displayed ids not seen before
    # The alternatives (settings.record_topk > 0): the k most probable ids of the processed logits
    # at every position, most probable first, and their probabilities. Never the logits.
    topk_ids: np.ndarray | None = _array(np.int32, default=None)  # (canvas, k) int32
    topk_probs: np.ndarray | None = _array(np.float16, default=None)  # (canvas, k) float16
    # MLX confidence-threshold sampler only: the probability of the token sampled at each position,
    # the value it compares with its threshold (None for the entropy-bound sampler).
    sample_probability: np.ndarray | None = _array(np.float32, default=None)  # (canvas,) float32
    # The shift (settings.record_shift): KL(p_t || p_t-1) of each position's sampling distribution (the
    # processed logits the sampler sees) from the previous step's, in nats. None at a block's first step.
    kl_nats: np.ndarray | None = _array(np.float32, default=None)  # (canvas,) float32
    # KL to the final step (settings.kl_to_final): KL(p_final || p_t) of each position's sampling distribution, p_final
    # the block's last step's, in nats (0 at the last step). Exact: the backend's second, bit-identical pass.
    kl_to_final_nats: np.ndarray | None = _array(np.float32, default=None)  # (canvas,) float32
    # Inside the network (settings.layers: the recorded layers, in that order, are `RunStart.settings["layers"]`):
    # the RMS over the hidden size of each layer's output (the logit lens of the step comes with its block)
    layer_rms: np.ndarray | None = _array(np.float32, default=None)  # (layers, canvas) float32

    @property
    def topk(self) -> int:
        """How many candidates per position this step recorded (0: none)."""
        return 0 if self.topk_ids is None else int(self.topk_ids.shape[1])


@dataclass(frozen=True, eq=False)
class BlockRecord(_ArrayRecord):
    """A finished block: what was committed and why the block ended."""

    block: int
    tokens: np.ndarray = _array(np.int32)  # (canvas,) int32: committed ids (last step's argmax, pad after the EOS)
    eos_position: int | None  # index in the block of the first EOS token, None when there is none
    stop_reason: str  # one of BLOCK_STOP_REASONS
    steps_used: int  # denoising steps this block ran
    new_pieces: dict = field(default_factory=dict, compare=False)
    # With settings.layers, the logit lens (final norm + tied head) of each recorded layer at each step of the
    # block, computed once the block is committed (the rank needs its tokens; one head product gives all three):
    lens_top_ids: np.ndarray | None = _array(np.int32, default=None)  # (steps_used, layers, canvas) int32: the lens's top token
    lens_top_probs: np.ndarray | None = _array(np.float16, default=None)  # (steps_used, layers, canvas) float16: its probability (temperature 1)
    lens_ranks: np.ndarray | None = _array(np.int32, default=None)  # (steps_used, layers, canvas) int32: the committed token's rank (0: top)


@dataclass(frozen=True, eq=False)
class RunEnd(_ArrayRecord):
    """Last record of a run."""

    finish_reason: str  # one of FINISH_REASONS
    sequence: np.ndarray = _array(np.int32)  # (generated,) int32: all committed block tokens in order, pad included
    text: str  # the response decoded with special tokens skipped
    wall_time_s: float  # whole run, tokenization to last block
    error: str | None = None  # a one-line message when finish_reason is FINISH_ERROR


Record = Union[RunStart, StepRecord, BlockRecord, RunEnd]

STEP_DTYPES = array_dtypes(StepRecord)
BLOCK_DTYPES = array_dtypes(BlockRecord)
# A block's logit lens and each part's dtype, in the order `backends.layer_capture.block_lens` returns them.
LENS_DTYPES = {name: dtype for name, dtype in BLOCK_DTYPES.items() if name.startswith("lens_")}
LENS_FIELDS = tuple(LENS_DTYPES)
