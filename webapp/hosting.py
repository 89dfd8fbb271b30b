"""Hosted mode: what a public deployment (a Hugging Face Space) lets a visitor do.

    hosting = Hosting.from_environment(flag=args.hosted)    # on by itself where SPACE_ID is set
    hosting.choices                                         # the model picker's entries
    hosting.model_problem("/etc")                           # "Hosted mode: pick a model from the list ..."

Hosted mode is on with `--hosted`, with DV_HOSTED=1, or wherever SPACE_ID is set (every Space
sets it).  There a visitor picks from an allowlist only (the built-in model, the random model,
and the real checkpoint where this hardware can run it; the Space owner adds more with
DV_EXTRA_MODELS) and runs under caps (tokens, steps per block, upload size, frames per export).
Outside hosted mode the picker also takes any hub id or folder, as on a trusted desktop.

Every request for a generation is checked here *before* it joins the shared model queue
(`generate_validator`, run by Gradio's event validator): an unknown id, a path, or a value over a
cap is answered at once with one line and never waits for, or holds up, anyone's run.

Policy only: running a generation (here or on ZeroGPU) is `app_run.py`'s job.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import gradio as gr
import numpy as np

from backends import (
    REAL_CHECKPOINT,
    REAL_CHECKPOINT_MLX,
    ModelChoice,
    backend_for_source,
    model_choices,
    real_checkpoint_fits_here,
)
from backends.known import on_zero_gpu
from backends.lookup import source_problem
from visualizer.settings import KNOBS
from visualizer.states import frame_refs
from visualizer.trace import Trace
from visualizer.trace_format import MAX_TRACE_BYTES

from .knob_widgets import widget_problem

HOSTED_ENV = "DV_HOSTED"
EXTRA_MODELS_ENV = "DV_EXTRA_MODELS"  # "label=source, source, ...": the Space owner's additions


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise SystemExit(f"error: {name} must be a whole number (got {value!r})") from None
    if number < 1:
        raise SystemExit(f"error: {name} must be at least 1 (got {number})")
    return number


# ---- caps --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    """What one request may ask for; None (or a knob missing from `knob_caps`) is "no cap beyond the
    library's own limits"."""

    knob_caps: dict[str, int] = field(default_factory=dict)  # the knob table's `hosted_cap`s (visualizer.settings)
    max_prompt_chars: int | None = None  # checked before the prompt is tokenized (a 1 MB prompt took 4.8 s to tokenize)
    max_upload_mb: int = MAX_TRACE_BYTES // 2**20  # Gradio refuses bigger uploads before reading them ("mb" is MiB there)
    max_export_frames: int | None = None
    max_branches: int | None = None  # forks ("Fork here") a session may hold: each keeps a whole trace in memory

    @classmethod
    def hosted(cls) -> "Limits":
        """The hosted caps, each changeable by the Space owner through an environment variable."""
        return cls(
            knob_caps={k.name: env_int(*k.hosted_cap) for k in KNOBS.values() if k.hosted_cap},
            max_prompt_chars=env_int("DV_MAX_PROMPT_CHARS", 8000),
            max_upload_mb=env_int("DV_MAX_UPLOAD_MB", 20),
            max_export_frames=env_int("DV_MAX_EXPORT_FRAMES", 600),
            max_branches=env_int("DV_MAX_BRANCHES", 8),
        )

    @property
    def max_file_size(self) -> str:
        """For `launch(max_file_size=...)`: Gradio's own upload limit."""
        return f"{self.max_upload_mb}mb"

    def knob_problem(self, name: str, value) -> str | None:
        """One line when a knob's value is over this server's cap for it: a number's value, or how many
        a structured knob asks for (layers, pins: its text box or its value, `Knob.count`)."""
        cap, knob = self.knob_caps.get(name), KNOBS[name]
        if cap is None:
            return None
        if knob.kind is bool:  # a switch capped at 0: this server does not do it
            return f"This server does not {knob.refusal_verb or 'take ' + knob.label}: a self-hosted copy does." if value and not cap else None
        if knob.form is None:
            return f"This server caps {knob.label} at {cap} (asked: {value})." if _number(value) > cap else None
        if isinstance(value, str) and self.max_prompt_chars is not None and len(value) > self.max_prompt_chars:
            return f"This server takes {knob.label} of up to {self.max_prompt_chars:,} characters (these have {len(value):,})."
        if knob.count(value) > cap:
            return f"This server takes at most {cap} {knob.label} a run (asked: {str(value)[:40]!r})."
        return None

    def prompt_problem(self, prompt) -> str | None:
        if self.max_prompt_chars is not None and isinstance(prompt, str) and len(prompt) > self.max_prompt_chars:
            return (f"This server takes prompts of up to {self.max_prompt_chars:,} characters (this one has {len(prompt):,}); "
                    "a prompt must also fit the model's context in tokens.")
        return None

    def export_problem(self, trace: Trace, blocks: tuple[int, ...] | None) -> str | None:
        """A message when exporting these blocks of the trace would encode more frames than allowed."""
        if self.max_export_frames is None:
            return None
        frames = sum(1 for ref in frame_refs(trace) if blocks is None or ref.block in blocks)
        if frames <= self.max_export_frames:
            return None
        return (
            f"This server exports at most {self.max_export_frames} frames; the run has {frames}. "
            "Pick fewer blocks (e.g. 1,2)."
        )


def hosted_note(limits: Limits) -> str:
    """One line under the app's title saying what this server allows."""
    caps = [
        (limits.max_prompt_chars, "prompts up to {:,} characters"),
        *((cap, f"{KNOBS[name].label} up to {{}}") for name, cap in limits.knob_caps.items() if KNOBS[name].kind is not bool),
        (limits.max_upload_mb, "trace uploads up to {} MB"),
        (limits.max_export_frames, "exports up to {} frames"),
        (limits.max_branches, "up to {} branches a session"),
    ]
    allowed = ", ".join(["the models in the list"] + [text.format(cap) for cap, text in caps if cap is not None])
    switched_off = [KNOBS[name].label for name, cap in limits.knob_caps.items() if KNOBS[name].kind is bool and not cap]
    if switched_off:  # a switch capped at 0 (`Limits.knob_problem`)
        allowed += "; no " + ", no ".join(switched_off)
    return f"*Public server: {allowed}. Run it on your own machine for more.*"


def _number(value) -> float:
    """A knob value as a number for comparing with a cap; anything else compares as 0 (the
    generation handler gives the exact message for it)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if np.isfinite(number) else float("inf") if number > 0 else 0.0


# ---- the allowlist -----------------------------------------------------------------------------
def real_checkpoint_runs_here() -> bool:
    """Apple silicon with MLX, a GPU with room for the bf16 weights, or a ZeroGPU slice (70 GB)."""
    return real_checkpoint_fits_here() or on_zero_gpu()


def extra_models(text: str | None = None) -> list[ModelChoice]:
    """The Space owner's additions: comma-separated `source` or `label=source` entries."""
    text = os.environ.get(EXTRA_MODELS_ENV, "") if text is None else text
    extras = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        label, _, source = entry.rpartition("=")
        source = source.strip()
        backend = backend_for_source(source)
        extras.append(ModelChoice(label.strip() or source, source, backend, False))
    return extras


def hosted_choices() -> list[ModelChoice]:
    """The allowlist, the preselected model first."""
    allowed = []
    for choice in model_choices():
        real = choice.source in (REAL_CHECKPOINT, REAL_CHECKPOINT_MLX)
        if not real or real_checkpoint_runs_here():
            allowed.append(choice)
    known = {c.source for c in allowed}
    return allowed + [c for c in extra_models() if c.source not in known]


@dataclass(frozen=True)
class Hosting:
    hosted: bool
    limits: Limits = field(default_factory=Limits)
    choices: tuple[ModelChoice, ...] = ()
    only_listed: bool = False  # the list is all this server runs, also outside hosted mode (a sharded model)

    @property
    def closed(self) -> bool:
        """Whether the picker takes only the list (hosted mode, or a server of one model)."""
        return self.hosted or self.only_listed

    def serving_only(self, choice: ModelChoice) -> "Hosting":
        """This mode (its caps) for a server that runs `choice` and nothing else: a sharded model, which
        every rank loaded at start-up and runs in lockstep; another model would load on rank 0 alone."""
        return replace(self, choices=(choice,), only_listed=True)

    @classmethod
    def from_environment(cls, flag: bool = False) -> "Hosting":
        hosted = flag or env_flag(HOSTED_ENV) or bool(os.environ.get("SPACE_ID"))
        if hosted:
            return cls(True, Limits.hosted(), tuple(hosted_choices()))
        return cls(False, Limits(), tuple(model_choices() + extra_models()))

    def choice_for(self, label_or_source) -> ModelChoice | None:
        """The picker entry with this label or source; outside hosted mode any other text is taken
        as a hub id or folder; in hosted mode (or on a server of one model) it is None."""
        if not isinstance(label_or_source, str):
            return None
        for choice in self.choices:
            if label_or_source in (choice.label, choice.source):
                return choice
        if self.closed or not label_or_source.strip():
            return None
        return ModelChoice(label_or_source, label_or_source.strip(), "auto", False)

    def model_problem(self, label_or_source, *, loaded: Callable[[str], bool] = lambda source: False) -> str | None:
        """One line when the model cannot be used here; None when it can (answered in under 2 s).
        `loaded(source)` says whether it is in memory already (then nothing needs looking up)."""
        choice = self.choice_for(label_or_source)
        if choice is None:
            shown = str(label_or_source)[:80] if label_or_source else "nothing"
            return f"This server runs only the models in its list (got {shown!r}): pick one of them."
        if choice.builtin or loaded(choice.source):
            return None  # built here (the random model is built on first use) or already in memory
        return source_problem(choice.source)


# ---- checks before the model queue ----------------------------------------------------------------
def generate_validator(hosting: Hosting, knob_names: list[str], *, register_session, loaded: Callable[[str], bool],
                       model_judges: Callable[..., tuple[str, str] | None] = lambda prompt, model, knobs: None):
    """Gradio's event validator for the generate event, whose inputs are (prompt, model, session)
    and the knobs by name (`inputs_kwargs`, in `knob_names`' order): it runs outside the queue, with
    the same inputs as the handler, and refuses a request before it can wait for the model.  It
    also registers the session for release (`sessions.py`): an API client loads no page.
    Gradio pairs each returned `gr.validate` with an input by position, the keyword inputs last.

    The event runs with `preprocess=False`, so that this is the only check before the queue: Gradio's own checks
    of a dropdown's choices and a slider's range would answer an API client with a bare "400 Bad Request" (their
    text is only in the response body, which gradio_client does not read), where a failed `gr.validate` reaches
    it as a ValidationError carrying our one line.  Every value is therefore checked here: the model against
    the list, each knob against its declaration (`widget_problem`) and this server's caps.  When all of them pass,
    `model_judges(prompt, model, knobs)` says what only the loaded model can judge: (the input's name, one line) or None.
    """

    def validate(prompt, model, session, request: gr.Request, **knobs):
        register_session(session, request)
        problems = [hosting.limits.prompt_problem(prompt), hosting.model_problem(model, loaded=loaded), None]
        problems += [widget_problem(KNOBS[name], knobs.get(name)) or hosting.limits.knob_problem(name, knobs.get(name))
                     for name in knob_names]
        if not any(problems):
            judged = model_judges(prompt, model, knobs)
            if judged is not None:
                name, problem = judged
                inputs = ["prompt", "model", "session", *knob_names]
                problems[inputs.index(name) if name in inputs else 0] = problem  # at the input that caused it
        return [gr.validate(problem is None, problem or "") for problem in problems]

    return validate
