"""What a knob is: one declaration, from which its check, its CLI flag, its widget and its hosted cap are made.

A knob is a field of a frozen settings dataclass (`visualizer.settings.GenerationSettings`) whose
metadata holds its `Knob`; `knob_table(cls)` reads them out, so a knob is written once, beside its
default. A number, a switch or a name is checked by its range or its test; a *structured* knob
(pins, layers, and the intervention kinds to come) carries a `Form`: how its text is parsed (the
CLI flag's value, the app's box), how a value is checked and written back as text, and what a
backend that does not read it refuses. Everything generic (the CLI, the app, hosted mode, a
backend's validation) goes through these, never through a knob's name.

    @dataclass(frozen=True)
    class Settings:
        seed: int = knob(0, "seed", "seeds every random draw", low=0, high=2**32 - 1)
        forbid: tuple = knob((), "forbidden tokens", "...", form=Form(parse=..., check=..., format=..., metavar="POS=TEXT"))

    KNOBS = knob_table(Settings)          # {"seed": Knob, "forbid": Knob}
    KNOBS["forbid"].problem(((3, ""),))   # one line, or None
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from .records import ModelInfo


def is_int(value) -> bool:
    """A whole number that is not a bool (True is an int to Python, never a knob's number)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An int or float that is not a bool or NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def first_problem(problems: list[str]) -> str | None:
    return problems[0] if problems else None


@dataclass(frozen=True)
class Form:
    """How a structured knob is written, read and checked: everything about it but the code that acts on it.

    A value is plain data (tuples, ints, strings: a trace's JSON lists become tuples on load); its text
    is what a person types. A CLI flag with `repeat` may be given several times, each a line of the text
    (`--pin 3=a --pin 9=b` is the app's box "3=a\\n9=b")."""

    parse: Callable[[str], object]  # text -> value; ValueError with one line when the text is not one
    check: Callable[[object], str | None]  # a value from any caller (CLI, API, trace) -> one line, or None when fine
    format: Callable[[object], str]  # value -> the text `parse` reads back (the app's box after a click adds a pin)
    metavar: str  # the CLI's name for one value ("POS=TEXT")
    verb: str  # what a backend that does not read the knob cannot do ("pin tokens"): its one-line refusal
    repeat: bool = False  # the CLI flag is repeatable, one line of the text each time
    hint: str = ""  # the app box's placeholder
    lines: int = 1  # the app box's height
    # What only a model can tell: a value past the model (a layer it lacks) -> one line; and the value made
    # concrete for it ("all" layers -> each layer's number), as the trace records it. None: nothing to do.
    model_problem: Callable[[object, ModelInfo], str | None] | None = None
    for_model: Callable[[object, ModelInfo], object] | None = None


@dataclass(frozen=True)
class Knob:
    """Everything about one settings field but its value. Its name, type, whether it may be None and its
    default come from the field itself (`knob_table` fills `name`, `annotation` and `field_default`)."""

    label: str  # lower case, as in messages ("max new tokens"); the app's widget capitalizes it
    help: str  # one line: the CLI's --help, the widget's info, docs/running.md's table
    low: float | None = None  # the smallest value allowed (None: no check beyond the type)
    high: float | None = None  # the largest value allowed
    above_low: bool = False  # True: `low` itself is excluded (a bound of 0 nats accepts nothing)
    unit: str = ""  # said after the range in messages ("nats")
    text_check: Callable[[object], bool] | None = None  # a text knob's test of a value (the sampler's name)
    shown_default: object = None  # the value a run uses when the model's config has none (docs; the widget
    #                               before a model loads); None: the field's own default
    every_backend: bool = False  # every backend reads it whatever the sampler (`backends.base.COMMON_KNOBS`)
    flag: str | None = None  # the CLI flag where it is not --name-with-dashes (old command lines; --no-X for a
    #                          switch that is on by default)
    slider: tuple[float, float, float] | None = None  # the app shows (min, max, step) as a slider; None: a number box
    in_app: bool = True  # False: the app has no widget for it (compiled: ZeroGPU forbids torch.compile)
    hosted_cap: tuple[str, int] | None = None  # hosted mode caps it: (environment variable, default cap); a
    #                                            structured knob's cap counts what it asks for (`count`)
    form: Form | None = None  # a structured knob's text, check and refusal; None: a number, switch or name
    refused_unread: str = ""  # a switch that must never be dropped silently: what a backend that does not read
    #                           it cannot do ("record the KL to the final step"), refused in one line
    kept_when_off: bool = True  # False: `to_dict` leaves it out while off, so a run without it writes the trace it
    #                             always wrote (a newer recording option)
    name: str = ""  # the field's name (filled by `knob_table`): the app's API parameter, the CLI flag's words
    annotation: str = ""  # the field's annotation, as written ("int | None")
    field_default: object = None  # the field's own default

    @property
    def refusal_verb(self) -> str:
        """What a backend that does not read this knob cannot do, when asking for it there is refused ("" when a
        value it does not read is recorded as None instead)."""
        return self.form.verb if self.form is not None else self.refused_unread

    @property
    def kind(self) -> type:
        """int, float, bool or str: from the field's annotation ("int | None" is int); object for a structured knob."""
        return {"int": int, "float": float, "bool": bool, "str": str}.get(self.annotation.split(" | ")[0], object)

    @property
    def optional(self) -> bool:
        """None is a value (the model decides)."""
        return self.annotation.endswith("| None")

    @property
    def default(self):
        """The value a run uses when nobody sets it, as the docs and the widgets show it."""
        return self.shown_default if self.shown_default is not None else self.field_default

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def count(self, value) -> float:
        """How many a structured knob's value asks for, as hosted mode caps it: from its text or its value;
        infinitely many where it is not a list ("all" layers); 0 for nothing, and for a text that does not
        parse (the run's own check gives its message)."""
        if isinstance(value, str):
            try:
                value = self.form.parse(value)
            except ValueError:
                return 0
        if value is None:
            return 0
        return len(value) if isinstance(value, (tuple, list)) else math.inf

    def problem(self, value) -> str | None:
        """One line when `value` is not a value of this knob; None when it is."""
        if self.form is not None:
            return self.form.check(value)
        if value is None and self.optional:
            return None
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{self.label} must be true or false (got {value!r})"
        if self.kind is str:
            fits = isinstance(value, str) and (self.text_check is None or self.text_check(value))
            return None if fits else f"{self.label} must be a name such as {self.default!r} (got {value!r})"
        fits = is_int(value) if self.kind is int else is_number(value)
        if fits and self.low is not None:
            fits = value > self.low if self.above_low else value >= self.low
        if fits and self.high is not None:
            fits = value <= self.high
        return None if fits else f"{self.label} must be {self.range_text()} (got {value!r})"

    def range_text(self) -> str:
        """"a whole number from 1 to 8192", "a number above 0 and at most 1000 nats"."""
        what = "a whole number" if self.kind is int else "a number"
        low, high = _plain(self.low), _plain(self.high)
        unit = f" {self.unit}" if self.unit else ""
        if self.above_low:
            return f"{what} above {low} and at most {high}{unit}"
        return f"{what} from {low} to {high}{unit}"


def knob(default, label: str, help: str, **declaration):
    """A settings field with its `Knob` in the field's metadata: the one declaration of a knob."""
    return dataclasses.field(default=default, metadata={"knob": Knob(label, help, **declaration)})


def knob_table(cls) -> dict[str, Knob]:
    """{name: Knob} of a settings dataclass, in field order; every field must declare one."""
    bare = [f.name for f in dataclasses.fields(cls) if "knob" not in f.metadata]
    if bare:
        raise TypeError(f"{cls.__name__}: every field is a knob, declared with knob(...); {', '.join(bare)} is not")
    return {
        f.name: dataclasses.replace(f.metadata["knob"], name=f.name, annotation=str(f.type), field_default=f.default)
        for f in dataclasses.fields(cls)
    }


def plain_data(value):
    """A structured value as JSON holds it: tuples as lists, all the way down."""
    return [plain_data(v) for v in value] if isinstance(value, (tuple, list)) else value


def frozen_data(value):
    """A structured value from JSON: lists as tuples, all the way down (so a loaded run equals the live one)."""
    return tuple(frozen_data(v) for v in value) if isinstance(value, (tuple, list)) else value


def _plain(number) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)
