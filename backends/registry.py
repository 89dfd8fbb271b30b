"""The backends this project has, by name: adding one means one module and one entry here.

    entry = BACKENDS["mlx"]; entry.available()          # is its library installed here?
    backend_names()                                     # the CLI's --backend choices
    backend_for_source("mlx-community/...")             # which backend a model source needs
    sampler_backends(folder)                            # {"entropy-bound": "transformers", "discrete-ddim": "diffusers", ...}
    backend_for(folder, "discrete-ddim")                # "diffusers": the sampler picks the backend

A model is one choice and its sampler another: the backend follows from the two (`backend_for`).

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

from visualizer.samplers import (
    SAMPLER_BLOCK_REFINEMENT, SAMPLER_CONFIDENCE_THRESHOLD, SAMPLER_DISCRETE_DDIM, SAMPLER_ENTROPY_BOUND,
)

from .base import BackendError, BackendUnavailable, Capabilities


@dataclass(frozen=True)
class BackendEntry:
    name: str
    module: str  # the module that defines the backend's class and CAPABILITIES
    class_name: str
    available: Callable[[], bool]  # its libraries are installed on this machine
    install_hint: str  # what to install when it is not
    claims: Callable[[str], bool]  # a model source only this backend loads
    loads_unclaimed: bool  # it also loads any model no backend claims (a transformers checkpoint)
    helpers: tuple[str, ...] = ()  # modules only this backend uses (its capture); with `module`, what
    #                                the layering contract keeps out of every other package (tests/test_layering.py)
    samplers: tuple[str, ...] = ()  # the names of its CAPABILITIES' samplers, default first, said here so that
    #                                 naming them (--sampler's help, `backend_for`) imports no library (a test checks they agree)

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
            loads_unclaimed=True, samplers=(SAMPLER_ENTROPY_BOUND,),
            helpers=("backends.capture", "backends.layer_capture", "backends.logit_summary", "backends.logit_summary_triton"),
        ),
        BackendEntry(
            "mlx", "backends.mlx_backend", "MLXBackend",
            available=lambda: mlx_installed(), install_hint=MLX_INSTALL_HINT, claims=is_mlx_model,  # looked up late: tests patch it
            loads_unclaimed=False, helpers=("backends.mlx_capture",), samplers=(SAMPLER_ENTROPY_BOUND, SAMPLER_CONFIDENCE_THRESHOLD),
        ),
        BackendEntry(
            "diffusers", "backends.diffusers_backend", "DiffusersBackend",
            available=lambda: importlib.util.find_spec("diffusers") is not None,
            install_hint="pip install -r requirements.txt", claims=is_diffusers_source,
            loads_unclaimed=True, helpers=("backends.diffusers_capture", "backends.diffusers_edits"),
            samplers=(SAMPLER_ENTROPY_BOUND, SAMPLER_DISCRETE_DDIM, SAMPLER_BLOCK_REFINEMENT),
        ),
    )
}


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def backend_for_source(source: str) -> str:
    """The backend a model source needs: the first that claims it, else the default."""
    return next((name for name, entry in BACKENDS.items() if entry.claims(source)), DEFAULT_BACKEND)


def backends_for_model(source: str) -> list[BackendEntry]:
    """The backends that load a model source, installed or not, the model's own first: the one that
    claims it, else every backend that loads unclaimed models."""
    claimed = [entry for entry in BACKENDS.values() if entry.claims(source)]
    return claimed or [entry for entry in BACKENDS.values() if entry.loads_unclaimed]


def sampler_backends(source: str) -> dict[str, str]:
    """Every sampler the model can run on the backends installed here -> the backend that runs it
    (the first in registry order that has it), in that order."""
    out: dict[str, str] = {}
    for entry in backends_for_model(source):
        if entry.available():
            for spec in entry.capabilities.samplers:
                out.setdefault(spec.name, entry.name)
    return out


def backend_for(source: str, sampler: str | None = None) -> str:
    """The backend that runs `source` with `sampler` (None: the model's own backend and its default).
    BackendError in one line where none installed here does: what would run it, and how to get it."""
    entries = backends_for_model(source)
    if sampler is None:
        return entries[0].name
    runs = [entry for entry in entries if sampler in _sampler_names(entry)]
    installed = [entry for entry in runs if entry.available()]
    if installed:
        return installed[0].name
    if runs:
        raise BackendUnavailable(f"the {sampler} sampler runs on the {runs[0].name} backend, which is not installed "
                                 f"here: {runs[0].install_hint}")
    elsewhere = [entry.name for entry in BACKENDS.values() if sampler in _sampler_names(entry)]
    offered = ", ".join(sampler_backends(source)) or "none here"
    where = f"it runs on the {' and '.join(elsewhere)} backend, which does not load this model" if elsewhere \
        else "no backend has it"
    raise BackendError(f"this model cannot run the {sampler} sampler ({where}); its samplers: {offered}")


def _sampler_names(entry: BackendEntry) -> list[str]:
    return list(entry.samplers)


def installed_samplers(entries=None) -> dict[str, list[str]]:
    """Every sampler the installed backends among `entries` (default: those that load any checkpoint, as the
    built-in model) run -> those backends, in registry order; no backend's library is imported."""
    entries = [e for e in BACKENDS.values() if e.loads_unclaimed] if entries is None else entries
    out: dict[str, list[str]] = {}
    for entry in entries:
        if entry.available():
            for name in entry.samplers:
                out.setdefault(name, []).append(entry.name)
    return out
