"""Interventions: the declared kinds of edit a fork applies to a run from one step on (issue 55, docs/lab.md).

    iv = parse_intervention("forbid", "11=moon")      # Intervention(kind="forbid", position=11, text="moon")
    problem = intervention_problem(iv, canvas_length=256)   # None, or one line
    iv.spec()                                          # "forbid 11=moon": what a branch's trace records

Each kind is one declaration (`KINDS`, added by `declare_kind`), as a knob is: its argument's `Form` (parse, check,
record, metavar, what a backend that lacks it cannot do), its help, its tokens and how long it lasts; the fork
command's flags are made from the table. A backend says which kinds it applies (`backends.base.Capabilities.interventions`).
Positions count from 0, as pins do; a fork point's block and step count from 1, as the app's captions do.

A branch (`Branch`) is a trace's optional top-level field: the parent's content hash, the fork point and
the interventions with the token ids their texts became, so a branch replays without its parent.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from .knobs import Form

# The knobs a fork may change from its step on: the ones some sampler's step reads afresh (the temperature schedule's
# ends, the entropy bound; diffusers' temperature and block refinement's thresholds); the others (the step budget, the
# seed, the sampler) fix the run before its first step. Which a sampler reads on a backend is its
# `SamplerSpec.fork_knobs`; the backend refuses the rest (`backends.interventions.knob_problem`).
FORK_KNOBS = ("entropy_bound", "t_min", "t_max", "temperature", "refine_threshold", "editing_threshold", "corrector_k")


class InterventionError(ValueError):
    """An intervention that does not parse or does not fit the run: the message is one line."""


@dataclass(frozen=True)
class Intervention:
    """One edit of a run, from the fork point on. Only the fields its kind reads are set."""

    kind: str  # a key of KINDS
    position: int | None = None  # canvas position (from 0) of set, forbid, nudge; remask's first
    last: int | None = None  # remask's last position (inclusive); the same as `position` for one
    text: str | None = None  # set's, forbid's and nudge's text
    amount: float | None = None  # nudge's EPS, a knob's new value
    k: int | None = None  # topk's K
    knob: str | None = None  # knob's name

    def spec(self) -> str:
        """The intervention as the command line writes it ("nudge 4=sea:0.1"): what a trace records."""
        return f"{self.kind} {KINDS[self.kind].unparse(self)}"


@dataclass(frozen=True)
class InterventionKind:
    """One kind of intervention, declared once, as a knob is (`visualizer.knobs.Form`): its argument's form (parse,
    check, format back for the record, the CLI's metavar), its help, how its text becomes tokens and how long it
    lasts. `cli/fork.py` makes `--NAME` from it; `parse_intervention` and `intervention_problem` read nothing else;
    a backend lists the names it applies (`backends.base.Capabilities.interventions`) and refuses the rest saying
    `form.verb`. A new kind is one `declare_kind(...)` and the backend code that applies it."""

    name: str  # the flag (--NAME) and the first word of the record ("forbid 11=moon")
    help: str  # one line: what it does from the fork point on (the CLI's --help)
    form: Form  # parse: arg -> Intervention; check: Intervention -> one line or None; format: Intervention -> arg
    positions: Callable[[Intervention], range] = lambda iv: range(0)  # the canvas positions it touches
    tokens: str = ""  # "" no text; "one": its text must be one token (a token's probability); "many": any number
    lasts: str = "block"  # "step" (the fork step only), "block" (to the block's end) or "run" (to the run's end)

    @property
    def usage(self) -> str:
        """The argument's shape, as --help and refusals show it ("POS=TEXT")."""
        return self.form.metavar

    def parse(self, arg: str) -> Intervention:
        """The argument -> an Intervention, checked (InterventionError: one line)."""
        iv = self.form.parse(arg)
        problem = self.form.check(iv)
        if problem:
            raise InterventionError(f"--{self.name} {arg!r}: {problem}")
        return iv

    def unparse(self, iv: Intervention) -> str:
        return self.form.format(iv)


Kind = InterventionKind  # the name the first version of this table used


def _position(text: str, flag: str, usage: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise InterventionError(f"--{flag} takes {usage}, a canvas position from 0 (got {text!r})")
    return int(text)


def _text_at(kind: str, usage: str):
    """The parse of POS=TEXT for `kind`."""

    def parse(arg: str) -> Intervention:
        position, sep, text = arg.partition("=")
        if not sep:
            raise InterventionError(f"--{kind} takes {usage} (got {arg!r})")
        if not text:
            raise InterventionError(f"--{kind} {arg!r} has an empty text: give the text for position {position.strip()}")
        return Intervention(kind, position=_position(position, kind, usage), text=text)

    return parse


def _parse_remask(arg: str) -> Intervention:
    first, sep, last = arg.partition("-")
    start = _position(first, "remask", "POS or POS-POS")
    return Intervention("remask", position=start, last=_position(last, "remask", "POS or POS-POS") if sep else start)


def _parse_nudge(arg: str) -> Intervention:
    head, sep, eps = arg.rpartition(":")
    if not sep:
        raise InterventionError(f"--nudge takes POS=TEXT:EPS, EPS the probability moved onto TEXT (got {arg!r})")
    iv = _text_at("nudge", "POS=TEXT:EPS")(head)
    try:
        amount = float(eps)
    except ValueError:
        amount = math.nan  # refused by the check, which names the range
    return Intervention("nudge", position=iv.position, text=iv.text, amount=amount)


def _parse_topk(arg: str) -> Intervention:
    if not arg.strip().isdigit():
        raise InterventionError(f"--topk takes K, a whole number from 1 (got {arg!r})")
    return Intervention("topk", k=int(arg))


def _parse_knob(arg: str) -> Intervention:
    name, sep, value = arg.partition("=")
    if not sep or not value.strip():
        raise InterventionError(f"--knob takes NAME=VALUE (got {arg!r})")
    from .settings import KNOBS

    known = KNOBS.get(name.strip())
    try:  # a whole-number knob (corrector_k) takes its value as an int, as its declaration checks it
        number = int(value) if known is not None and known.kind is int and value.strip().isdigit() else float(value)
    except ValueError:
        number = math.nan  # refused by the check, which names the knob's range
    return Intervention("knob", knob=name.strip(), amount=number)


def _check_knob(iv: Intervention) -> str | None:
    from .settings import KNOBS

    if iv.knob not in FORK_KNOBS:
        return f"{iv.knob!r} cannot change mid-run: a fork changes {', '.join(FORK_KNOBS)}"
    return KNOBS[iv.knob].problem(iv.amount)  # NaN fails: "entropy bound must be a number above 0 ..."


def _number(value: float) -> str:
    """A number as short as it can be written and still read back exactly (the record must be the value applied)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _one(iv: Intervention) -> range:
    return range(iv.position, iv.position + 1)


def _fine(iv: Intervention) -> None:
    return None


def _text_form(kind: str, verb: str) -> Form:
    return Form(parse=_text_at(kind, "POS=TEXT"), check=_fine, format=lambda iv: f"{iv.position}={iv.text}",
                metavar="POS=TEXT", verb=verb, repeat=True)


KINDS: dict[str, InterventionKind] = {}


def declare_kind(kind: InterventionKind) -> InterventionKind:
    """Add a kind to the table (`KINDS`): the fork command's flag, the parse, the check and the record follow.
    A name already declared is refused (a kind is declared once)."""
    if kind.name in KINDS:
        raise ValueError(f"intervention kind {kind.name!r} is already declared")
    if kind.tokens not in ("", "one", "many") or kind.lasts not in ("step", "block", "run"):
        raise ValueError(f"intervention kind {kind.name!r}: tokens is '', 'one' or 'many'; lasts step, block or run")
    KINDS[kind.name] = kind
    return kind


for _kind in (
    InterventionKind("set", "place TEXT's tokens from position POS at the fork step and keep them accepted to the "
                     "block's end (pins that start there)", _text_form("set", "set tokens mid-run"),
                     _one, tokens="many"),  # the whole span is known once the text is tokenized (backends.interventions)
    InterventionKind("remask", "turn these positions back to noise on the canvas the fork step denoises",
                     Form(parse=_parse_remask,
                          check=lambda iv: "the last position comes before the first" if iv.last < iv.position else None,
                          format=lambda iv: f"{iv.position}" if iv.last == iv.position else f"{iv.position}-{iv.last}",
                          metavar="POS or POS-POS", verb="turn positions back to noise", repeat=True),
                     lambda iv: range(iv.position, iv.last + 1), lasts="step"),
    InterventionKind("forbid", "TEXT (one token) is never sampled, taken as the argmax or accepted at POS, nor "
                     "conditioned on, from the fork step to the block's end", _text_form("forbid", "forbid a token"),
                     _one, tokens="one"),
    InterventionKind("nudge", "move EPS of probability onto TEXT (one token) at POS in the distribution the next "
                     "step is conditioned on (self-conditioning), from the fork step to the block's end",
                     Form(parse=_parse_nudge,
                          check=lambda iv: None if 0 < iv.amount < 1 else  # NaN fails too
                          f"EPS must be a probability above 0 and below 1 (got {iv.amount!r})",
                          format=lambda iv: f"{iv.position}={iv.text}:{_number(iv.amount)}",
                          metavar="POS=TEXT:EPS", verb="nudge the self-conditioning", repeat=True),
                     _one, tokens="one"),
    InterventionKind("topk", "truncate the distribution the next step is conditioned on to its top K at every "
                     "position, from the fork step to the run's end",
                     Form(parse=_parse_topk, check=lambda iv: None if iv.k >= 1 else f"K must be a whole number from 1 "
                          f"(got {iv.k})", format=lambda iv: str(iv.k), metavar="K",
                          verb="truncate the self-conditioning", repeat=True), lasts="run"),
    InterventionKind("knob", f"change a sampler knob from the fork step to the run's end ({', '.join(FORK_KNOBS)})",
                     Form(parse=_parse_knob, check=_check_knob, format=lambda iv: f"{iv.knob}={_number(iv.amount)}",
                          metavar="NAME=VALUE", verb="change a knob mid-run", repeat=True), lasts="run"),
):
    declare_kind(_kind)


def parse_intervention(kind: str, arg: str) -> Intervention:
    """One intervention of a declared kind from its argument, checked (InterventionError: one line)."""
    if kind not in KINDS:
        raise InterventionError(f"unknown intervention {kind!r}: the kinds are {', '.join(KINDS)}")
    return KINDS[kind].parse(arg)


def parse_spec(spec: str) -> Intervention:
    """An intervention from its recorded form ("set 4=sea"): `Intervention.spec`'s inverse."""
    kind, _, arg = spec.partition(" ")
    return parse_intervention(kind, arg)


def intervention_problem(iv: Intervention, canvas_length: int) -> str | None:
    """One line when `iv` is not a value of its kind or does not fit a canvas of `canvas_length` positions."""
    declared = KINDS.get(iv.kind)
    if declared is None:
        return f"unknown intervention {iv.kind!r}: the kinds are {', '.join(KINDS)}"
    problem = declared.form.check(iv)
    if problem:
        return f"{iv.spec()}: {problem}"
    touched = declared.positions(iv)
    if touched and touched[-1] >= canvas_length:
        return f"{iv.spec()}: position {touched[-1]} is outside the canvas (positions 0 to {canvas_length - 1})"
    return None


def plan_problems(interventions: tuple[Intervention, ...], canvas_length: int) -> list[str]:
    """Every intervention's own problem, then the ones between them (a position set and forbidden at once)."""
    problems = [p for iv in interventions if (p := intervention_problem(iv, canvas_length))]
    kinds = {}
    for iv in interventions:
        if iv.kind in ("set", "forbid"):
            kinds.setdefault(iv.position, set()).add(iv.kind)
    both = sorted(p for p, seen in kinds.items() if len(seen) == 2)
    if both:
        problems.append(f"position {both[0]} is both set and forbidden: give it one of the two")
    return problems


# ---- a branch, as its trace records it ----------------------------------------------------------------------
@dataclass(frozen=True)
class Branch:
    """What makes a trace a branch of another: recorded as the trace's top-level "branch"."""

    parent: str  # sha256 (hex) of the parent trace file's bytes (`content_hash`)
    block: int  # the fork point, counted from 1 as the app's captions count: block `block`, step `step`
    step: int
    interventions: tuple[str, ...]  # each Intervention.spec(), in the order given
    token_ids: tuple[tuple[int, ...], ...]  # the ids each text became (set, forbid, nudge); () for the others

    def to_dict(self) -> dict:
        return {"parent": self.parent, "at": [self.block, self.step], "interventions": [
            {"spec": spec, "ids": list(ids)} for spec, ids in zip(self.interventions, self.token_ids)]}

    def parsed(self) -> tuple[Intervention, ...]:
        return tuple(parse_spec(spec) for spec in self.interventions)


def content_hash(data: bytes) -> str:
    """The parent's identity in a branch: sha256 of its trace file's bytes."""
    return hashlib.sha256(data).hexdigest()


def parse_branch(raw, canvas_length: int, vocab_size: int) -> Branch | None:
    """A trace's "branch" field validated (ValueError with one line); None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"parent", "at", "interventions"}:
        raise ValueError('"branch" must be an object with "parent", "at" and "interventions"')
    parent, at, listed = raw["parent"], raw["at"], raw["interventions"]
    if not (isinstance(parent, str) and len(parent) == 64 and all(c in "0123456789abcdef" for c in parent)):
        raise ValueError("branch.parent must be a sha256 in hex")
    if not (isinstance(at, list) and len(at) == 2 and all(type(v) is int and v >= 1 for v in at)):
        raise ValueError("branch.at must be [block, step], each counted from 1")
    if not isinstance(listed, list) or len(listed) > 4 * canvas_length:
        raise ValueError("branch.interventions must be a list")
    specs, ids = [], []
    for i, item in enumerate(listed):
        if not (isinstance(item, dict) and set(item) == {"spec", "ids"} and isinstance(item["spec"], str)
                and isinstance(item["ids"], list) and len(item["ids"]) <= canvas_length
                and all(type(t) is int and 0 <= t < vocab_size for t in item["ids"])):
            raise ValueError(f"branch.interventions[{i}] must be {{spec, ids}} with ids below the vocabulary size")
        try:
            problem = intervention_problem(parse_spec(item["spec"]), canvas_length)
        except InterventionError as exc:
            problem = str(exc)
        if problem:
            raise ValueError(f"branch.interventions[{i}]: {problem}")
        specs.append(item["spec"])
        ids.append(tuple(item["ids"]))
    return Branch(parent, at[0], at[1], tuple(specs), tuple(ids))
