"""Backends and the registry that picks one.

    from backends import load_backend, pick_backend_kind, model_choices
    backend = load_backend(DEFAULT_MODEL)          # the built-in model, on the best device here
    backend = load_backend("google/diffusiongemma-26B-A4B-it")   # the real checkpoint (CUDA)

Which backend runs a model:
- an MLX model (an `mlx-community/...` id, or a folder converted by mlx-vlm) -> the MLX backend;
  on a machine without MLX that is a clear "not installed" message, never a traceback;
- anything else -> transformers: on CUDA in bf16 when a GPU is visible, else on CPU in float32.
On Apple silicon with MLX installed, the real checkpoint's picker entry is the MLX 4-bit one.
"""

from __future__ import annotations

import importlib.util
import json
import platform
from dataclasses import dataclass
from pathlib import Path

from .base import Backend, BackendError, BackendUnavailable
from .run import record_trace

ASSETS = Path(__file__).resolve().parent.parent / "assets"
REAL_CHECKPOINT = "google/diffusiongemma-26B-A4B-it"
REAL_CHECKPOINT_MLX = "mlx-community/diffusiongemma-26B-A4B-it-4bit"
BUILTIN_MODEL_DIR = ASSETS / "models" / "diffusiongemma-tiny-demo"
RANDOM_MODEL_DIR = Path.home() / ".cache" / "diffusion-visualizer" / "random-tiny"

MLX_INSTALL_HINT = (
    "The MLX backend needs Apple silicon with `pip install mlx==0.32.4 mlx-vlm==0.7.10` "
    "(on Linux, for tests only: `pip install 'mlx[cpu]==0.32.4' jinja2 requests` and "
    "`pip install --no-deps mlx-vlm==0.7.10`)."
)


@dataclass(frozen=True)
class ModelChoice:
    label: str  # what the picker shows
    source: str  # hub id or folder
    backend: str  # "transformers" or "mlx"
    builtin: bool


def is_apple_silicon() -> bool:
    return platform.system() == "Darwin" and platform.machine() == "arm64"


def mlx_installed() -> bool:
    return importlib.util.find_spec("mlx") is not None and importlib.util.find_spec("mlx_vlm") is not None


def cuda_memory_gb() -> float:
    """Total memory of the first CUDA GPU in GB, 0 when there is none."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / 1e9
    except Exception:  # a broken CUDA install must not stop the app from starting on CPU
        pass
    return 0.0


def pick_backend_kind() -> str:
    """The backend this machine runs best: MLX on Apple silicon with MLX, else transformers."""
    return "mlx" if is_apple_silicon() and mlx_installed() else "transformers"


def is_mlx_model(source: str) -> bool:
    """An mlx-community id, or a folder whose weights MLX saved (mlx-vlm, mlx-lm, training.convert_mlx).

    MLX writes {"format": "mlx"} into the header of every safetensors file it saves, where
    transformers writes "pt": the folder's first weight file says which library wrote it.
    """
    if source.startswith("mlx-community/"):
        return True
    folder = Path(source).expanduser()
    weights = sorted(folder.glob("*.safetensors")) if (folder / "config.json").is_file() else []
    return bool(weights) and _safetensors_format(weights[0]) == "mlx"


def _safetensors_format(path: Path) -> str | None:
    """The "format" entry of a safetensors header: 8 bytes of length, then JSON."""
    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= 100_000_000:
                return None
            header = json.loads(f.read(size))
    except (OSError, ValueError):
        return None
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    return metadata.get("format") if isinstance(metadata, dict) else None


def model_choices() -> list[ModelChoice]:
    """The picker's entries, the preselected one first."""
    real = (
        ModelChoice("DiffusionGemma 26B-A4B 4-bit (MLX, Apple silicon)", REAL_CHECKPOINT_MLX, "mlx", False)
        if pick_backend_kind() == "mlx"
        else ModelChoice("DiffusionGemma 26B-A4B (transformers; needs an 80 GB GPU)", REAL_CHECKPOINT, "transformers", False)
    )
    random = ModelChoice("Tiny random model (untrained, for comparison)", str(RANDOM_MODEL_DIR), "transformers", True)
    small = [random]
    if (BUILTIN_MODEL_DIR / "config.json").exists():
        small.insert(0, ModelChoice("Built-in small model (trained here, not the 26B one)", str(BUILTIN_MODEL_DIR), "transformers", True))
    if real.backend == "mlx" or cuda_memory_gb() >= 70:
        return [real, *small]
    return [*small, real]


def default_model() -> str:
    """The model the CLI uses when none is named: the trained built-in one, else the random one."""
    return str(BUILTIN_MODEL_DIR) if (BUILTIN_MODEL_DIR / "config.json").exists() else str(RANDOM_MODEL_DIR)


def load_backend(
    source: str, *, backend: str | None = None, device: str | None = None, parallel: str | None = None
) -> Backend:
    """Load a model by hub id or folder on the right backend; raises BackendError with a message.

    `parallel` (transformers only) spreads it over several GPUs: see backends/sharded.py."""
    source = str(source)
    kind = backend or ("mlx" if is_mlx_model(source) else "transformers")
    choice = next((c for c in model_choices() if c.source == source), None)
    if kind == "mlx":
        if parallel is not None:
            raise BackendError("--parallel is for the transformers backend; an MLX model runs in one process.")
        if not mlx_installed():
            raise BackendUnavailable(f"{source} is an MLX model. {MLX_INSTALL_HINT}")
        from .mlx_backend import MLXBackend

        return MLXBackend(source, display_name=choice.label if choice else None, builtin=bool(choice and choice.builtin))
    if kind != "transformers":
        raise BackendError(f"unknown backend {kind!r}: use 'transformers' or 'mlx'")
    if source == str(RANDOM_MODEL_DIR) and not (RANDOM_MODEL_DIR / "config.json").exists():
        from .random_model import build_random_model

        build_random_model(RANDOM_MODEL_DIR)
    from .transformers_backend import TransformersBackend

    return TransformersBackend(
        source,
        device=device,
        display_name=choice.label if choice else None,
        builtin=bool(choice and choice.builtin),
        parallel=parallel,
    )


__all__ = [
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "ModelChoice",
    "load_backend",
    "record_trace",
    "model_choices",
    "default_model",
    "pick_backend_kind",
    "BUILTIN_MODEL_DIR",
    "RANDOM_MODEL_DIR",
    "REAL_CHECKPOINT",
    "REAL_CHECKPOINT_MLX",
]
