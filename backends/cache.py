"""Loaded models shared by every session of the app: each model is loaded once.

    models = LoadedModels(keep=2)
    backend = models.get("assets/models/diffusiongemma-tiny-demo")
    backend = models.get("assets/models/diffusiongemma-tiny-demo", "diffusers")   # the same model, another backend

Two sessions asking for the same model wait for one load (a lock per model); a session asking for a
model that is already loaded never waits for another model's load.  Beyond `keep` models, the least
recently used one is closed to free its memory (a run still using it keeps its own reference).  The
same model on two backends is two models here (two copies of its weights).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from . import load_backend
from .base import Backend


class LoadedModels:
    def __init__(self, keep: int = 2, load=load_backend):
        self.keep = keep
        self._load = load
        self._models: OrderedDict[tuple[str, str | None], Backend] = OrderedDict()  # (source, backend name or None)
        self._loading: dict[tuple[str, str | None], threading.Lock] = {}
        self._lock = threading.Lock()  # guards the two dicts only; never held while loading

    def get(self, source: str, backend: str | None = None) -> Backend:
        """The loaded model `source` on `backend` (None: the model's own), loading it if needed
        (raises BackendError)."""
        key = (source, backend)
        with self._lock:
            if key in self._models:
                self._models.move_to_end(key)
                return self._models[key]
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                if key in self._models:  # loaded by the session we waited for
                    return self._models[key]
            loaded = self._load(source) if backend is None else self._load(source, backend=backend)
            with self._lock:
                self._models[key] = loaded
                self._loading.pop(key, None)
                evicted = []
                while len(self._models) > self.keep:
                    evicted.append(self._models.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return loaded

    def pin(self, source: str, backend: Backend) -> None:
        """Hold `backend`, loaded elsewhere, as `source`'s model (a sharded model: every rank loaded its
        shard at start-up). A server that pins a model offers nothing else, so nothing evicts it."""
        with self._lock:
            self._models[(source, None)] = backend
            self._models.move_to_end((source, None))

    def loaded(self, source: str, backend: str | None = None) -> bool:
        return (source, backend) in self._models
