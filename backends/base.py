"""The one small interface every backend implements.

A backend loads a model once, says what it is, and runs a generation as a generator of records
(`visualizer.records`): RunStart, a StepRecord per denoising step, a BlockRecord per finished
block, RunEnd.  It checks the `stop` event between steps and then ends the run with
RunEnd(finish_reason="cancelled"), so everything recorded so far is kept.

    backend = load_backend("assets/models/diffusiongemma-tiny-demo")   # backends/__init__.py
    print(backend.info)                                                 # ModelInfo
    for record in backend.generate("Write a haiku", GenerationSettings(seed=0)):
        ...

Errors a user can cause (a model that does not load, a prompt that is too long, out of memory)
are raised as `BackendError` with a message meant for the UI and the CLI.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator

from visualizer.records import ModelInfo, Record
from visualizer.settings import GenerationSettings


class BackendError(RuntimeError):
    """A problem the user can act on; the message is shown as is."""


class BackendUnavailable(BackendError):
    """The backend's libraries are not installed on this machine."""


class Backend(ABC):
    name: str = ""  # "transformers" or "mlx"
    info: ModelInfo

    @abstractmethod
    def default_settings(self) -> GenerationSettings:
        """The checkpoint's own generation defaults, every knob filled in."""

    @abstractmethod
    def prompt_ids(self, prompt: str) -> list[int]:
        """The prompt as the model sees it: one user turn through the chat template."""

    @abstractmethod
    def generate(
        self, prompt: str, settings: GenerationSettings, stop: threading.Event | None = None
    ) -> Iterator[Record]:
        """Run one generation, yielding records as the model produces them."""

    def resolve(self, settings: GenerationSettings) -> GenerationSettings:
        """Fill every None knob from the checkpoint's defaults."""
        defaults = self.default_settings()
        filled = {k: (v if v is not None else getattr(defaults, k)) for k, v in settings.to_dict().items()}
        return GenerationSettings(**filled)

    def check(self, prompt: str, settings: GenerationSettings) -> list[int]:
        """Validate a request before any work; returns the prompt ids or raises BackendError."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise BackendError("The prompt is empty: type something for the model to answer.")
        problems = settings.problems()
        if problems:
            raise BackendError("; ".join(problems))
        ids = self.prompt_ids(prompt)
        problems = self.resolve(settings).problems(
            max_context=self.info.max_context, prompt_tokens=len(ids), canvas_length=self.info.canvas_length
        )
        if problems:
            raise BackendError("; ".join(problems))
        return ids

    def close(self) -> None:
        """Free the model's memory; the backend cannot be used afterwards."""
