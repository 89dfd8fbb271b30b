"""The knobs of one generation, shared by the app, the CLI and every backend.

`GenerationSettings` holds what the user asked for; a field left at None means "the
checkpoint's generation config decides".  A backend resolves the Nones and records the values
it really used in `RunStart.settings`, so a trace always says exactly how it was made.

    settings = GenerationSettings(max_new_tokens=128, seed=0)
    problems = settings.problems(max_context=4096, prompt_tokens=40)   # [] when valid
    settings = GenerationSettings.from_dict({"seed": 3})                # unknown keys raise
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .samplers import SAMPLER_CONFIDENCE_THRESHOLD, SAMPLER_ENTROPY_BOUND, is_sampler_name  # noqa: F401  (re-exported)

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
MAX_CORRECTOR_STEPS = 16
LAYERS_ALL = "all"  # `layers`: every decoder layer of the model
MAX_LAYERS = 1024  # far above any DiffusionGemma (the 26B model has 30)
MAX_PINS = 4096  # pins per run (a canvas has at most this many positions in a trace)  # discrete-ddim: more sweeps than this leave almost no predictor steps


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
        return values

    def replace(self, **changes) -> "GenerationSettings":
        return dataclasses.replace(self, **changes)

    def problems(
        self, *, max_context: int | None = None, prompt_tokens: int | None = None, canvas_length: int | None = None
    ) -> list[str]:
        """Human-readable reasons these settings cannot run; empty when they can.

        With `max_context` and `prompt_tokens` it also checks that the prompt plus the output
        fits the model; the output is whole canvases, so the budget is rounded up to them.
        """
        out = []

        def is_int(v):
            return isinstance(v, int) and not isinstance(v, bool)

        def is_number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v  # rejects NaN

        if self.max_new_tokens is not None and (
            not is_int(self.max_new_tokens) or not 1 <= self.max_new_tokens <= MAX_NEW_TOKENS_LIMIT
        ):
            out.append(f"max new tokens must be a whole number from 1 to {MAX_NEW_TOKENS_LIMIT} (got {self.max_new_tokens!r})")
        if self.max_denoising_steps is not None and (
            not is_int(self.max_denoising_steps) or not 1 <= self.max_denoising_steps <= MAX_DENOISING_STEPS_LIMIT
        ):
            out.append(
                f"max denoising steps must be a whole number from 1 to {MAX_DENOISING_STEPS_LIMIT} "
                f"(got {self.max_denoising_steps!r})"
            )
        if self.entropy_bound is not None and (not is_number(self.entropy_bound) or not 0 < self.entropy_bound <= 1000):
            out.append(f"entropy bound must be a number above 0 and at most 1000 nats (got {self.entropy_bound!r})")
        for name in ("t_min", "t_max", "temperature"):
            value = getattr(self, name)
            if value is not None and (not is_number(value) or not 0 <= value <= 100):
                out.append(f"{name} must be a number from 0 to 100 (got {value!r})")
        if is_number(self.t_min) and is_number(self.t_max) and self.t_max <= self.t_min:
            out.append(f"t_max must be larger than t_min (got t_min={self.t_min}, t_max={self.t_max})")
        if not is_int(self.seed) or not 0 <= self.seed <= MAX_SEED:
            out.append(f"seed must be a whole number from 0 to {MAX_SEED} (got {self.seed!r})")
        if not is_int(self.record_topk) or not 0 <= self.record_topk <= MAX_RECORD_TOPK:
            out.append(f"record top-k must be a whole number from 0 to {MAX_RECORD_TOPK} (got {self.record_topk!r})")
        if not isinstance(self.thinking, bool):
            out.append(f"thinking must be true or false (got {self.thinking!r})")
        if self.corrector_steps is not None and (not is_int(self.corrector_steps) or not 0 <= self.corrector_steps <= MAX_CORRECTOR_STEPS):
            out.append(f"corrector steps must be a whole number from 0 to {MAX_CORRECTOR_STEPS} (got {self.corrector_steps!r})")
        if self.corrector_k is not None and (not is_int(self.corrector_k) or not 1 <= self.corrector_k <= 4096):
            out.append(f"corrector k must be a whole number from 1 to 4096 (got {self.corrector_k!r})")
        for name in ("refine_threshold", "editing_threshold"):
            value = getattr(self, name)
            if value is not None and (not is_number(value) or not 0 < value <= 1):
                out.append(f"{name.replace('_', ' ')} must be a probability above 0 and at most 1 (got {value!r})")
        out.extend(pin_problems(self.pins))
        if self.layers is not None and self.layers != LAYERS_ALL and not (
            isinstance(self.layers, tuple) and self.layers and all(is_int(i) and 0 <= i < MAX_LAYERS for i in self.layers)
            and len(set(self.layers)) == len(self.layers)
        ):
            out.append(f"layers must be distinct layer numbers from 0, or {LAYERS_ALL!r} (got {self.layers!r})")
        if self.record_shift is not None and not isinstance(self.record_shift, bool):
            out.append(f"record shift must be true or false (got {self.record_shift!r})")
        if self.sampler is not None and not is_sampler_name(self.sampler):
            out.append(f"sampler must be a sampler's name such as {SAMPLER_ENTROPY_BOUND!r} (got {self.sampler!r})")
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
