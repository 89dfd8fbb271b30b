"""Intervention kinds are declared like knobs (issue 54): one `InterventionKind` with its `Form` gives the fork
command's flag and help, the parse, the check, the one-line refusal and the record. A kind declared here, with no
other edit, is on the CLI's parser and in parse/check; the built-in kinds' flags come from the same table."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from backends import BackendError
from backends.interventions import resolve_plan
from cli.main import build_parser
from visualizer.interventions import (
    KINDS, Intervention, InterventionError, InterventionKind, declare_kind, intervention_problem, parse_branch,
    parse_intervention, parse_spec,
)
from visualizer.knobs import Form


def _parse_swap(arg: str) -> Intervention:
    if not arg.isdigit():
        raise InterventionError(f"--swap takes POS, a canvas position from 0 (got {arg!r})")
    return Intervention("swap", position=int(arg))


SWAP = InterventionKind(
    "swap", "swap POS with its right neighbour on the canvas the fork step denoises",
    Form(parse=_parse_swap, check=lambda iv: "POS 13 is unlucky" if iv.position == 13 else None,
         format=lambda iv: str(iv.position), metavar="POS", verb="swap positions", repeat=True),
    positions=lambda iv: range(iv.position, iv.position + 2), lasts="step")


@pytest.fixture
def swap():
    declare_kind(SWAP)
    yield SWAP
    del KINDS["swap"]


def _fork_parser():
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices["fork"]


def test_a_declared_kind_is_on_the_cli_and_in_parse_and_check(swap):
    fork = _fork_parser()
    flag = next(a for a in fork._actions if "--swap" in a.option_strings)
    assert flag.metavar == "POS" and flag.help.startswith("swap POS with its right neighbour")
    args = build_parser().parse_args(["fork", "run.json", "--at", "1:2", "--forbid", "4=a", "--swap", "3",
                                      "--swap", "7", "--out", "b.json"])
    assert args.interventions == [("forbid", "4=a"), ("swap", "3"), ("swap", "7")]  # in the order given
    iv = parse_intervention("swap", "3")
    assert iv == Intervention("swap", position=3) and iv.spec() == "swap 3" and parse_spec("swap 3") == iv
    with pytest.raises(InterventionError, match=r"^--swap '13': POS 13 is unlucky$"):
        parse_intervention("swap", "13")
    with pytest.raises(InterventionError, match="--swap takes POS"):
        parse_intervention("swap", "x")
    # the canvas check reads the declared positions: the neighbour of the last position is outside
    assert intervention_problem(parse_spec("swap 255"), 256) == (
        "swap 255: position 256 is outside the canvas (positions 0 to 255)")
    assert intervention_problem(parse_spec("swap 254"), 256) is None
    # a branch's record of it loads, and its check runs there too
    good = {"parent": "a" * 64, "at": [1, 2], "interventions": [{"spec": "swap 4", "ids": []}]}
    assert parse_branch(good, 256, 10).parsed() == (Intervention("swap", position=4),)
    with pytest.raises(ValueError, match="unlucky"):
        parse_branch({**good, "interventions": [{"spec": "swap 13", "ids": []}]}, 256, 10)


def test_a_backend_that_lacks_a_kind_refuses_it_saying_what_it_cannot_do(swap):
    backend = SimpleNamespace(name="fake", capabilities=SimpleNamespace(interventions=frozenset({"set", "forbid"})))
    with pytest.raises(BackendError, match=r"^the fake backend cannot swap positions \(swap\): it applies forbid, set$"):
        resolve_plan(backend, None, 1, 1, (parse_intervention("swap", "3"),))


def test_the_built_in_kinds_flags_come_from_the_table():
    fork = _fork_parser()
    flags = {a.option_strings[0][2:]: a for a in fork._actions if a.dest == "interventions"}
    assert list(flags) == list(KINDS) == ["set", "remask", "forbid", "nudge", "topk", "knob"]
    assert all(flags[name].metavar == kind.usage and flags[name].help.startswith(kind.help) for name, kind in KINDS.items())
    assert "swap" not in KINDS  # the fixture's kind is gone after its test


def test_a_kind_is_declared_once_and_its_fields_are_checked():
    with pytest.raises(ValueError, match="already declared"):
        declare_kind(KINDS["set"])
    with pytest.raises(ValueError, match="tokens is"):
        declare_kind(InterventionKind("odd", "odd", KINDS["set"].form, tokens="some"))
    assert "odd" not in KINDS


def test_a_check_refuses_a_hand_made_intervention_too():
    """The app builds Interventions without text; the check is the same one the CLI's parse runs."""
    assert intervention_problem(Intervention("nudge", position=3, text="a", amount=2.0), 256) == (
        "nudge 3=a:2: EPS must be a probability above 0 and below 1 (got 2.0)")
    assert intervention_problem(Intervention("knob", knob="seed", amount=1.0), 256).endswith(
        "cannot change mid-run: a fork changes entropy_bound, t_min, t_max, temperature, refine_threshold, editing_threshold, corrector_k")
    assert intervention_problem(Intervention("remask", position=9, last=3), 256) == (
        "remask 9-3: the last position comes before the first")
