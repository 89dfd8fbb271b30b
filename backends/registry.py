"""The backends this project has, by name: adding one means one module and one entry here.

    entry = BACKENDS["mlx"]; entry.available()          # is its library installed here?
    backend_names()                                     # the CLI's --backend choices
    backend_for_source("mlx-community/...")             # which backend a model source needs

Each entry names its module lazily, so listing the backends imports none of their libraries.
A backend module defines its class and a module-level `CAPABILITIES` (`base.Capabilities`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .base import Capabilities


@dataclass(frozen=True)
class BackendEntry:
    name: str
    module: str  # the module that defines the backend's class and CAPABILITIES
    class_name: str
    available: Callable[[], bool]  # its libraries are installed on this machine
    install_hint: str  # what to install when it is not
    claims: Callable[[str], bool]  # a model source only this backend loads

    def backend_class(self):
        return getattr(importlib.import_module(self.module), self.class_name)

    @property
    def capabilities(self) -> Capabilities:
        return importlib.import_module(self.module).CAPABILITIES


def mlx_installed() -> bool:
    return importlib.util.find_spec("mlx") is not None and importlib.util.find_spec("mlx_vlm") is not None


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


MLX_INSTALL_HINT = (
    "The MLX backend needs Apple silicon with `pip install mlx==0.32.4 mlx-vlm==0.7.10` "
    "(on Linux, for tests only: `pip install 'mlx[cpu]==0.32.4' jinja2 requests` and "
    "`pip install --no-deps mlx-vlm==0.7.10`)."
)

DIFFUSERS_SOURCE_PREFIX = "diffusers:"  # `diffusers:<folder or hub id>`: the same model, run by diffusers' pipeline


def is_diffusers_source(source: str) -> bool:
    return source.startswith(DIFFUSERS_SOURCE_PREFIX)


DEFAULT_BACKEND = "transformers"  # loads any model no other backend claims
BACKENDS: dict[str, BackendEntry] = {
    entry.name: entry
    for entry in (
        BackendEntry(
            "transformers", "backends.transformers_backend", "TransformersBackend",
            available=lambda: True, install_hint="pip install -r requirements.txt", claims=lambda source: False,
        ),
        BackendEntry(
            "mlx", "backends.mlx_backend", "MLXBackend",
            available=lambda: mlx_installed(), install_hint=MLX_INSTALL_HINT, claims=is_mlx_model,  # looked up late: tests patch it
        ),
        BackendEntry(
            "diffusers", "backends.diffusers_backend", "DiffusersBackend",
            available=lambda: importlib.util.find_spec("diffusers") is not None,
            install_hint="pip install -r requirements.txt", claims=is_diffusers_source,
        ),
    )
}


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def backend_for_source(source: str) -> str:
    """The backend a model source needs: the first that claims it, else the default."""
    return next((name for name, entry in BACKENDS.items() if entry.claims(source)), DEFAULT_BACKEND)
