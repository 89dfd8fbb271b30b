"""The knobs of one generation, shared by the app, the CLI and every backend.

`GenerationSettings` holds what the user asked for; a field left at None means "the
checkpoint's generation config decides".  A backend resolves the Nones and records the values
it really used in `RunStart.settings`, so a trace always says exactly how it was made.

Each field declares its knob in place (`knob(...)`, `visualizer.knobs`): its range, label, one-line
help, CLI flag, widget and any hosted cap, and for a structured knob (pins, layers) its `Form`: its
text's grammar, its check and the refusal of a backend without it.  The CLI's flags, the app's widgets
and API parameters, hosted mode's caps, the validation below and docs/running.md's knob table are all
made from `KNOBS`; which knobs a run reads is its backend's (`backends.base.Capabilities`: the
backend's own, and each sampler's).  Adding a knob: a field here and the code that reads it.

    settings = GenerationSettings(max_new_tokens=128, seed=0)
    problems = settings.problems(max_context=4096, prompt_tokens=40)   # [] when valid
    settings = GenerationSettings.from_dict({"seed": 3})                # unknown keys raise
    KNOBS["pins"].form.parse("11=moon")                                 # ((11, "moon"),)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .knobs import Form, Knob, first_problem, frozen_data, is_int, is_number, knob, knob_table, plain_data
from .records import ModelInfo
from .samplers import (  # noqa: F401  (SAMPLER_CONFIDENCE_THRESHOLD re-exported)
    SAMPLER_BLOCK_REFINEMENT,
    SAMPLER_CONFIDENCE_THRESHOLD,
    SAMPLER_DISCRETE_DDIM,
    SAMPLER_ENTROPY_BOUND,
    is_sampler_name,
)

__all__ = ["GenerationSettings", "KNOBS", "Knob", "Form", "with_defaults"]

# The checkpoint's defaults (google/diffusiongemma-26B-A4B-it, transformers 5.x): used when a
# model's generation config leaves a knob unset.
DEFAULT_MAX_NEW_TOKENS = 256
DEFAULT_MAX_DENOISING_STEPS = 48
DEFAULT_ENTROPY_BOUND = 0.1
DEFAULT_T_MIN = 0.4
DEFAULT_T_MAX = 0.8

# The set of samplers is open: each backend declares the ones it runs (`backends.base.Capabilities`)
# and refuses any other; a trace records its sampler's accept rule (`visualizer.samplers`).
# mlx-vlm 0.7.10's DEFAULT_DIFFUSION_CONFIDENCE_THRESHOLD, which its engine always uses (not a knob);
# tests/test_mlx_backend.py checks the two agree.
CONFIDENCE_THRESHOLD = 0.9

# Upper limits that keep a typo from tying up the model for an hour; far above real use.
MAX_NEW_TOKENS_LIMIT = 8192
MAX_DENOISING_STEPS_LIMIT = 1024
MAX_SEED = 2**32 - 1
DEFAULT_RECORD_TOPK = 5  # candidates recorded per position and step (the alternatives view)
MAX_RECORD_TOPK = 32
MAX_CORRECTOR_STEPS = 16  # discrete-ddim: more sweeps than this leave almost no predictor steps
LAYERS_ALL = "all"  # `layers`: every decoder layer of the model
MAX_LAYERS = 1024  # far above any DiffusionGemma (the 26B model has 30)
MAX_PINS = 4096  # pins per run (a canvas has at most this many positions in a trace)


# Measured, not assumed (BENCHMARKS.md): a compiled run with layers tapped is not bit-identical to the compiled run
# without them in bf16 (the real shape on an H100; the built-in model in bf16 on a CPU moved 9 of 256 tokens;
# float32 moves none). Inductor keeps a fused kernel's intermediates in float32 (`emulate_precision_casts` is off by
# default); a tapped layer's output leaves the graph, so it is rounded to bf16 and stored there, and the kernels
# after it fuse otherwise. Hooks that keep nothing leave the numbers alone, and so does the eager path.
COMPILED_LAYERS_NOTE = (
    "compiled with --layers, the tapped layers' outputs leave the compiled graph and Inductor rounds them to bf16 "
    "there, so the tokens can differ from a compiled run without --layers; an eager run with layers is "
    "bit-identical to stock"
)


# ---- the structured knobs' grammars: POS=TEXT pins, layer lists -----------------------------------
def parse_position_texts(text, what: str) -> tuple:
    """Lines `POS=TEXT` (blank lines skipped) as ((POS, TEXT), ...); ValueError in one line naming `what` when a
    line is not one. TEXT is kept as typed (a leading space is a different token). The grammar of pins, and of
    the position-and-text interventions to come (issue 55: set, forbid)."""
    pairs = []
    for line in str(text or "").splitlines():
        if not line.strip():
            continue
        position, sep, piece = line.partition("=")
        if not sep or not position.strip().lstrip("-").isdigit():
            raise ValueError(f"each {what} is a line POS=TEXT, a canvas position and the text (got {line[:40]!r})")
        pairs.append((int(position), piece))
    return tuple(pairs)


def format_position_texts(pairs) -> str:
    return "\n".join(f"{position}={text}" for position, text in pairs or ())


def pin_problems(pins) -> list[str]:
    """What is wrong with `pins` as given ((position, text), ...), before any tokenizer sees it; [] when fine.
    Positions inside the canvas and tokens that fit are checked by the backend, which knows both."""
    if pins is None:  # a run whose backend does not read pins records None
        return []
    # in words, never a tuple's text: a visitor typed lines POS=TEXT, a trace holds [position, text] pairs
    if not isinstance(pins, tuple):
        return ["pins must be a list of pins, each a canvas position and the text to place there"]
    if len(pins) > MAX_PINS:
        return [f"a run takes at most {MAX_PINS} pins ({len(pins)} were given)"]
    for pin in pins:
        if not (isinstance(pin, tuple) and len(pin) == 2 and is_int(pin[0]) and isinstance(pin[1], str)):
            return ["each pin must be a canvas position (a whole number) and the text to place there"]
        if pin[0] < 0:
            return [f"pin position {pin[0]} is outside the canvas: positions count from 0"]
        if not pin[1]:
            return [f"the pin at position {pin[0]} has an empty text: give the text to place there"]
    return []


def parse_layers(text) -> tuple | str | None:
    """"0,9,19,29", "all" (any case), or empty (None: off); ValueError in one line when it is none of these.
    The check tests the numbers (distinct, from 0), the backend the model's depth."""
    text = str(text or "").strip()
    if not text:
        return None
    if text.lower() == LAYERS_ALL:
        return LAYERS_ALL
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"layers takes layer numbers separated by commas, such as 0,9,19,29, or {LAYERS_ALL!r} "
                         f"(got {text[:40]!r})") from None


def layer_problems(layers) -> list[str]:
    """What is wrong with `layers` ((layer, ...), "all" or None) before the model is known; [] when fine."""
    if layers is None or layers == LAYERS_ALL:
        return []
    # in words, never a tuple's text ("got (-1,)"): the one layer number that is wrong, and why
    if not (isinstance(layers, tuple) and layers and all(is_int(i) for i in layers)):
        return [f"layers must be layer numbers separated by commas, such as 0,9,19,29, or {LAYERS_ALL!r}"]
    outside = next((i for i in layers if not 0 <= i < MAX_LAYERS), None)
    if outside is not None:
        return [f"layer {outside} does not exist: " + ("layers are counted from 0" if outside < 0 else f"no model here has {MAX_LAYERS} layers")]
    twice = next((i for i in layers if layers.count(i) > 1), None)
    if twice is not None:
        return [f"layer {twice} is asked for twice: give each layer once"]
    return []


def _layers_past(layers, info: ModelInfo) -> str | None:
    if layers and layers != LAYERS_ALL and max(layers) >= info.layers:
        return f"layer {max(layers)} does not exist: this model's decoder has layers 0 to {info.layers - 1}"
    return None


PINS = Form(
    parse=lambda text: parse_position_texts(text, "pin"), check=lambda v: first_problem(pin_problems(v)),
    format=format_position_texts, metavar="POS=TEXT", verb="pin tokens", repeat=True,
    hint="e.g. 11=moon, one a line; or click a token below", lines=2,
)
LAYERS = Form(
    parse=parse_layers, check=lambda v: first_problem(layer_problems(v)),
    format=lambda v: "" if v is None else v if isinstance(v, str) else ",".join(map(str, v)),
    metavar="0,9,19,29|all", verb="record layers", hint="e.g. 0,1 or all; empty: off",
    model_problem=_layers_past, for_model=lambda v, info: tuple(range(info.layers)) if v == LAYERS_ALL else v,
)


# ---- the settings: one field and its knob each -----------------------------------------------------
@dataclass(frozen=True)
class GenerationSettings:
    # Not every backend reads every knob: each declares the ones it reads (`Capabilities`: its own and each
    # sampler's) and records the others as None, so a trace never claims a knob that did nothing.
    max_new_tokens: int | None = knob(  # the output budget; the model rounds it up to whole blocks
        None, "max new tokens", "output budget; rounded up to whole 256-token blocks",
        low=1, high=MAX_NEW_TOKENS_LIMIT, shown_default=DEFAULT_MAX_NEW_TOKENS, every_backend=True,
        slider=(1, 2048, 1), hosted_cap=("DV_MAX_NEW_TOKENS", 1024))
    max_denoising_steps: int | None = knob(  # the step budget per block (48 for the real checkpoint)
        None, "max denoising steps",
        "step budget per block; a block stops early when its argmax is stable and its mean entropy is below 0.005 nats",
        low=1, high=MAX_DENOISING_STEPS_LIMIT, shown_default=DEFAULT_MAX_DENOISING_STEPS, every_backend=True,
        flag="--steps", slider=(1, 256, 1), hosted_cap=("DV_MAX_STEPS", 64))
    entropy_bound: float | None = knob(  # the entropy-bound sampler's summed entropy accepted per step
        None, "entropy bound",
        "each step accepts the lowest-entropy positions while their summed entropy, minus the largest, stays within this many nats",
        low=0, high=1000, above_low=True, unit="nats", shown_default=DEFAULT_ENTROPY_BOUND)
    t_min: float | None = knob(  # the temperature at the last step of the linear schedule
        None, "t_min", "the temperature schedule's last step (linear from t_max at the first step)",
        low=0, high=100, shown_default=DEFAULT_T_MIN)
    t_max: float | None = knob(  # the temperature at the first step
        None, "t_max", "the temperature schedule's first step", low=0, high=100, shown_default=DEFAULT_T_MAX)
    seed: int = knob(  # every random draw of the run, canvas initialisation included
        0, "seed", "seeds every random draw of the run, canvas initialisation included",
        low=0, high=MAX_SEED, every_backend=True)
    sampler: str | None = knob(  # one of the backend's declared samplers; None: its default
        None, "sampler", "how a step decides what it accepts; the model's samplers, each with its note",
        shown_default=SAMPLER_ENTROPY_BOUND, text_check=is_sampler_name)
    temperature: float | None = knob(  # sampling temperature (MLX: mlx-vlm has no t schedule)
        None, "temperature", "sampling temperature: 0 takes the argmax",
        low=0, high=100, shown_default=1.0, slider=(0, 2, 0.05))
    compiled: bool = knob(  # static cache + torch.compile on transformers (results differ from eager)
        False, "compiled", "static cache + torch.compile (CUDA graphs): faster after a first compile; "
        "results differ from eager", in_app=False)
    record_topk: int = knob(  # the k most probable candidates recorded per position and step; 0: off
        DEFAULT_RECORD_TOPK, "record top-k",
        "candidates recorded per position and step (the token inspector); 0: none. Changes nothing the model does",
        low=0, high=MAX_RECORD_TOPK, every_backend=True, flag="--topk", slider=(0, MAX_RECORD_TOPK, 1))
    thinking: bool = knob(  # the chat template with enable_thinking (Gemma 4's thinking channel)
        False, "thinking channel",
        "renders the chat template with enable_thinking (Gemma 4's thinking channel), where the template has it",
        every_backend=True)
    # diffusers' schedulers (backends/diffusers_backend.py); None: the scheduler's own default.
    corrector_steps: int | None = knob(  # discrete-ddim: taken out of the step budget, not added to it
        None, "corrector steps",
        "Gibbs corrector sweeps per early step, taken out of the step budget (0: plain ancestral DDIM)",
        low=0, high=MAX_CORRECTOR_STEPS, shown_default=0, slider=(0, MAX_CORRECTOR_STEPS, 1))
    corrector_k: int | None = knob(  # discrete-ddim (default 1)
        None, "corrector k", "positions resampled per corrector sweep", low=1, high=4096, shown_default=1)
    refine_threshold: float | None = knob(  # block-refinement (default 0.95)
        None, "refine threshold", "a sample this probable commits at once, beyond the step's even share of the block",
        low=0, high=1, above_low=True, shown_default=0.95)
    editing_threshold: float | None = knob(  # block-refinement; None: never (the default)
        None, "editing threshold", "a committed token is replaced by a different sample this probable; empty: never",
        low=0, high=1, above_low=True)
    # Inside the network and a hand on the canvas (docs/layers-and-pins.md); a backend without them refuses them.
    pins: tuple = knob(  # ((position, text), ...): text tokenized onto consecutive positions of the first block's
        #                  canvas before its first step; (): the stock run, unchanged
        (), "pins", "tokens placed on the first canvas before the first step and kept accepted at every step "
        "(POS=TEXT, positions from 0; in the app one a line); the metrics leave pinned positions out",
        flag="--pin", form=PINS, hosted_cap=("DV_MAX_PINS", 8))
    layers: tuple | str | None = knob(  # (0, 9, 19, 29), "all" (resolved to every layer), None: off (the default)
        None, "layers", "decoder layers recorded every step: RMS of the output and the logit lens "
        "(0,9,19,29 or all; empty: off)", form=LAYERS, hosted_cap=("DV_MAX_LAYERS", 4))
    record_shift: bool = knob(  # keeps one step's float32 distribution per row on the device: 256 MiB at the real shape
        True, "record shift", "records the KL of each position's distribution from the previous step's "
        "(keeps one step's float32 distribution per row on the device)", flag="--no-shift", in_app=False)
    kl_to_final: bool = knob(  # exact: a second, bit-identical pass; keeps each block's final distribution per row on the device
        False, "record distance to final", "records each position's KL(p_final ‖ p_t) at every step, exactly, from a "
        "second bit-identical pass of the run (twice the time; keeps each block's final distribution per row on the "
        "device)", refused_unread="record the KL to the final step", kept_when_off=False, hosted_cap=("DV_KL_TO_FINAL", 0))

    def __post_init__(self):
        # A trace's JSON gives lists; the settings keep tuples, so a loaded run equals the live one.
        for name in STRUCTURED:
            object.__setattr__(self, name, frozen_data(getattr(self, name)))

    @classmethod
    def from_dict(cls, values: dict) -> "GenerationSettings":
        """Build from a dict (CLI, trace, app); unknown keys are an error, never ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**values)

    def to_dict(self) -> dict:
        """Plain JSON data: the structured knobs as lists, as a trace holds them (so a loaded run equals the live one)."""
        values = dataclasses.asdict(self) | {name: plain_data(getattr(self, name)) for name in STRUCTURED}
        return {name: value for name, value in values.items() if value or KNOBS[name].kept_when_off}

    def replace(self, **changes) -> "GenerationSettings":
        return dataclasses.replace(self, **changes)

    def notes(self) -> list[str]:
        """What these settings do that the user should know before the run (said, never refused)."""
        return [COMPILED_LAYERS_NOTE] if self.compiled and self.layers else []

    def problems(
        self, *, max_context: int | None = None, prompt_tokens: int | None = None, canvas_length: int | None = None
    ) -> list[str]:
        """Human-readable reasons these settings cannot run; empty when they can.

        Each knob is checked against its declaration (`KNOBS`); with `max_context` and
        `prompt_tokens` it also checks that the prompt plus the output fits the model; the
        output is whole canvases, so the budget is rounded up to them.
        """
        out = [problem for knob in KNOBS.values() if (problem := knob.problem(getattr(self, knob.name)))]
        if is_number(self.t_min) and is_number(self.t_max) and self.t_max <= self.t_min:
            out.append(f"t_max must be larger than t_min (got t_min={self.t_min}, t_max={self.t_max})")
        if max_context is not None and prompt_tokens is not None:
            budget = self.max_new_tokens or DEFAULT_MAX_NEW_TOKENS
            if canvas_length and is_int(budget):
                budget = -(-budget // canvas_length) * canvas_length
            if prompt_tokens >= max_context:
                out.append(
                    f"the prompt is {prompt_tokens} tokens long; this model's context is {max_context} tokens"
                )
            elif is_int(budget) and prompt_tokens + budget > max_context:
                out.append(
                    f"prompt ({prompt_tokens} tokens) + output ({budget} tokens in whole blocks) exceeds this "
                    f"model's context of {max_context} tokens; lower max new tokens or shorten the prompt"
                )
        return out


KNOBS: dict[str, Knob] = knob_table(GenerationSettings)
STRUCTURED = tuple(name for name, k in KNOBS.items() if k.form is not None)  # pins, layers


def with_defaults(**configured) -> dict:
    """The knobs a checkpoint's generation config gives, each left unset (None) replaced by the knob's
    default: transformers' own rule (save_pretrained writes null for every knob a model leaves unset)."""
    return {name: KNOBS[name].default if value is None else value for name, value in configured.items()}
