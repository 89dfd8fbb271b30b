"""MLX backend: DiffusionGemma through mlx-vlm, on Apple silicon (Metal) or, for tests, Linux CPU.

Loads a model with `mlx_vlm.load`, by hub id (`mlx-community/diffusiongemma-26B-A4B-it-4bit`) or
from a local folder (one converted by mlx-vlm, or by `python -m training.convert_mlx` for the
project's small models), and yields the same records as the transformers backend: per step the
accepted mask, the next canvas, the argmax and the entropy; per block the committed tokens, the
EOS position and why the block ended.  The steps come from `mlx_capture.denoise`, which gives
exactly the tokens of stock mlx-vlm generation for the same seed and settings.

    backend = MLXBackend("mlx-community/diffusiongemma-26B-A4B-it-4bit")
    for record in backend.generate("Write a haiku", GenerationSettings(seed=0)):
        print(type(record).__name__)
    backend.close()

MLX arrays belong to the thread that made them, and the backend lives as long as the app, so
each backend owns one persistent worker thread that loads the model and runs every generation;
nothing else touches the model.  Records reach the caller live through a bounded queue; the
`stop` event, or closing the generator, ends the run between two steps.

Knobs: `sampler` (entropy-bound by default, as transformers; or mlx-vlm's confidence-threshold,
see CAPABILITIES) and `temperature` (1 by default: samples like transformers; 0 is greedy).
`max_denoising_steps`, `entropy_bound`, `t_min` and `t_max` work as on transformers (stock
mlx-vlm reads them from the checkpoint's generation config, which gives the defaults here).
`max_new_tokens` is rounded up to whole canvases, as transformers does, and the canvas is always
the full 256 tokens (mlx-vlm would otherwise shrink the last one), so every block looks the same.
`compiled` is a transformers option and is recorded as False.

MLX itself is imported only on the worker thread, so this module (and CAPABILITIES, for the
registry) imports on machines without MLX.
"""

from __future__ import annotations

import json
import threading
import weakref
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from visualizer.records import ModelInfo
from visualizer.samplers import (
    BUDGET_CONFIDENCE_THRESHOLD,
    BUDGET_ENTROPY_BOUND,
    SAMPLER_CONFIDENCE_THRESHOLD,
    SAMPLER_ENTROPY_BOUND,
    AcceptRule,
    SamplerSpec,
)
from visualizer.settings import GenerationSettings, with_defaults

from .base import COMMON_KNOBS, Backend, BackendError, BackendUnavailable, Capabilities
from .known import first_line, load_failure_message, looks_like_path
from .model_thread import ModelThread, stop_thread

DEFAULT_TEMPERATURE = 1.0  # samples like transformers; mlx-vlm's own default is 0 (greedy)

# What each sampler's frames mean (the states code needs no special case for either). On MLX the
# last step of a block commits the argmax without sampling, for both.
CAPABILITIES = Capabilities(
    knobs=COMMON_KNOBS | {"sampler"},
    samplers=(
        SamplerSpec(
            SAMPLER_ENTROPY_BOUND,
            "Entropy-bound (transformers' rule; the default): each step accepts the lowest-entropy positions "
            "whose summed entropy stays within the bound and recomputes that set from scratch, so a token "
            "accepted at one step can turn back into noise at the next (remasked). At temperature 1 it samples "
            "as the transformers backend does, at 0 it takes the argmax. On MLX the last step of a block "
            "commits the argmax without sampling, so it accepts nothing new.",
            AcceptRule(renoises=True, last_step_samples=False, budget=BUDGET_ENTROPY_BOUND),
            knobs=frozenset({"entropy_bound", "t_min", "t_max", "temperature"}),
        ),
        SamplerSpec(
            SAMPLER_CONFIDENCE_THRESHOLD,
            "Confidence-threshold (mlx-vlm's default): each step reveals the positions whose sampled token has "
            "a probability of at least 0.9 (at least one per step), and a revealed token stays fixed until the "
            "block ends. Reveals only accumulate, so nothing is ever remasked: green is this step's reveals, "
            "purple everything revealed before. A block ends as soon as every position is revealed; otherwise "
            "its last step commits the argmax without sampling.",
            AcceptRule(renoises=False, last_step_samples=False, budget=BUDGET_CONFIDENCE_THRESHOLD),
            knobs=frozenset({"t_min", "t_max", "temperature"}),
        ),
    ),
)


class MLXBackend(Backend):
    name = "mlx"
    capabilities = CAPABILITIES
    runs_in_order = True  # every run on the one model thread (`_launch`)

    def __init__(self, source: str, *, display_name: str | None = None, builtin: bool = False):
        source = str(source)
        local = Path(source).expanduser()
        if not local.is_dir() and looks_like_path(source):
            raise BackendError(f"No model folder at {source}.")
        self._worker = ModelThread("mlx-worker", on_exit=_clear_mlx_streams)
        self._closed = False
        self._closing = threading.Event()  # set by close(): a run in progress stops at its next step
        # Ends the worker when close() is not called: when the backend is collected, or at exit.
        self._stop_worker = weakref.finalize(self, stop_thread, self._worker, self._closing)
        try:
            self.model, self.processor, runtime = self._worker.submit(_load_model, source, local).result()
        except BaseException:
            self._stop_worker()
            raise
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        config = self.model.config
        self._generation_config = dict(getattr(config, "generation_config", None) or {})
        text = config.text_config
        self.info = ModelInfo(
            name=display_name or (local.name if local.is_dir() else source),
            source=str(local.resolve()) if local.is_dir() else source,
            backend=self.name,
            device=runtime["device"],
            dtype=runtime["dtype"],
            canvas_length=int(config.canvas_length),
            vocab_size=int(text.vocab_size),
            eos_token_ids=_eos_token_ids(self.tokenizer, config, self._generation_config),
            pad_token_id=_pad_token_id(self._generation_config, text, self.tokenizer),
            max_context=int(text.max_position_embeddings),
            builtin=builtin,
            parameters=runtime["parameters"],
        )

    # ---- the interface ---------------------------------------------------------------------
    def default_settings(self) -> GenerationSettings:
        """The engine's defaults for this checkpoint, read from its generation config as mlx-vlm does."""
        g = self._generation_config
        schedule = _schedule(g)
        sampler_config = g.get("sampler_config") if isinstance(g.get("sampler_config"), dict) else {}
        knobs = with_defaults(max_new_tokens=g.get("max_new_tokens"), max_denoising_steps=g.get("max_denoising_steps"),
                              entropy_bound=sampler_config.get("entropy_bound"), t_min=schedule.get("t_min"),
                              t_max=schedule.get("t_max"))
        return GenerationSettings(
            max_new_tokens=int(knobs["max_new_tokens"]),
            max_denoising_steps=int(knobs["max_denoising_steps"]),
            entropy_bound=float(knobs["entropy_bound"]),
            t_min=float(knobs["t_min"]),
            t_max=float(knobs["t_max"]),
            seed=0,
            sampler=SAMPLER_ENTROPY_BOUND,
            temperature=DEFAULT_TEMPERATURE,
            compiled=False,
        )

    def prompt_ids(self, prompt: str, *, thinking: bool = False) -> list[int]:
        """One user turn through the tokenizer's chat template, as the transformers backend does.

        Not the mlx-vlm processor's `apply_chat_template`: it turns the message into a list of
        content parts, which a plain-text template (the project's small models) prints as a
        Python list.  Ids are passed to the model, never a string (a string got a second BOS).
        """
        return self.templated_ids(prompt, thinking)

    def options(self, settings: GenerationSettings, *, max_blocks: int):
        """The capture loop's options for resolved settings (also used by the tests)."""
        from .mlx_capture import DenoiseOptions

        return DenoiseOptions(
            max_blocks=max_blocks,
            max_denoising_steps=settings.max_denoising_steps,
            sampler=settings.sampler,
            temperature=float(settings.temperature),
            entropy_bound=None if settings.entropy_bound is None else float(settings.entropy_bound),  # entropy-bound only
            t_min=float(settings.t_min),
            t_max=float(settings.t_max),
            seed=settings.seed,
            eos_token_ids=self.info.eos_token_ids,
            pad_token_id=self.info.pad_token_id,
            stopping=_stopping(self._generation_config),
            topk=min(settings.record_topk, self.info.vocab_size),
        )

    def check(self, prompt: str, settings: GenerationSettings) -> list[int]:
        if self._closed:
            raise BackendError("This MLX backend was closed; load the model again.")
        return super().check(prompt, settings)

    def _produce(self, ids, settings, emit, should_stop) -> None:  # runs on the worker thread
        from .mlx_capture import denoise

        max_blocks = -(-settings.max_new_tokens // self.info.canvas_length)
        options = self.options(settings, max_blocks=max_blocks)
        stopping = lambda: should_stop() or self._closing.is_set()  # noqa: E731
        for item in denoise(self.model, ids, options, should_stop=stopping):
            emit(item)

    def failure_message(self, exc: BaseException) -> str:
        first = first_line(exc)
        if "memory" in first.lower():  # MLX reports running out of (unified) memory as a RuntimeError
            return (
                "Out of memory during generation: lower max new tokens, use a shorter prompt, or close other apps "
                f"({first[:200]})."
            )
        return super().failure_message(exc)

    def close(self) -> None:
        """Stop any run, drop the model on its own thread and end that thread; the backend is unusable afterwards."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._worker.submit(self._release).exception()
        self._stop_worker()

    # ---- helpers -------------------------------------------------------------------------
    def _launch(self, fn) -> Future:
        """Every run goes to the backend's one MLX thread (MLX arrays belong to the thread that made them)."""
        try:
            return self._worker.submit(fn)
        except RuntimeError:  # close() ran in another thread meanwhile
            raise BackendError("This MLX backend was closed; load the model again.") from None

    def _release(self) -> None:
        import mlx.core as mx

        self.model = None  # freed here, on the thread that made its arrays
        mx.clear_cache()

    def decode(self, sequence: np.ndarray) -> str:
        text = super().decode(sequence)
        clean = getattr(self.processor, "clean_output", None)  # the real checkpoint's channel markers
        return clean(text) if callable(clean) else text


# ---- on the worker thread ----------------------------------------------------------------
def _load_model(source: str, local: Path):
    """The model, its processor, and what ModelInfo needs from MLX and the folder itself."""
    try:
        import mlx.core as mx
        from mlx_vlm import load
        from mlx_vlm.utils import get_model_path
    except ImportError as exc:
        from . import MLX_INSTALL_HINT

        raise BackendUnavailable(f"MLX or a part of mlx-vlm is missing here ({exc}). {MLX_INSTALL_HINT}") from None

    try:
        folder = get_model_path(str(local) if local.is_dir() else source)  # downloads a hub id once
        # Said explicitly: mlx-vlm's Gemma processors default to trusting a checkpoint's own code.
        model, processor = load(str(folder), trust_remote_code=False)
    except Exception as exc:  # any load failure is the user's to act on: say what and how
        hint = (
            " If it is a transformers folder, convert it first: python -m training.convert_mlx --model FOLDER --out MLX_FOLDER"
            if local.is_dir()
            else ""
        )
        raise BackendError(load_failure_message(source, exc, what="an MLX DiffusionGemma model", is_folder=local.is_dir(), hint=hint)) from None
    config = model.config
    if getattr(config, "model_type", None) != "diffusion_gemma" or not hasattr(model, "diffusion_decoder_logits"):
        raise BackendError(
            f"{source} is a {getattr(config, 'model_type', 'unknown')!r} model, not DiffusionGemma."
        )
    runtime = {
        "device": "metal" if mx.default_device().type == mx.DeviceType.gpu else "cpu",
        "dtype": _dtype_name(model, folder),
        "parameters": _count_parameters(model),
    }
    return model, processor, runtime


def _dtype_name(model, folder: Path) -> str:
    """'4-bit' for a quantized model (its default bits, the experts'), else the embedding's dtype."""
    try:
        quantization = json.loads((folder / "config.json").read_text()).get("quantization")
    except (OSError, ValueError):
        quantization = None
    if isinstance(quantization, dict) and quantization.get("bits"):
        return f"{quantization['bits']}-bit"
    embed = model.model.decoder.embed_tokens
    return f"{embed.bits}-bit" if hasattr(embed, "bits") else str(embed.weight.dtype).replace("mlx.core.", "")


def _count_parameters(model) -> int:
    """Distinct parameters, counting a quantized weight by its unpacked size and not its scales."""
    from mlx.utils import tree_flatten

    quantized = {name: module.bits for name, module in model.named_modules() if hasattr(module, "bits")}
    total = 0
    for name, array in tree_flatten(model.parameters()):
        owner, _, leaf = name.rpartition(".")
        if owner in quantized:
            if leaf in ("scales", "biases"):
                continue
            if leaf == "weight":
                total += array.size * 32 // quantized[owner]
                continue
        total += array.size
    return total


# ---- what mlx-vlm's engine reads from the generation config -------------------------------
def _schedule(g: dict) -> dict:
    schedule = g.get("linear_temperature_schedule_config")
    if isinstance(schedule, dict) and schedule:
        return schedule
    return with_defaults(t_min=g.get("t_min"), t_max=g.get("t_max"))


def _stopping(g: dict) -> dict | None:
    """The engine's early-stop thresholds; a null one is left out, so the engine uses its own default."""
    stopping = g.get("diffusion_stopping_config")
    if not (isinstance(stopping, dict) and stopping):
        stopping = g
    stopping = {key: stopping[key] for key in ("confidence_threshold", "stability_threshold") if stopping.get(key) is not None}
    return stopping or None


def _eos_token_ids(tokenizer, config, g: dict) -> tuple[int, ...]:
    """What the engine stops at: the tokenizer's stopping criteria plus the generation config's EOS."""
    ids = list(getattr(getattr(tokenizer, "stopping_criteria", None), "eos_token_ids", None) or [])
    for extra in (g.get("eos_token_id"), getattr(config, "eos_token_id", None)):
        ids.extend(extra if isinstance(extra, (list, tuple)) else ([extra] if extra is not None else []))
    return tuple(dict.fromkeys(int(i) for i in ids))


def _pad_token_id(g: dict, text_config, tokenizer) -> int:
    for value in (g.get("pad_token_id"), getattr(text_config, "pad_token_id", None), tokenizer.pad_token_id):
        if value is not None:
            return int(value)
    return 0


def _clear_mlx_streams() -> None:
    """On the MLX thread as it ends (model_thread.py says why)."""
    import sys

    if "mlx.core" in sys.modules:  # MLX was used on this thread
        sys.modules["mlx.core"].clear_streams()
