"""Trace: the whole record of one run, serializable to JSON and back with nothing lost.

A trace is built by appending the records a backend yields, and is all the app, the metrics and
the exporters ever need; a trace loaded from disk replays exactly like the live run.

    trace = Trace(model=backend.info, prompt="Why is the sky blue?")
    for record in backend.generate(prompt, settings):
        trace.append(record)
    trace.save("run.json")
    same = Trace.load("run.json")          # validates everything; raises TraceError with a message

The file format, its limits and its validation live in `visualizer.trace_format`.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from .derived import Derived
from .interventions import Branch
from .records import BlockRecord, ModelInfo, Record, RunEnd, RunStart, StepRecord
from .samplers import AcceptRule, legacy_rule
from .settings import GenerationSettings
from .warm_start import WarmStart
from .trace_format import TraceError, displayed_ids, settings_of_run, parse_trace, parse_trace_json, read_trace_file, trace_to_dict

__all__ = ["Trace", "TraceError"]


@dataclass
class Trace:
    model: ModelInfo
    prompt: str
    start: RunStart | None = None
    steps: list[StepRecord] = field(default_factory=list)
    blocks: list[BlockRecord] = field(default_factory=list)
    end: RunEnd | None = None
    pieces: dict[int, str] = field(default_factory=dict)
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    branch: Branch | None = None  # a fork of another run: its parent, fork point and interventions (docs/lab.md)
    warm_start: WarmStart | None = None  # what the run's first canvas held instead of noise (docs/lab.md)
    # values the metrics compute from the records, kept while the trace lives (not saved, not compared)
    derived: Derived = field(default_factory=Derived, init=False, repr=False, compare=False)

    # ---- recording -------------------------------------------------------------------
    def append(self, record: Record) -> None:
        """Add the next record of a run, keeping the piece table up to date."""
        if isinstance(record, RunStart):
            if self.start is not None:
                raise TraceError("a trace holds one run: RunStart came twice")
            self.start = record
        elif self.start is None:
            raise TraceError(f"{type(record).__name__} before RunStart")
        elif self.end is not None:
            raise TraceError(f"{type(record).__name__} after RunEnd")
        elif isinstance(record, StepRecord):
            self.steps.append(record)
        elif isinstance(record, BlockRecord):
            self.blocks.append(record)
        elif isinstance(record, RunEnd):
            self.end = record
        else:
            raise TraceError(f"not a record: {type(record).__name__}")
        self.pieces.update(getattr(record, "new_pieces", {}) or {})

    # ---- convenient views ------------------------------------------------------------
    @property
    def settings(self) -> GenerationSettings:
        return settings_of_run(self.start.settings) if self.start else GenerationSettings()

    @property
    def sampler_rule(self) -> AcceptRule:
        """How this run's sampler accepted (recorded by the backend, or derived for a version-2 trace)."""
        if self.start is not None and self.start.sampler_rule is not None:
            return AcceptRule.from_dict(self.start.sampler_rule)
        rule = legacy_rule(self.model.backend, self.settings.sampler)
        if rule is None:
            raise TraceError(f"this trace's sampler {self.settings.sampler!r} did not record its accept rule")
        return rule

    @property
    def canvas_length(self) -> int:
        return self.model.canvas_length

    @property
    def max_blocks(self) -> int:
        return self.start.max_blocks if self.start else 0

    @property
    def finished(self) -> bool:
        return self.end is not None

    def block_steps(self, block: int) -> list[StepRecord]:
        return [s for s in self.steps if s.block == block]

    def piece(self, token_id: int) -> str:
        return self.pieces.get(int(token_id), f"<{int(token_id)}>")

    # ---- serialization (the format is in trace_format) ---------------------------------
    def to_dict(self) -> dict:
        return trace_to_dict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data) -> "Trace":
        """Build a trace from parsed JSON, validating everything (raises TraceError)."""
        return cls(**parse_trace(data)._asdict())

    @classmethod
    def from_json(cls, text: str | bytes) -> "Trace":
        return cls(**parse_trace_json(text)._asdict())

    @classmethod
    def load(cls, path) -> "Trace":
        return cls(**read_trace_file(path)._asdict())

    def displayed_ids(self) -> set[int]:
        """Every id the renderers may show: these must all have a piece."""
        return displayed_ids(self.start, self.steps, self.blocks)
