"""The knob table (visualizer.settings.KNOBS): every setting declared once, and what is made from it."""

from __future__ import annotations

import argparse
import dataclasses
import math

import pytest

from visualizer.settings import KNOBS, GenerationSettings


def test_every_setting_is_declared_once_and_every_declaration_is_a_setting():
    fields = [f.name for f in dataclasses.fields(GenerationSettings)]
    assert list(KNOBS) == fields  # the same names, in the same order (the CLI's and the app's order)
    for knob in KNOBS.values():
        assert knob.kind in (int, float, bool, str) or knob.form is not None, knob.name  # structured: its form
        assert knob.help and "\n" not in knob.help and knob.label == knob.label.lower(), knob.name
        if knob.kind in (int, float):
            assert knob.low is not None and knob.high is not None and knob.low < knob.high, knob.name


@pytest.mark.parametrize("knob", [k for k in KNOBS.values() if k.kind in (int, float)], ids=lambda k: k.name)
def test_each_number_knob_refuses_values_outside_its_range_by_its_label(knob):
    assert knob.problem(knob.low if not knob.above_low else knob.low + (1 if knob.kind is int else 1e-6)) is None
    assert knob.problem(knob.high) is None
    for bad in (knob.high + 1, knob.low - 1, float("nan"), "3", True):
        problem = GenerationSettings(**{knob.name: bad}).problems()
        assert problem and problem[0].startswith(f"{knob.label} must be "), (bad, problem)
    if knob.above_low:
        assert knob.problem(knob.low)
    if knob.kind is int:
        assert knob.problem(knob.low + 0.5)


def test_the_cli_has_a_flag_for_every_knob_and_reads_each_into_the_settings():
    from cli.common import add_generation_arguments, settings_from_args

    parser = argparse.ArgumentParser()
    add_generation_arguments(parser)
    assert settings_from_args(parser.parse_args([])) == GenerationSettings()
    # a value of each knob other than its default, from its declaration: its largest, a switch flipped, a
    # structured knob's text as its form writes it
    examples = {"sampler": "discrete-ddim", "pins": ((3, "sea"), (9, " sky=blue")), "layers": (0, 9)}
    values = {name: examples.get(name, (not k.field_default) if k.kind is bool else k.kind(k.high) if k.form is None else None)
              for name, k in KNOBS.items()}
    argv = []
    for name, value in values.items():
        knob = KNOBS[name]
        if knob.kind is bool:
            argv += [knob.cli_flag]
        elif knob.form is not None and knob.form.repeat:
            argv += [part for line in knob.form.format(value).splitlines() for part in (knob.cli_flag, line)]
        else:
            argv += [knob.cli_flag, knob.form.format(value) if knob.form else str(value)]
    assert settings_from_args(parser.parse_args(argv)) == GenerationSettings(**values)
    assert KNOBS["pins"].cli_flag == "--pin" and KNOBS["record_shift"].cli_flag == "--no-shift"
    assert KNOBS["max_denoising_steps"].cli_flag == "--steps" and KNOBS["record_topk"].cli_flag == "--topk"  # old command lines


def test_which_knobs_a_run_reads_follows_the_table_and_the_backend():
    from backends.registry import BACKENDS

    diffusers, mlx = BACKENDS["diffusers"].capabilities, BACKENDS["mlx"].capabilities
    assert {"corrector_steps", "corrector_k", "temperature"} <= diffusers.knobs_for("discrete-ddim")
    assert not {"entropy_bound", "refine_threshold", "t_min"} & diffusers.knobs_for("discrete-ddim")
    assert "temperature" not in diffusers.knobs_for("entropy-bound")  # its own schedule (the spec's `knobs`)
    assert "temperature" in mlx.knobs_for("entropy-bound") and "t_min" in mlx.knobs_for("confidence-threshold")
    assert "entropy_bound" not in mlx.knobs_for("confidence-threshold")


def test_each_backend_says_once_which_knobs_each_of_its_samplers_reads():
    """A knob is either the backend's (every run of it reads it) or a sampler's (`SamplerSpec.knobs`), never both."""
    from backends.registry import BACKENDS

    for entry in BACKENDS.values():
        capabilities = entry.capabilities
        assert capabilities.knobs <= set(KNOBS), entry.name
        for spec in capabilities.samplers:
            assert spec.knobs <= set(KNOBS) and not spec.knobs & capabilities.knobs, (entry.name, spec.name)


def test_structured_knobs_are_tested_by_their_own_check():
    assert KNOBS["pins"].problem(((3, "Paris"),)) is None and KNOBS["layers"].problem((0, 9)) is None
    assert KNOBS["pins"].problem(((3, ""),)).startswith("the pin at position 3 has an empty text")
    assert KNOBS["layers"].problem((1, 1)) == "layer 1 is asked for twice: give each layer once"
    assert GenerationSettings(layers="every").problems() == ["layers must be layer numbers separated by commas, such as 0,9,19,29, or 'all'"]
    assert KNOBS["pins"].in_app and KNOBS["layers"].in_app and not KNOBS["record_shift"].in_app  # the app: text boxes


@pytest.mark.parametrize("text, value", [
    ("", None), ("  ", None), ("all", "all"), ("ALL", "all"), ("0,9, 19,29", (0, 9, 19, 29)), ("3", (3,)),
])
def test_the_layers_box_reads_numbers_all_or_nothing(text, value):
    assert KNOBS["layers"].form.parse(text) == value


def test_the_pins_box_reads_one_pin_a_line_and_keeps_the_text_as_typed():
    assert KNOBS["pins"].form.parse("11=moon\n\n 40= sea=salt\n") == ((11, "moon"), (40, " sea=salt"))
    assert KNOBS["pins"].form.parse("") == () and KNOBS["pins"].form.parse("-2=x") == ((-2, "x"),)  # the check says why


@pytest.mark.parametrize("name, text, message", [
    ("layers", "0,a", "layers takes layer numbers separated by commas"),
    ("layers", "0;1", "layers takes layer numbers separated by commas"),
    ("pins", "moon", "each pin is a line POS=TEXT"),
    ("pins", "x=moon", "each pin is a line POS=TEXT"),
])
def test_a_box_that_does_not_parse_says_so_in_one_line(name, text, message):
    with pytest.raises(ValueError, match=message) as info:
        KNOBS[name].form.parse(text)
    assert "\n" not in str(info.value)


def test_a_structured_knob_counts_what_it_asks_for():
    layers, pins = KNOBS["layers"], KNOBS["pins"]
    assert layers.count("0,1,2") == 3 and layers.count((0, 1)) == 2 and layers.count("all") == math.inf
    assert layers.count("") == 0 and layers.count(None) == 0 and layers.count("0,a") == 0  # the run's own check says why
    assert pins.count("1=a\n2=b") == 2 and pins.count([[1, "a"]]) == 1


def test_a_new_structured_knob_needs_only_its_declaration():
    """An intervention kind of issue 55 (forbid POS=TEXT), declared on a settings class of its own: its CLI flag
    (repeatable), its parse and one-line refusal, its check, its JSON form and its hosted count all come from the
    declaration, through the same code that serves pins and layers."""
    from cli.common import CliError, add_knob_arguments, settings_from_args
    from visualizer.knobs import Form, knob, knob_table, plain_data
    from visualizer.settings import format_position_texts, parse_position_texts

    def check(value):
        if not all(position >= 0 and text for position, text in value):
            return "a forbidden token needs a position from 0 and a text"
        return None

    @dataclasses.dataclass(frozen=True)
    class Settings:
        seed: int = knob(0, "seed", "seeds the run", low=0, high=9)
        forbid: tuple = knob((), "forbidden tokens", "a token never sampled at a position from the fork on",
                             form=Form(parse=lambda text: parse_position_texts(text, "forbidden token"), check=check,
                                       format=format_position_texts, metavar="POS=TEXT", verb="forbid tokens",
                                       repeat=True), hosted_cap=("DV_MAX_FORBIDDEN", 4))

    table = knob_table(Settings)
    parser = argparse.ArgumentParser()
    add_knob_arguments(parser, table)
    args = parser.parse_args(["--forbid", "3=sea", "--forbid", "7= sky", "--seed", "2"])
    settings = settings_from_args(args, Settings, table)
    assert settings == Settings(seed=2, forbid=((3, "sea"), (7, " sky")))
    forbid = table["forbid"]
    assert forbid.problem(settings.forbid) is None and forbid.problem(((3, ""),)).startswith("a forbidden token needs")
    assert forbid.count("1=a\n2=b\n3=c") == 3 and forbid.cli_flag == "--forbid" and forbid.kind is object
    assert forbid.form.parse(forbid.form.format(settings.forbid)) == settings.forbid
    assert plain_data(settings.forbid) == [[3, "sea"], [7, " sky"]]
    with pytest.raises(CliError, match=r"^--forbid: each forbidden token is a line POS=TEXT") as info:
        settings_from_args(parser.parse_args(["--forbid", "sea"]), Settings, table)
    assert "\n" not in str(info.value)


def test_layers_are_all_in_any_case_on_the_command_line_as_in_the_app():
    from cli.common import add_generation_arguments, settings_from_args

    parser = argparse.ArgumentParser()
    add_generation_arguments(parser)
    for text in ("all", "ALL", " All "):
        assert settings_from_args(parser.parse_args(["--layers", text])).layers == "all"
        assert KNOBS["layers"].form.parse(text) == "all"
