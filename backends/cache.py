"""Loaded models shared by every session of the app: each model is loaded once.

    models = LoadedModels(keep=2)
    backend = models.get("assets/models/diffusiongemma-tiny-demo")

Loading is serialized by a lock (two sessions asking for the 26B model must not load it twice);
beyond `keep` models, the least recently used one is closed to free its memory.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from . import load_backend
from .base import Backend


class LoadedModels:
    def __init__(self, keep: int = 2):
        self.keep = keep
        self._models: OrderedDict[str, Backend] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, source: str) -> Backend:
        """The loaded backend for `source`, loading it if needed (raises BackendError)."""
        with self._lock:
            if source in self._models:
                self._models.move_to_end(source)
                return self._models[source]
            backend = load_backend(source)
            self._models[source] = backend
            while len(self._models) > self.keep:
                _, old = self._models.popitem(last=False)
                old.close()
            return backend

    def loaded(self, source: str) -> bool:
        return source in self._models
