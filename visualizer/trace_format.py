"""The trace file: its JSON format, writing it, and reading it back with every field validated.

The live `visualizer.trace.Trace` is what a run appends to; this module is what that trace
looks like on disk and the gate every file passes before it becomes a Trace again.

JSON format (version 5), documented for people who read or write traces by hand:

    {
      "format": "diffusion-visualizer-trace", "version": 5, "created": "2026-11-21T20:00:00+00:00",
      "model":   {name, source, backend, device, dtype, canvas_length, vocab_size, eos_token_ids,
                  pad_token_id, max_context, builtin, parameters},
      "prompt":  {"text": "...", "ids": [int, ...]},        # ids after the chat template
      "settings": {max_new_tokens, max_denoising_steps, entropy_bound, t_min, t_max, seed,
                   sampler, temperature, compiled, record_topk, thinking, corrector_steps,
                   corrector_k, refine_threshold, editing_threshold},  # the values really used
      "max_blocks": int,                                     # ceil(max_new_tokens / canvas_length)
      "sampler_rule": {"renoises": bool, "last_step_samples": bool,  # the sampler's accept rule
                       "budget": "entropy-bound"|"confidence-threshold"|null,  # (visualizer.samplers)
                       "entropy": "raw"},                    # optional: the entropy is of the raw logits
      "batch":   {"size": int, "row": int},                 # optional: the run shared a batched call
      "pieces":  {"<id>": "decoded text", ...},              # every id that is ever displayed
      "steps":   [{"block", "step", "steps_remaining", "accepted": [0|1 x canvas],
                   "canvas": [id x canvas], "argmax": [id x canvas],
                   "entropy_nats": [float32 x canvas], "wall_time_s",
                   "topk_ids": [[id x k] x canvas],          # optional: when settings.record_topk = k > 0
                   "topk_probs": [[float16 x k] x canvas],    #   the k most probable candidates, best first
                   "sample_probability": [float32 x canvas], # optional: MLX confidence-threshold, block-refinement
                   "kl_nats": [float32 x canvas],            # optional (v4): settings.record_shift, from a block's 2nd step
                   "kl_to_final_nats": [float32 x canvas],   # optional: settings.kl_to_final, KL(p_final || p_t), every step
                   "layer_rms": [[float32 x canvas] x L],    # optional (v4): settings.layers = L layers, in that order
                  }, ...],
      "blocks":  [{"block", "tokens": [id x canvas], "eos_position": int|null,
                   "stop_reason": "converged"|"out_of_steps", "steps_used",
                   "lens_top_ids": [[[id x canvas] x L] x steps_used],  # optional (v5): with settings.layers, the
                   "lens_top_probs": [[[float16 x canvas] x L] x steps_used],  # logit lens's top token and its
                   "lens_ranks": [[[int x canvas] x L] x steps_used]  # probability, and the committed token's rank
                  }, ...],
      "pins":    [[position, id], ...],                      # optional (v4): tokens pinned in the first block
      "branch":  {"parent": sha256, "at": [block, step],     # optional (v5): this run is a fork of the parent file
                  "interventions": [{"spec": "set 4=sea", "ids": [id, ...]}, ...]},  # from block:step (from 1) on
      "warm_start": {"from": sha256|null, "at": [block, step]|null,  # optional (v5): the first canvas held these
                     "texts": ["POS=TEXT", ...], "placed": [[position, id], ...]},  # tokens (visualizer.warm_start)
      "end":     {"finish_reason": "eos"|"length"|"cancelled"|"error", "sequence": [id, ...],
                  "text": "...", "wall_time_s", "error": str|null} | null
    }

The reader reads this version only: an older file is first brought to its layout by
`trace_upgrade.upgrade`, whose docstring says what each version moved.
Version 5 moved the lens's top ids and probabilities from each step to its block, beside the ranks: the
capture computes all three once the block is committed, from one head product per layer and step. A
version-4 file loads with its steps' lens gathered into their blocks.
Version 4 added what the network does inside and the pins (docs/layers-and-pins.md): the settings
`pins`, `layers` and `record_shift`, `model.layers`, the tokenized `pins`, a step's `kl_nats` and
per-layer `layer_rms`, `lens_top_ids`, `lens_top_probs`, and a block's `lens_ranks`. Older files load
unchanged, as runs without them (`record_shift` false, no layers, no pins).
Version 3 added `sampler_rule`, so that a trace says how its sampler accepts and the library
needs no backend's name: any well-formed sampler name loads when its rule is recorded. A version-2
file, which recorded none, still loads when its (backend, sampler) pair is one a version-2 writer
made (`visualizer.samplers.legacy_rule`).
Version 2 added the optional candidates (`record_topk`, `topk_ids`, `topk_probs`) and
`sample_probability`; a version 1 file still loads, as a run that recorded no candidates
(`record_topk` 0). Entropies are float32 and candidate probabilities float16 values, each written
with its shortest exact decimal form. Loading checks the
schema, every size (canvas length, vocabulary, counts, file size), the order of records and that
every displayed id has a piece, and rejects anything else with a `TraceError`: json.loads never
executes anything, and no field is ever evaluated.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import typing
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .records import (
    BLOCK_DTYPES,
    BLOCK_STOP_REASONS,
    LENS_DTYPES,
    LENS_FIELDS,
    STEP_DTYPES,
    array_dtypes,
    frozen_cube,
    FINISH_REASONS,
    BlockRecord,
    ModelInfo,
    RunEnd,
    RunStart,
    StepRecord,
    frozen_array,
    frozen_matrix,
)
from .interventions import parse_branch
from .warm_start import parse_warm_start
from .knobs import is_int
from .samplers import SAMPLER_ENTROPY_BOUND, AcceptRule
from .settings import GenerationSettings
from .trace_upgrade import upgrade

TRACE_FORMAT = "diffusion-visualizer-trace"
TRACE_VERSION = 5

# Size limits for loading untrusted files: generous for real runs, small enough to stay safe.
MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_CANVAS_LENGTH = 4096
MAX_VOCAB_SIZE = 4_000_000
MAX_STEPS = 200_000
MAX_BLOCKS = 4096
MAX_BATCH = 1_000_000  # prompts in one batched call
MAX_PROMPT_TOKENS = 1_000_000
MAX_PIECE_CHARS = 4096
MAX_TEXT_CHARS = 10_000_000


class TraceError(ValueError):
    """A trace is malformed; the message says what and where, for the UI and the CLI."""


class TraceParts(NamedTuple):
    """The validated content of a trace file: the fields of a `Trace`, by name."""

    model: ModelInfo
    prompt: str
    start: RunStart
    steps: list
    blocks: list
    end: RunEnd | None
    pieces: dict
    created: str
    branch: object = None  # visualizer.interventions.Branch: this run is a fork of another (issue 55)
    warm_start: object = None  # visualizer.warm_start.WarmStart: the run's first canvas held these tokens


# ---- writing ------------------------------------------------------------------------------------
def trace_to_dict(trace) -> dict:
    """The JSON-ready dict of a trace (anything with a Trace's fields)."""
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "created": trace.created,
        "model": {**asdict(trace.model), "eos_token_ids": list(trace.model.eos_token_ids)},
        "prompt": {"text": trace.prompt, "ids": _ints(trace.start.prompt_ids) if trace.start else []},
        "settings": dict(trace.start.settings) if trace.start else {},
        "max_blocks": trace.start.max_blocks if trace.start else 0,
        "sampler_rule": trace.sampler_rule.to_dict() if trace.start else None,
        **({"batch": dict(trace.start.batch)} if trace.start and trace.start.batch else {}),
        **({"pins": [[int(p), int(t)] for p, t in trace.start.pins]} if trace.start and trace.start.pins else {}),
        **({"branch": trace.branch.to_dict()} if getattr(trace, "branch", None) is not None else {}),
        **({"warm_start": trace.warm_start.to_dict()} if getattr(trace, "warm_start", None) is not None else {}),
        "pieces": {str(k): v for k, v in sorted(trace.pieces.items())},
        "steps": [_record_fields(s, STEP_DTYPES) for s in trace.steps],
        "blocks": [_record_fields(b, BLOCK_DTYPES) for b in trace.blocks],
        "end": None
        if trace.end is None
        else {
            "finish_reason": trace.end.finish_reason,
            "sequence": _ints(trace.end.sequence),
            "text": trace.end.text,
            "wall_time_s": trace.end.wall_time_s,
            "error": trace.end.error,
        },
    }


def settings_of_run(settings: dict) -> GenerationSettings:
    """The settings a trace records. Version 1 predates the candidates, so its settings never name
    record_topk: such a run recorded none (0, not the default of a new run)."""
    # Before version 4 no run recorded the shift: a settings dict that does not name it recorded none.
    return GenerationSettings.from_dict({"record_topk": 0, "record_shift": False, **settings})


def _record_fields(record, dtypes: dict) -> dict:
    """A step's or a block's JSON: its written fields in declaration order (`new_pieces` goes into the
    trace's pieces), each array as JSON values of its dtype; an optional part it does not hold is left out."""
    out = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.compare and not (value is None and f.default is None):
            out[f.name] = _json_values(value, dtypes[f.name]) if f.name in dtypes else value
    return out


def _json_values(array, dtype) -> list:
    """An array as nested JSON lists: ids and flags as ints, floats by their shortest exact decimal."""
    if dtype is np.float16:
        return _float16_decimals(array).tolist()
    if dtype is np.float32:  # float(str(x)): the shortest decimal that reads back as the same float32
        array = np.asarray(array)
        return np.array([float(str(x)) for x in array.reshape(-1)], np.float64).reshape(array.shape).tolist()
    return np.asarray(array).astype(np.int64, copy=False).tolist()


def displayed_ids(start: RunStart | None, steps, blocks) -> set[int]:
    """Every id the renderers may show: these must all have a piece."""
    ids = set(_ints(start.prompt_ids)) if start else set()
    ids.update(int(token) for _, token in (start.pins if start else ()))
    for s in steps:
        ids.update(np.unique(s.argmax).tolist())
        ids.update(np.unique(s.canvas[s.accepted]).tolist())
        if s.topk_ids is not None:
            ids.update(np.unique(s.topk_ids).tolist())
    for b in blocks:
        ids.update(np.unique(b.tokens).tolist())
        if b.lens_top_ids is not None:
            ids.update(np.unique(b.lens_top_ids).tolist())
    return ids


def _ints(array) -> list[int]:
    return np.asarray(array).astype(np.int64, copy=False).reshape(-1).tolist()


@functools.cache
def _float16_table() -> np.ndarray:
    """The shortest decimal of every float16 (indexed by its 16 bits), as float(str(x)) gives it."""
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    return np.array([float(str(x)) for x in every], dtype=np.float64)


def _float16_decimals(values) -> np.ndarray:
    """float(str(x)) of each float16, by table: a trace holds thousands a step (the candidates)."""
    return _float16_table()[np.asarray(values, dtype=np.float16).view(np.uint16)]


# ---- reading ------------------------------------------------------------------------------------
def parse_trace_json(text: str | bytes) -> TraceParts:
    """The validated parts of a trace given as JSON text (raises TraceError)."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"trace is {len(text) / 1e6:.0f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise TraceError(not_json_message(exc)) from None
    return parse_trace(data)


def not_json_message(exc: Exception) -> str:
    """What a file that json.loads refused is, in words (never the parser's "Expecting value: line 1 column 1 (char 0)")."""
    if isinstance(exc, RecursionError):
        return "not a trace: the file's JSON is nested too deeply"
    if isinstance(exc, json.JSONDecodeError) and exc.pos > 0:  # JSON at first, broken further on (a cut or hand-edited file)
        return f"not a trace: the file stops being JSON at line {exc.lineno}, column {exc.colno}"
    return "not a trace: the file is not JSON"


def read_trace_file(path) -> TraceParts:
    """The validated parts of the trace file at `path`, its size checked before it is read."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > MAX_TRACE_BYTES:
        raise TraceError(f"{path.name} is {size / 1e6:.0f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB")
    return parse_trace_json(path.read_bytes())


def parse_trace(data) -> TraceParts:
    """The validated parts of a parsed JSON trace (raises TraceError with a one-line message)."""
    if not isinstance(data, dict):
        raise TraceError("a trace is a JSON object at the top level")
    if data.get("format") != TRACE_FORMAT:
        raise TraceError(f'not a trace file: "format" must be "{TRACE_FORMAT}"')
    version = data.get("version")
    if not is_int(version):
        raise TraceError('"version" must be an integer')
    if version > TRACE_VERSION:
        raise TraceError(f"trace version {version} was written by a newer tool; this one reads up to {TRACE_VERSION}")
    if version < 1:
        raise TraceError(f"unknown trace version {version}")
    known = {"format", "version", "created", "model", "prompt", "settings", "max_blocks", "sampler_rule", "batch", "pins", "branch", "warm_start", "pieces", "steps", "blocks", "end"}
    _no_unknown(data, known, "trace")
    try:
        data = upgrade(data, version)  # from here on, version 5's layout (`trace_upgrade`)
    except ValueError as exc:
        raise TraceError(str(exc)) from None

    model = _parse_model(_get(data, "model", dict, "trace"))
    canvas, vocab = model.canvas_length, model.vocab_size
    prompt = _get(data, "prompt", dict, "trace")
    _no_unknown(prompt, {"text", "ids"}, "prompt")
    text = _get(prompt, "text", str, "prompt")
    if len(text) > MAX_TEXT_CHARS:
        raise TraceError("prompt.text is too long")
    prompt_ids = _id_array(_get(prompt, "ids", list, "prompt"), vocab, "prompt.ids", _START_DTYPES["prompt_ids"], max_len=MAX_PROMPT_TOKENS)

    settings = _get(data, "settings", dict, "trace")
    try:
        problems = settings_of_run(settings).problems()
    except (TypeError, ValueError) as exc:
        raise TraceError(f"settings: {exc}") from None
    if problems:
        raise TraceError(f"settings: {problems[0]}")
    max_blocks = _get(data, "max_blocks", int, "trace")
    if not 1 <= max_blocks <= MAX_BLOCKS:
        raise TraceError(f"max_blocks must be from 1 to {MAX_BLOCKS} (got {max_blocks})")
    rule = _parse_sampler_rule(data.get("sampler_rule"), settings_of_run(settings).sampler)

    raw_pieces = _get(data, "pieces", dict, "trace")
    pieces = {}
    for key, value in raw_pieces.items():
        if not (isinstance(key, str) and key.isascii() and key.isdigit() and int(key) < vocab):
            raise TraceError(f"pieces: key {key!r} is not a token id below the vocabulary size {vocab}")
        if not isinstance(value, str) or len(value) > MAX_PIECE_CHARS:
            raise TraceError(f"pieces[{key}] must be a string of at most {MAX_PIECE_CHARS} characters")
        pieces[int(key)] = value

    created = data.get("created", "")
    if not isinstance(created, str) or len(created) > 64:
        raise TraceError('"created" must be a date string')
    batch = _parse_batch(data.get("batch"))
    pins = _parse_pins(data.get("pins"), canvas, vocab)
    run = settings_of_run(settings)
    if bool(pins) != bool(run.pins):
        raise TraceError("pins and settings.pins come together: both present or both absent")
    layers = _recorded_layers(run.layers, model)
    start = RunStart(prompt_ids=prompt_ids, settings=dict(settings), max_blocks=max_blocks, sampler_rule=rule, batch=batch, pins=pins)
    steps, blocks, end = [], [], None

    raw_steps = _get(data, "steps", list, "trace")
    if len(raw_steps) > MAX_STEPS:
        raise TraceError(f"{len(raw_steps)} steps is more than the limit of {MAX_STEPS}")
    for i, raw in enumerate(raw_steps):
        step = _parse_step(raw, i, canvas, vocab, max_blocks, run.record_topk)
        steps.append(_check_inside(raw, step, f"steps[{i}]", canvas, vocab, layers, bool(run.record_shift),
                                   bool(run.kl_to_final)))
    raw_blocks = _get(data, "blocks", list, "trace")
    if len(raw_blocks) > max_blocks:
        raise TraceError(f"{len(raw_blocks)} blocks recorded but max_blocks is {max_blocks}")
    for i, raw in enumerate(raw_blocks):
        blocks.append(_parse_block(raw, i, canvas, vocab, model, layers))
    raw_end = data.get("end")
    if raw_end is not None:
        end = _parse_end(raw_end, vocab)

    try:
        branch = parse_branch(data.get("branch"), canvas, vocab)
        warm_start = parse_warm_start(data.get("warm_start"), canvas, vocab)
    except ValueError as exc:
        raise TraceError(str(exc)) from None
    parts = TraceParts(model, text, start, steps, blocks, end, pieces, created, branch, warm_start)
    _check_order(parts)
    missing = sorted(displayed_ids(start, steps, blocks) - set(pieces))
    if missing:
        shown = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
        raise TraceError(f"{len(missing)} displayed token id(s) have no piece in 'pieces': {shown}")
    return parts


def _parse_pins(raw, canvas: int, vocab: int) -> tuple:
    """The pinned (position, id) pairs, sorted by position and distinct; () when absent."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > canvas:
        raise TraceError(f'"pins" must be a list of at most {canvas} [position, id] pairs')
    pairs = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2 and all(is_int(v) for v in pair)):
            raise TraceError('"pins" must hold [position, id] pairs of integers')
        if not 0 <= pair[0] < canvas or not 0 <= pair[1] < vocab:
            raise TraceError(f"pin {pair} must have a position from 0 to {canvas - 1} and an id below {vocab}")
        pairs.append((pair[0], pair[1]))
    if [p for p, _ in pairs] != sorted({p for p, _ in pairs}):
        raise TraceError('"pins" must be sorted by position, each position once')
    return tuple(pairs)


def _recorded_layers(layers, model: ModelInfo) -> int:
    """How many layers each step records (0: none): settings.layers resolved to layer numbers of the model."""
    if layers is None or layers == ():
        return 0
    if isinstance(layers, str):
        raise TraceError('settings.layers must list the recorded layers (a run resolves "all")')
    if model.layers and max(layers) >= model.layers:
        raise TraceError(f"settings.layers names layer {max(layers)} but model.layers is {model.layers}")
    return len(layers)


def _float_rows(values, where: str, rows: int, canvas: int, dtype) -> np.ndarray:
    if not (isinstance(values, list) and len(values) == rows and all(isinstance(r, list) and len(r) == canvas for r in values)):
        raise TraceError(f"{where} must be {rows} lists of {canvas} numbers")
    flat = [v for r in values for v in r]
    if not all(_is_number(v) for v in flat):
        raise TraceError(f"{where} must hold numbers")
    array = frozen_matrix(flat, dtype, canvas)
    if not np.all(np.isfinite(array)) or array.min() < 0:
        raise TraceError(f"{where} must hold finite numbers of at least 0")
    return array


def _check_inside(raw: dict, step: StepRecord, where: str, canvas: int, vocab: int, layers: int, shift: bool,
                  to_final: bool = False) -> StepRecord:
    """The step with version 4's optional parts parsed into it."""
    parts = {}
    # the shift from a block's second step; the KL to the final step at every step (settings.kl_to_final)
    for name, knob, on, needed in (("kl_nats", "record_shift", shift, shift and step.step > 0),
                                   ("kl_to_final_nats", "kl_to_final", to_final, to_final)):
        if name in raw:
            if not on:
                raise TraceError(f"{where} has {name} though settings.{knob} is off")
            kl = _get(raw, name, list, where)
            if len(kl) != canvas or not all(_is_number(v) for v in kl):
                raise TraceError(f"{where}.{name} must be {canvas} numbers")
            array = frozen_array(kl, STEP_DTYPES[name])
            if not np.all(np.isfinite(array)) or array.min() < -1e-3:  # float32 rounding makes a KL of 0 about -1e-9
                raise TraceError(f"{where}.{name} must be finite numbers of at least 0")
            parts[name] = array
        elif needed:
            raise TraceError(f"{where} has no {name} though settings.{knob} is on")
    if "layer_rms" in raw and not layers:
        raise TraceError(f"{where} has layer_rms though settings.layers is off")
    if layers and "layer_rms" not in raw:
        raise TraceError(f"{where} has no layer_rms though settings.layers records {layers} layer(s)")
    if layers:
        parts["layer_rms"] = _float_rows(raw["layer_rms"], f"{where}.layer_rms", layers, canvas, STEP_DTYPES["layer_rms"])
    return dataclasses.replace(step, **parts) if parts else step


def _parse_batch(raw) -> dict | None:
    """The batch a run shared ({"size", "row"}), or None for a run generated alone."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TraceError('"batch" must be an object {"size": int, "row": int} or null')
    _no_unknown(raw, {"size", "row"}, "batch")
    size, row = _get(raw, "size", int, "batch"), _get(raw, "row", int, "batch")
    if not 1 <= size <= MAX_BATCH:
        raise TraceError(f"batch.size must be from 1 to {MAX_BATCH} (got {size})")
    if not 0 <= row < size:
        raise TraceError(f"batch.row must be from 0 to {size - 1} (got {row})")
    return {"size": size, "row": row}


def _parse_sampler_rule(raw, sampler: str | None) -> dict:
    """The recorded accept rule (an older file's was derived by `trace_upgrade`); a sampler without one is refused."""
    if raw is None:
        raise TraceError(
            f"this trace's sampler {sampler or SAMPLER_ENTROPY_BOUND!r} did not record its accept rule (sampler_rule), "
            "so its frames cannot be read"
        )
    try:
        return AcceptRule.from_dict(raw).to_dict()
    except ValueError as exc:
        raise TraceError(str(exc)) from None


@functools.cache
def _model_kinds() -> dict[str, tuple[type, bool]]:
    """{field: (its JSON type, whether a file may leave it out)} of ModelInfo, read from its declaration
    (a tuple is a JSON list); pad_token_id, an int or null, is checked on its own."""
    hints = typing.get_type_hints(ModelInfo)
    return {
        f.name: (list if typing.get_origin(hints[f.name]) is tuple else hints[f.name], f.default is not MISSING)
        for f in fields(ModelInfo)
        if f.name != "pad_token_id"
    }


def _parse_model(raw: dict) -> ModelInfo:
    _no_unknown(raw, {f.name for f in fields(ModelInfo)}, "model")
    values = {}
    for name, (kind, optional) in _model_kinds().items():
        if optional and name not in raw:
            continue
        values[name] = _get(raw, name, kind, "model")
    pad = raw.get("pad_token_id")
    if pad is not None and not is_int(pad):
        raise TraceError("model.pad_token_id must be an integer or null")
    if not 1 <= values["canvas_length"] <= MAX_CANVAS_LENGTH:
        raise TraceError(f"model.canvas_length must be from 1 to {MAX_CANVAS_LENGTH}")
    if not 1 <= values["vocab_size"] <= MAX_VOCAB_SIZE:
        raise TraceError(f"model.vocab_size must be from 1 to {MAX_VOCAB_SIZE}")
    eos = values["eos_token_ids"]
    if len(eos) > 64 or not all(is_int(t) and 0 <= t < values["vocab_size"] for t in eos):
        raise TraceError("model.eos_token_ids must be token ids inside the vocabulary")
    if pad is not None and not 0 <= pad < values["vocab_size"]:
        raise TraceError("model.pad_token_id must be inside the vocabulary")
    if not 0 <= values.get("layers", 0) <= 1024:
        raise TraceError("model.layers must be from 0 to 1024")
    values["eos_token_ids"] = tuple(eos)
    return ModelInfo(pad_token_id=pad, **values)


def _written_fields(record: type) -> tuple[set[str], set[str]]:
    """The (required, optional) fields a record type is written with: optional ones default to None;
    `new_pieces` (compare=False) goes into the trace's pieces instead."""
    written = [f for f in fields(record) if f.compare]
    return {f.name for f in written if f.default is MISSING}, {f.name for f in written if f.default is None}


STEP_FIELDS, OPTIONAL_STEP_FIELDS = _written_fields(StepRecord)
BLOCK_FIELDS = set.union(*_written_fields(BlockRecord))
END_FIELDS = set.union(*_written_fields(RunEnd))
_START_DTYPES, _END_DTYPES = array_dtypes(RunStart), array_dtypes(RunEnd)


def _parse_step(raw, i: int, canvas: int, vocab: int, max_blocks: int, topk: int) -> StepRecord:
    where = f"steps[{i}]"
    if not isinstance(raw, dict):
        raise TraceError(f"{where} must be an object")
    _no_unknown(raw, STEP_FIELDS | OPTIONAL_STEP_FIELDS, where)
    block = _get(raw, "block", int, where)
    if not 0 <= block < max_blocks:
        raise TraceError(f"{where}.block {block} is outside 0..{max_blocks - 1}")
    step = _get(raw, "step", int, where)
    remaining = _get(raw, "steps_remaining", int, where)
    if step < 0 or remaining < 1:
        raise TraceError(f"{where}: step must be >= 0 and steps_remaining >= 1")
    accepted = _get(raw, "accepted", list, where)
    if len(accepted) != canvas or not all(a in (0, 1) and not isinstance(a, float) for a in accepted):
        raise TraceError(f"{where}.accepted must be {canvas} values of 0 or 1")
    entropy = _get(raw, "entropy_nats", list, where)
    if len(entropy) != canvas or not all(_is_number(e) for e in entropy):
        raise TraceError(f"{where}.entropy_nats must be {canvas} numbers")
    entropy_array = frozen_array(entropy, STEP_DTYPES["entropy_nats"])
    if not np.all(np.isfinite(entropy_array)) or entropy_array.min() < -1e-3 or entropy_array.max() > math.log(vocab) + 1e-3:
        raise TraceError(f"{where}.entropy_nats must lie between 0 and ln(vocab) = {math.log(vocab):.3f} nats")
    wall = _get(raw, "wall_time_s", (int, float), where)
    if not (_is_number(wall) and math.isfinite(wall) and wall >= 0):
        raise TraceError(f"{where}.wall_time_s must be a non-negative number")
    return StepRecord(
        block=block,
        step=step,
        steps_remaining=remaining,
        accepted=frozen_array(accepted, STEP_DTYPES["accepted"]),
        canvas=_id_array(_get(raw, "canvas", list, where), vocab, f"{where}.canvas", STEP_DTYPES["canvas"], exact_len=canvas),
        argmax=_id_array(_get(raw, "argmax", list, where), vocab, f"{where}.argmax", STEP_DTYPES["argmax"], exact_len=canvas),
        entropy_nats=entropy_array,
        wall_time_s=float(wall),
        **_parse_candidates(raw, where, canvas, vocab, topk),
        sample_probability=_parse_probabilities(raw, where, canvas),
    )


def _parse_candidates(raw: dict, where: str, canvas: int, vocab: int, topk: int) -> dict:
    """topk_ids and topk_probs: both present, (canvas, k) with k = settings.record_topk, or both absent."""
    present = [name for name in ("topk_ids", "topk_probs") if name in raw]
    if not present:
        if topk:
            raise TraceError(f"{where} has no topk_ids though settings.record_topk is {topk}")
        return {}
    if len(present) == 1 or not topk:
        raise TraceError(f"{where}: topk_ids and topk_probs come together, when settings.record_topk > 0")
    ids, probs = _get(raw, "topk_ids", list, where), _get(raw, "topk_probs", list, where)
    for name, rows in (("topk_ids", ids), ("topk_probs", probs)):
        if len(rows) != canvas or not all(isinstance(row, list) and len(row) == topk for row in rows):
            raise TraceError(f"{where}.{name} must be {canvas} lists of {topk} values")
    flat_ids = [v for row in ids for v in row]
    if not all(is_int(v) and 0 <= v < vocab for v in flat_ids):
        raise TraceError(f"{where}.topk_ids must hold token ids from 0 to {vocab - 1}")
    flat_probs = [v for row in probs for v in row]
    if not all(_is_number(v) for v in flat_probs):
        raise TraceError(f"{where}.topk_probs must hold numbers")
    prob_array = frozen_matrix(flat_probs, STEP_DTYPES["topk_probs"], topk)
    if not np.all(np.isfinite(prob_array)) or prob_array.min() < 0 or prob_array.max() > 1:
        raise TraceError(f"{where}.topk_probs must be probabilities from 0 to 1")
    return {"topk_ids": frozen_matrix(flat_ids, STEP_DTYPES["topk_ids"], topk), "topk_probs": prob_array}


def _parse_probabilities(raw: dict, where: str, canvas: int):
    if "sample_probability" not in raw:
        return None
    values = _get(raw, "sample_probability", list, where)
    if len(values) != canvas or not all(_is_number(v) for v in values):
        raise TraceError(f"{where}.sample_probability must be {canvas} numbers")
    array = frozen_array(values, STEP_DTYPES["sample_probability"])
    if not np.all(np.isfinite(array)) or array.min() < 0 or array.max() > 1:
        raise TraceError(f"{where}.sample_probability must be probabilities from 0 to 1")
    return array


def _parse_lens(raw: dict, where: str, steps_used: int, layers: int, canvas: int, vocab: int) -> dict:
    """A block's logit lens: the three (steps_used, layers, canvas) arrays together, with settings.layers."""
    present = [name for name in LENS_FIELDS if name in raw]
    if not present:
        if layers and steps_used:
            raise TraceError(f"{where} has no lens_ranks though settings.layers records {layers} layer(s)")
        return {}
    if not layers:
        raise TraceError(f"{where} has {present[0]} though settings.layers is off")
    if len(present) < len(LENS_FIELDS):
        raise TraceError(f"{where}: lens_top_ids, lens_top_probs and lens_ranks come together")
    parts = {}
    for name in LENS_FIELDS:
        cube = raw[name]
        shape_ok = isinstance(cube, list) and len(cube) == steps_used and all(
            isinstance(s, list) and len(s) == layers and all(isinstance(r, list) and len(r) == canvas for r in s)
            for s in cube
        )
        if not shape_ok:
            raise TraceError(f"{where}.{name} must be {steps_used} steps of {layers} lists of {canvas} values")
        flat = [v for s in cube for r in s for v in r]
        if name == "lens_top_probs":
            if not all(_is_number(v) for v in flat):
                raise TraceError(f"{where}.lens_top_probs must hold numbers")
            parts[name] = frozen_cube(flat, LENS_DTYPES[name], (layers, canvas))
            if parts[name].size and not (np.all(np.isfinite(parts[name])) and 0 <= parts[name].min() <= parts[name].max() <= 1):
                raise TraceError(f"{where}.lens_top_probs must be probabilities from 0 to 1")
        else:  # a token id, or a rank among the vocabulary's ids
            if not all(is_int(v) and 0 <= v < vocab for v in flat):
                raise TraceError(f"{where}.{name} must hold values from 0 to {vocab - 1}")
            parts[name] = frozen_cube(flat, LENS_DTYPES[name], (layers, canvas))
    return parts


def _parse_block(raw, i: int, canvas: int, vocab: int, model: ModelInfo, layers: int = 0) -> BlockRecord:
    where = f"blocks[{i}]"
    if not isinstance(raw, dict):
        raise TraceError(f"{where} must be an object")
    _no_unknown(raw, BLOCK_FIELDS, where)
    tokens = _id_array(_get(raw, "tokens", list, where), vocab, f"{where}.tokens", BLOCK_DTYPES["tokens"], exact_len=canvas)
    eos = raw.get("eos_position")
    if eos is not None and not (is_int(eos) and 0 <= eos < canvas):
        raise TraceError(f"{where}.eos_position must be null or a position in 0..{canvas - 1}")
    is_eos = np.isin(tokens, model.eos_token_ids)
    first = int(np.argmax(is_eos)) if is_eos.any() else None
    if eos != first:
        raise TraceError(f"{where}.eos_position is {eos} but the first EOS token in its tokens is at {first}")
    if eos is not None and model.pad_token_id is not None and np.any(tokens[eos + 1 :] != model.pad_token_id):
        raise TraceError(f"{where}: tokens after the EOS must be pad ({model.pad_token_id})")
    reason = _get(raw, "stop_reason", str, where)
    if reason not in BLOCK_STOP_REASONS:
        raise TraceError(f"{where}.stop_reason must be one of {', '.join(BLOCK_STOP_REASONS)}")
    steps_used = _get(raw, "steps_used", int, where)
    return BlockRecord(
        block=_get(raw, "block", int, where),
        tokens=tokens,
        eos_position=eos,
        stop_reason=reason,
        steps_used=steps_used,
        **(_parse_lens(raw, where, steps_used, layers, canvas, vocab) if 0 <= steps_used <= MAX_STEPS else {}),
    )


def _parse_end(raw, vocab: int) -> RunEnd:
    if not isinstance(raw, dict):
        raise TraceError("end must be an object or null")
    _no_unknown(raw, END_FIELDS, "end")
    reason = _get(raw, "finish_reason", str, "end")
    if reason not in FINISH_REASONS:
        raise TraceError(f"end.finish_reason must be one of {', '.join(FINISH_REASONS)}")
    error = raw.get("error")
    if error is not None and not isinstance(error, str):
        raise TraceError("end.error must be a string or null")
    text = _get(raw, "text", str, "end")
    if len(text) > MAX_TEXT_CHARS:
        raise TraceError("end.text is too long")
    wall = _get(raw, "wall_time_s", (int, float), "end")
    if not (_is_number(wall) and math.isfinite(wall) and wall >= 0):
        raise TraceError("end.wall_time_s must be a non-negative number")
    sequence = _id_array(_get(raw, "sequence", list, "end"), vocab, "end.sequence", _END_DTYPES["sequence"], max_len=MAX_BLOCKS * MAX_CANVAS_LENGTH)
    return RunEnd(finish_reason=reason, sequence=sequence, text=text, wall_time_s=float(wall), error=error)


def _check_order(trace: TraceParts) -> None:
    """Records must be in the order a backend yields them."""
    expected_block, expected_step, last_remaining = 0, 0, None
    for i, s in enumerate(trace.steps):
        if s.block != expected_block:
            if s.block == expected_block + 1 and expected_step > 0:
                expected_block, expected_step, last_remaining = s.block, 0, None
            else:
                raise TraceError(f"steps[{i}] is block {s.block}, step {s.step}; expected block {expected_block}")
        if s.step != expected_step:
            raise TraceError(f"steps[{i}] is step {s.step} of block {s.block}; expected step {expected_step}")
        if last_remaining is not None and s.steps_remaining != last_remaining - 1:
            raise TraceError(f"steps[{i}].steps_remaining must count down by one")
        expected_step, last_remaining = expected_step + 1, s.steps_remaining
    counts = {}
    for s in trace.steps:
        counts[s.block] = counts.get(s.block, 0) + 1
    for i, b in enumerate(trace.blocks):
        if b.block != i:
            raise TraceError(f"blocks[{i}] says block {b.block}; blocks must come in order from 0")
        if b.steps_used != counts.get(i, 0):
            raise TraceError(f"blocks[{i}].steps_used is {b.steps_used} but {counts.get(i, 0)} steps were recorded")
    started = max(counts) + 1 if counts else 0
    if started > len(trace.blocks) + 1:
        raise TraceError(f"steps reach block {started - 1} but only {len(trace.blocks)} block(s) were committed")
    if trace.end is not None and trace.end.finish_reason in ("eos", "length"):
        if started != len(trace.blocks):
            raise TraceError("a finished run must commit every block it started")
        joined = np.concatenate([b.tokens for b in trace.blocks]) if trace.blocks else np.zeros(0, np.int32)
        if not np.array_equal(joined, trace.end.sequence):
            raise TraceError("end.sequence must equal the committed tokens of all blocks in order")


# ---- small parsing helpers ----------------------------------------------------------------
def _is_number(v) -> bool:
    """An int or float that converts to a float (a JSON integer of hundreds of digits does not)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        float(v)
    except OverflowError:
        return False
    return True


def _get(obj: dict, key: str, kind, where: str):
    if key not in obj:
        raise TraceError(f"{where} is missing {key!r}")
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        names = " or ".join(k.__name__ for k in kinds)
        raise TraceError(f"{where}.{key} must be {names}, not {type(value).__name__}")
    return value


def _no_unknown(obj: dict, known: set, where: str) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        raise TraceError(f"{where} has unknown field(s): {', '.join(map(str, unknown[:5]))}")


def _id_array(values: list, vocab: int, where: str, dtype, exact_len: int | None = None, max_len: int | None = None):
    if exact_len is not None and len(values) != exact_len:
        raise TraceError(f"{where} must hold {exact_len} token ids (got {len(values)})")
    if max_len is not None and len(values) > max_len:
        raise TraceError(f"{where} holds more than {max_len} ids")
    if not all(is_int(v) and 0 <= v < vocab for v in values):
        raise TraceError(f"{where} must hold token ids from 0 to {vocab - 1}")
    return frozen_array(values, dtype)
