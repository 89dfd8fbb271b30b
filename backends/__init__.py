"""Backends and the registry that picks one.

    from backends import load_backend, pick_backend_kind, model_choices
    backend = load_backend(DEFAULT_MODEL)          # the built-in model, on the best device here
    backend = load_backend("google/diffusiongemma-26B-A4B-it")   # the real checkpoint (CUDA)
    backend = load_backend(source, parallel="expert")              # under torchrun: this rank's shard
    leader = Leader(backend) if not is_follower() else None        # a sharded server (backends/sharded_server.py)

Which backend runs a model:
- an MLX model (an `mlx-community/...` id, or a folder converted by mlx-vlm) -> the MLX backend;
  on a machine without MLX that is a clear "not installed" message, never a traceback;
- anything else -> transformers: on CUDA in bf16 when a GPU is visible, else on CPU in float32.
On Apple silicon with MLX installed, the real checkpoint's picker entry is the MLX 4-bit one.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path

from .base import Backend, BackendError, BackendUnavailable, Capabilities
from .bridge import Stop
from .known import REAL_CHECKPOINT, REAL_CHECKPOINT_GPU_GB, REAL_CHECKPOINT_MLX
from .registry import (  # noqa: F401  (re-exported)
    BACKENDS, MLX_INSTALL_HINT, backend_for, backend_for_source, backend_names, is_mlx_model, mlx_installed, sampler_backends,
)
from .run import record_trace, run_records
from .sharded import is_follower, under_torchrun
from .sharded_server import Leader, follow_requests

ASSETS = Path(__file__).resolve().parent.parent / "assets"
BUILTIN_MODEL_DIR = ASSETS / "models" / "diffusiongemma-tiny-demo"
RANDOM_MODEL_DIR = Path.home() / ".cache" / "diffusion-visualizer" / "random-tiny"


@dataclass(frozen=True)
class ModelChoice:
    label: str  # what the picker shows
    source: str  # hub id or folder
    backend: str  # a name in `registry.BACKENDS`
    builtin: bool


def is_apple_silicon() -> bool:
    return platform.system() == "Darwin" and platform.machine() == "arm64"


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


def real_checkpoint_fits_here() -> bool:
    """Apple silicon with MLX (the 4-bit checkpoint), or a CUDA GPU with room for the bf16 weights."""
    return pick_backend_kind() == "mlx" or cuda_memory_gb() >= REAL_CHECKPOINT_GPU_GB


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
    if real_checkpoint_fits_here():
        return [real, *small]
    return [*small, real]


def default_model() -> str:
    """The model the CLI uses when none is named: the trained built-in one, else the random one."""
    return str(BUILTIN_MODEL_DIR) if (BUILTIN_MODEL_DIR / "config.json").exists() else str(RANDOM_MODEL_DIR)


def load_backend(
    source: str, *, backend: str | None = None, sampler: str | None = None, device: str | None = None,
    parallel: str | None = None,
) -> Backend:
    """Load a model by hub id or folder on the right backend; raises BackendError with a message.

    Without `backend`, the backend is the first installed one that runs the model with `sampler`
    (`registry.backend_for`; None: the model's own). `parallel` (transformers only) spreads it over
    several GPUs: see backends/sharded.py."""
    source = str(source)
    kind = backend or backend_for(source, sampler)
    entry = BACKENDS.get(kind)
    if entry is None:
        raise BackendError(f"unknown backend {kind!r}: use one of {', '.join(backend_names())}")
    if sampler is not None and sampler not in (spec.name for spec in entry.capabilities.samplers):
        try:
            instead = f"the {backend_for(source, sampler)} backend runs it (name no backend and it is picked)"
        except BackendError as exc:
            instead = str(exc)
        raise BackendError(f"the {kind} backend has no {sampler} sampler; {instead}")
    if not entry.available():
        raise BackendUnavailable(f"{source} needs the {kind} backend. {entry.install_hint}")
    choice = next((c for c in model_choices() if c.source == source), None)
    if parallel is not None and kind != "transformers":
        raise BackendError(f"--parallel is for the transformers backend; the {kind} backend runs in one process.")
    if source == str(RANDOM_MODEL_DIR) and not (RANDOM_MODEL_DIR / "config.json").exists():
        from .random_model import build_random_model

        build_random_model(RANDOM_MODEL_DIR)
    # a spread model is named by its id or folder: a picker label such as "needs an 80 GB GPU" would not hold
    options = {"display_name": choice.label if choice and parallel is None else None, "builtin": bool(choice and choice.builtin)}
    if device is not None:
        options["device"] = device
    if parallel is not None:
        options["parallel"] = parallel
    return entry.backend_class()(source, **options)


__all__ = [
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "Capabilities",
    "ModelChoice",
    "Stop",
    "load_backend",
    "record_trace",
    "run_records",
    "backend_names",
    "model_choices",
    "default_model",
    "pick_backend_kind",
    "real_checkpoint_fits_here",
    "backend_for_source",
    "backend_for",
    "sampler_backends",
    "Leader",
    "follow_requests",
    "is_follower",
    "under_torchrun",
    "BUILTIN_MODEL_DIR",
    "RANDOM_MODEL_DIR",
    "REAL_CHECKPOINT",
    "REAL_CHECKPOINT_MLX",
]
