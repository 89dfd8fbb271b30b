"""Facts every backend and the app share: the real checkpoints, what they need, how a load failure reads.

Kept in one module so that a second backend, the registry and hosted mode cannot disagree.
"""

from __future__ import annotations

import os

REAL_CHECKPOINT = "google/diffusiongemma-26B-A4B-it"
REAL_CHECKPOINT_MLX = "mlx-community/diffusiongemma-26B-A4B-it-4bit"
REAL_CHECKPOINT_BF16_GB = 52  # its weights alone in bf16, measured on an H100; plus activations and cache
REAL_CHECKPOINT_GPU_GB = 70  # the GPU memory it is offered on: weights plus room for activations (an 80 GB card)


def on_zero_gpu() -> bool:
    """A Hugging Face ZeroGPU Space (it sets SPACES_ZERO_GPU): the GPU exists only inside `spaces.GPU` calls."""
    return os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "true", "yes", "on")


def looks_like_path(source: str) -> bool:
    """A model source meant as a folder (./x, ~/x, /x, a/b/c, a Windows path) rather than a hub id (owner/name)."""
    return source.startswith((".", "~", "/")) or (os.sep in source and source.count("/") != 1) or "\\" in source


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its first), "" when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def load_failure_message(source: str, exc: BaseException, *, what: str, is_folder: bool = False, hint: str = "") -> str:
    """One line for a model that did not load: the hub being out of reach said plainly, else the cause."""
    text = first_line(exc) or type(exc).__name__
    if not is_folder and any(w in str(exc).lower() for w in ("offline", "connect", "resolve", "hub", "internet")):
        return (
            f"Could not load {source}: the Hugging Face Hub is not reachable from this machine and the model is "
            f"not in the local cache ({text[:200]})."
        )
    return f"Could not load {source} as {what}: {text[:300]}{'.' + hint if hint else ''}"
