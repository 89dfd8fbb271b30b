"""Loaded models shared by every session of the app: each model is loaded once.

    models = LoadedModels(keep=2)
    backend = models.get("assets/models/diffusiongemma-tiny-demo")

Two sessions asking for the same model wait for one load (a lock per model); a session asking for a
model that is already loaded never waits for another model's load.  Beyond `keep` models, the least
recently used one is closed to free its memory (a run still using it keeps its own reference).
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
        self._models: OrderedDict[str, Backend] = OrderedDict()
        self._loading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()  # guards the two dicts only; never held while loading

    def get(self, source: str) -> Backend:
        """The loaded backend for `source`, loading it if needed (raises BackendError)."""
        with self._lock:
            if source in self._models:
                self._models.move_to_end(source)
                return self._models[source]
            loading = self._loading.setdefault(source, threading.Lock())
        with loading:
            with self._lock:
                if source in self._models:  # loaded by the session we waited for
                    return self._models[source]
            backend = self._load(source)
            with self._lock:
                self._models[source] = backend
                self._loading.pop(source, None)
                evicted = []
                while len(self._models) > self.keep:
                    evicted.append(self._models.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return backend

    def pin(self, source: str, backend: Backend) -> None:
        """Hold `backend`, loaded elsewhere, as `source`'s model (a sharded model: every rank loaded its
        shard at start-up). A server that pins a model offers nothing else, so nothing evicts it."""
        with self._lock:
            self._models[source] = backend
            self._models.move_to_end(source)

    def loaded(self, source: str) -> bool:
        return source in self._models
