"""The knobs of one generation, shared by the app, the CLI and every backend.

`GenerationSettings` holds what the user asked for; a field left at None means "the
checkpoint's generation config decides".  A backend resolves the Nones and records the values
it really used in `RunStart.settings`, so a trace always says exactly how it was made.

`KNOBS` declares each field once more, for everything that is not the value itself: its range,
label, one-line help, which samplers read it, its CLI flag, its widget and any hosted cap.  The
CLI's flags, the app's widgets and API parameters, hosted mode's caps, the validation below and
docs/running.md's knob table are all made from it (tests/test_knobs.py holds every field to a
declaration).  Adding a knob: a field here, its `Knob` below, and the code that reads it.

    settings = GenerationSettings(max_new_tokens=128, seed=0)
    problems = settings.problems(max_context=4096, prompt_tokens=40)   # [] when valid
    settings = GenerationSettings.from_dict({"seed": 3})                # unknown keys raise
    KNOBS["refine_threshold"].read_by("block-refinement")              # True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from .samplers import (  # noqa: F401  (SAMPLER_CONFIDENCE_THRESHOLD re-exported)
    SAMPLER_BLOCK_REFINEMENT,
    SAMPLER_CONFIDENCE_THRESHOLD,
    SAMPLER_DISCRETE_DDIM,
    SAMPLER_ENTROPY_BOUND,
    is_sampler_name,
)

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


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int | None = None  # output budget in tokens; rounded up to whole blocks by the model
    max_denoising_steps: int | None = None  # step budget per block (48 for the real checkpoint)
    entropy_bound: float | None = None  # entropy-bound sampler: summed entropy accepted per step, nats
    t_min: float | None = None  # temperature at the last step of the linear schedule
    t_max: float | None = None  # temperature at the first step
    seed: int = 0  # seeds every random draw of the run, canvas initialisation included
    # Not every backend reads every knob: each declares the ones it reads (`Capabilities.knobs`) and
    # records the others as None, so a trace never claims a knob that did nothing.
    sampler: str | None = None  # one of the backend's declared samplers; None: its default
    temperature: float | None = None  # sampling temperature (MLX: mlx-vlm has no t schedule)
    compiled: bool = False  # static cache + torch.compile on transformers (results differ from eager)
    record_topk: int = DEFAULT_RECORD_TOPK  # record the k most probable candidates per position and step; 0: off
    thinking: bool = False  # render the chat template with enable_thinking (Gemma 4's thinking channel)
    # diffusers' schedulers (backends/diffusers_backend.py); None: the scheduler's own default.
    corrector_steps: int | None = None  # discrete-ddim: Gibbs corrector sweeps per early step, taken out of the
    #                                     step budget, not added to it (0: plain ancestral DDIM, the default)
    corrector_k: int | None = None  # discrete-ddim: positions resampled per corrector sweep (default 1)
    refine_threshold: float | None = None  # block-refinement: a sample this probable commits at once, beyond the
    #                                        step's even share of the block (default 0.95)
    editing_threshold: float | None = None  # block-refinement: a committed token is replaced by a different sample
    #                                         this probable; None: never (the default)
    # Inside the network and a hand on the canvas (docs/layers-and-pins.md). Declared by the backends that
    # read them (`Capabilities.knobs`); a backend without them refuses pins and layers in one line.
    pins: tuple = ()  # ((position, text), ...): text tokenized onto consecutive positions of the first block's
    #                   canvas before its first step and kept accepted at every step; (): the stock run, unchanged
    layers: tuple | str | None = None  # decoder layers whose output is recorded every step (RMS, logit lens):
    #                                    (0, 9, 19, 29), "all" (resolved to every layer), None: off (the default)
    record_shift: bool = True  # the KL of each position's distribution from the previous step's (keeps one
    #                            step's float32 distribution per row on the device: 256 MiB at the real shape)
    kl_to_final: bool = False  # the KL of each position's final distribution from each step's (exact: a second,
    #                            bit-identical pass; keeps each block's final distribution per row on the device)

    def __post_init__(self):
        # A trace's JSON gives lists; the settings keep tuples, so a loaded run equals the live one.
        if isinstance(self.pins, list):
            object.__setattr__(self, "pins", tuple(tuple(p) if isinstance(p, list) else p for p in self.pins))
        if isinstance(self.layers, list):
            object.__setattr__(self, "layers", tuple(self.layers))

    @classmethod
    def from_dict(cls, values: dict) -> "GenerationSettings":
        """Build from a dict (CLI, trace, app); unknown keys are an error, never ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        return cls(**values)

    def to_dict(self) -> dict:
        """Plain JSON data: the pins and layers as lists, as a trace holds them (so a loaded run equals the live one)."""
        values = dataclasses.asdict(self)
        values["pins"] = [list(pin) for pin in self.pins] if isinstance(self.pins, tuple) else self.pins
        values["layers"] = list(self.layers) if isinstance(self.layers, tuple) else self.layers
        if not self.kl_to_final:  # named only when on: a run without it writes the trace it always wrote
            del values["kl_to_final"]
        return values

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
        if _is_number(self.t_min) and _is_number(self.t_max) and self.t_max <= self.t_min:
            out.append(f"t_max must be larger than t_min (got t_min={self.t_min}, t_max={self.t_max})")
        if max_context is not None and prompt_tokens is not None:
            budget = self.max_new_tokens or DEFAULT_MAX_NEW_TOKENS
            if canvas_length and _is_int(budget):
                budget = -(-budget // canvas_length) * canvas_length
            if prompt_tokens >= max_context:
                out.append(
                    f"the prompt is {prompt_tokens} tokens long; this model's context is {max_context} tokens"
                )
            elif _is_int(budget) and prompt_tokens + budget > max_context:
                out.append(
                    f"prompt ({prompt_tokens} tokens) + output ({budget} tokens in whole blocks) exceeds this "
                    f"model's context of {max_context} tokens; lower max new tokens or shorten the prompt"
                )
        return out


def pin_problems(pins) -> list[str]:
    """What is wrong with `pins` as given ((position, text), ...), before any tokenizer sees it; [] when fine.
    Positions inside the canvas and tokens that fit are checked by the backend, which knows both."""
    if pins is None:
        return []
    if not isinstance(pins, tuple) or len(pins) > MAX_PINS:
        return [f"pins must be a list of (position, text) pairs, at most {MAX_PINS} (got {pins!r:.80})"]
    for pin in pins:
        if not (isinstance(pin, tuple) and len(pin) == 2 and isinstance(pin[0], int) and not isinstance(pin[0], bool)
                and isinstance(pin[1], str)):
            return [f"a pin is a (position, text) pair (got {pin!r:.80})"]
        if pin[0] < 0:
            return [f"pin position {pin[0]} is outside the canvas: positions count from 0"]
        if not pin[1]:
            return [f"the pin at position {pin[0]} has an empty text: give the text to place there"]
    return []


def pins_from_text(text) -> tuple:
    """The app's pins box, one `POS=TEXT` a line (blank lines skipped): ((POS, TEXT), ...); ValueError in one
    line when a line is not one. TEXT is kept as typed (a leading space is a different token); the knob's
    check and the backend test the rest (a position outside the canvas, an empty text, too many tokens)."""
    pins = []
    for line in str(text or "").splitlines():
        if not line.strip():
            continue
        position, sep, piece = line.partition("=")
        if not sep or not position.strip().lstrip("-").isdigit():
            raise ValueError(f"each pin is a line POS=TEXT, a canvas position and the text to place there (got {line[:40]!r})")
        pins.append((int(position), piece))
    return tuple(pins)


def layers_from_text(text) -> tuple | str | None:
    """The app's layers box: "0,9,19,29", "all", or empty (None: off); ValueError in one line when it is none of
    these. The knob's check tests the numbers (distinct, from 0), the backend the model's depth."""
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
    """What is wrong with `layers` ((layer, ...), "all" or None) before the model is known; [] when fine.
    Layers past the model's depth are checked by the backend, which knows it."""
    if layers is None or layers == LAYERS_ALL:
        return []
    if not (isinstance(layers, tuple) and layers and all(_is_int(i) and 0 <= i < MAX_LAYERS for i in layers)
            and len(set(layers)) == len(layers)):
        return [f"layers must be distinct layer numbers from 0, or {LAYERS_ALL!r} (got {layers!r})"]
    return []


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # rejects NaN


# ---- the knob table --------------------------------------------------------------------------
@dataclass(frozen=True)
class Knob:
    """Everything about one `GenerationSettings` field but its value. Its type and whether it may be
    None come from the field's annotation (`kind`, `optional`), so they are written once."""

    name: str  # the field; also the app's API parameter and, with dashes, the CLI flag (unless `flag`)
    label: str  # lower case, as in messages ("max new tokens"); the app's widget capitalizes it
    help: str  # one line: the CLI's --help, the widget's info, docs/running.md's table
    low: float | None = None  # the smallest value allowed (None: no check beyond the type)
    high: float | None = None  # the largest value allowed
    above_low: bool = False  # True: `low` itself is excluded (a bound of 0 nats accepts nothing)
    unit: str = ""  # said after the range in messages ("nats")
    text_check: Callable[[object], bool] | None = None  # a text knob's test of a value (the sampler's name)
    shown_default: object = None  # the value a run uses when the model's config has none (docs; the widget
    #                               before a model loads); None: the field's own default
    samplers: tuple[str, ...] | None = None  # the samplers that read it; None: every sampler
    every_backend: bool = False  # every backend reads it (`backends.base.COMMON_KNOBS`)
    flag: str | None = None  # the CLI flag where it is not --name-with-dashes (kept for old command lines)
    slider: tuple[float, float, float] | None = None  # the app shows (min, max, step) as a slider; None: a number box
    in_app: bool = True  # False: the app has no widget for it (compiled: ZeroGPU forbids torch.compile)
    hosted_cap: tuple[str, int] | None = None  # hosted mode caps it: (environment variable, default cap)
    # A structured knob (pins, layers) is tested by `check` instead of a range; it and `own_flag` knobs get no
    # generated CLI flag: the command that reads them parses its own (record's --pin, --layers, --no-shift).
    check: Callable[[object], str | None] | None = None
    own_flag: bool = False
    from_text: Callable[[str], object] | None = None  # a structured knob's app text box -> its value (ValueError: one line)

    @property
    def kind(self) -> type:
        """int, float, bool or str: from the field's annotation ("int | None" is int); object for a structured knob."""
        return {"int": int, "float": float, "bool": bool, "str": str}.get(_annotation(self.name).split(" | ")[0], object)

    @property
    def generated_flag(self) -> bool:
        """The CLI's flag for it comes from this table (not for structured or `own_flag` knobs)."""
        return self.check is None and not self.own_flag

    @property
    def optional(self) -> bool:
        """None is a value (the model decides)."""
        return _annotation(self.name).endswith("| None")

    @property
    def default(self):
        """The value a run uses when nobody sets it, as the docs and the widgets show it."""
        return self.shown_default if self.shown_default is not None else _FIELDS[self.name].default

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def count(self, value) -> float:
        """How many a structured knob's value asks for (layers, pins), as hosted mode caps it: its text box's
        text or its value; "all" layers is infinitely many; a value that does not parse counts 0 (the run's
        own check gives its message)."""
        if isinstance(value, str) and self.from_text is not None and value != LAYERS_ALL:
            try:
                value = self.from_text(value)
            except ValueError:
                return 0
        if value == LAYERS_ALL:
            return math.inf
        return len(value) if isinstance(value, (tuple, list)) else 0

    def read_by(self, sampler: str) -> bool:
        return self.samplers is None or sampler in self.samplers

    def problem(self, value) -> str | None:
        """One line when `value` is not a value of this knob; None when it is."""
        if self.check is not None:
            return self.check(value)
        if value is None and self.optional:
            return None
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{self.label} must be true or false (got {value!r})"
        if self.kind is str:
            fits = isinstance(value, str) and (self.text_check is None or self.text_check(value))
            return None if fits else f"{self.label} must be a name such as {self.default!r} (got {value!r})"
        whole = self.kind is int
        fits = _is_int(value) if whole else _is_number(value)
        if fits and self.low is not None:
            fits = value > self.low if self.above_low else value >= self.low
        if fits and self.high is not None:
            fits = value <= self.high
        return None if fits else f"{self.label} must be {self.range_text()} (got {value!r})"

    def range_text(self) -> str:
        """"a whole number from 1 to 8192", "a number above 0 and at most 1000 nats"."""
        what = "a whole number" if self.kind is int else "a number"
        low, high = _plain(self.low), _plain(self.high)
        unit = f" {self.unit}" if self.unit else ""
        if self.above_low:
            return f"{what} above {low} and at most {high}{unit}"
        return f"{what} from {low} to {high}{unit}"


def _plain(number) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


_FIELDS = {f.name: f for f in dataclasses.fields(GenerationSettings)}


def _annotation(name: str) -> str:
    return str(_FIELDS[name].type)


_SCHEDULE = (SAMPLER_ENTROPY_BOUND, SAMPLER_CONFIDENCE_THRESHOLD)  # the samplers with transformers' temperature schedule
KNOBS: dict[str, Knob] = {knob.name: knob for knob in (
    Knob("max_new_tokens", "max new tokens", "output budget; rounded up to whole 256-token blocks",
         low=1, high=MAX_NEW_TOKENS_LIMIT, shown_default=DEFAULT_MAX_NEW_TOKENS, every_backend=True,
         slider=(1, 2048, 1), hosted_cap=("DV_MAX_NEW_TOKENS", 1024)),
    Knob("max_denoising_steps", "max denoising steps",
         "step budget per block; a block stops early when its argmax is stable and its mean entropy is below 0.005 nats",
         low=1, high=MAX_DENOISING_STEPS_LIMIT, shown_default=DEFAULT_MAX_DENOISING_STEPS, every_backend=True,
         flag="--steps", slider=(1, 256, 1), hosted_cap=("DV_MAX_STEPS", 64)),
    Knob("entropy_bound", "entropy bound",
         "each step accepts the lowest-entropy positions while their summed entropy, minus the largest, stays within this many nats",
         low=0, high=1000, above_low=True, unit="nats", shown_default=DEFAULT_ENTROPY_BOUND, samplers=(SAMPLER_ENTROPY_BOUND,)),
    Knob("t_min", "t_min", "the temperature schedule's last step (linear from t_max at the first step)",
         low=0, high=100, shown_default=DEFAULT_T_MIN, samplers=_SCHEDULE),
    Knob("t_max", "t_max", "the temperature schedule's first step",
         low=0, high=100, shown_default=DEFAULT_T_MAX, samplers=_SCHEDULE),
    Knob("seed", "seed", "seeds every random draw of the run, canvas initialisation included",
         low=0, high=MAX_SEED, every_backend=True),
    Knob("sampler", "sampler", "how a step decides what it accepts; the model's samplers, each with its note",
         shown_default=SAMPLER_ENTROPY_BOUND, text_check=is_sampler_name),
    Knob("temperature", "temperature", "sampling temperature: 0 takes the argmax",
         low=0, high=100, shown_default=1.0, slider=(0, 2, 0.05)),
    Knob("compiled", "compiled", "static cache + torch.compile (CUDA graphs): faster after a first compile; "
         "results differ from eager", in_app=False),
    Knob("record_topk", "record top-k",
         "candidates recorded per position and step (the token inspector); 0: none. Changes nothing the model does",
         low=0, high=MAX_RECORD_TOPK, every_backend=True, flag="--topk", slider=(0, MAX_RECORD_TOPK, 1)),
    Knob("thinking", "thinking channel",
         "renders the chat template with enable_thinking (Gemma 4's thinking channel), where the template has it",
         every_backend=True),
    Knob("corrector_steps", "corrector steps",
         "Gibbs corrector sweeps per early step, taken out of the step budget (0: plain ancestral DDIM)",
         low=0, high=MAX_CORRECTOR_STEPS, shown_default=0, samplers=(SAMPLER_DISCRETE_DDIM,), slider=(0, MAX_CORRECTOR_STEPS, 1)),
    Knob("corrector_k", "corrector k", "positions resampled per corrector sweep",
         low=1, high=4096, shown_default=1, samplers=(SAMPLER_DISCRETE_DDIM,)),
    Knob("refine_threshold", "refine threshold",
         "a sample this probable commits at once, beyond the step's even share of the block",
         low=0, high=1, above_low=True, shown_default=0.95, samplers=(SAMPLER_BLOCK_REFINEMENT,)),
    Knob("editing_threshold", "editing threshold",
         "a committed token is replaced by a different sample this probable; empty: never",
         low=0, high=1, above_low=True, samplers=(SAMPLER_BLOCK_REFINEMENT,)),
    Knob("pins", "pins", "tokens placed on the first canvas before the first step and kept accepted at every step "
         "(record --pin POS=TEXT; in the app one POS=TEXT a line); the metrics leave pinned positions out",
         check=lambda v: _first(pin_problems(v)), from_text=pins_from_text, hosted_cap=("DV_MAX_PINS", 8)),
    Knob("layers", "layers", "decoder layers recorded every step: RMS of the output and the logit lens "
         "(record --layers 0,9,19,29 or all; empty: off)", check=lambda v: _first(layer_problems(v)),
         from_text=layers_from_text, hosted_cap=("DV_MAX_LAYERS", 4)),
    Knob("record_shift", "record shift", "record the KL of each position's distribution from the previous step's "
         "(--no-shift: off; keeps one step's float32 distribution per row on the device)", own_flag=True, in_app=False),
    Knob("kl_to_final", "record distance to final", "record each position's KL(p_final ‖ p_t) at every step, exactly, from a second "
         "bit-identical pass of the run (twice the time; keeps each block's final distribution per row on the device; "
         "the transformers backend)"),
)}


def _first(problems: list[str]) -> str | None:
    return problems[0] if problems else None


def with_defaults(**configured) -> dict:
    """The knobs a checkpoint's generation config gives, each left unset (None) replaced by the knob's
    default: transformers' own rule (save_pretrained writes null for every knob a model leaves unset)."""
    return {name: KNOBS[name].default if value is None else value for name, value in configured.items()}
