"""The knob table (visualizer.settings.KNOBS): every setting declared once, and what is made from it."""

from __future__ import annotations

import argparse
import dataclasses
import math

import pytest

from visualizer.samplers import SAMPLER_BLOCK_REFINEMENT, SAMPLER_CONFIDENCE_THRESHOLD, SAMPLER_DISCRETE_DDIM, SAMPLER_ENTROPY_BOUND
from visualizer.settings import KNOBS, GenerationSettings

SAMPLERS = {SAMPLER_ENTROPY_BOUND, SAMPLER_CONFIDENCE_THRESHOLD, SAMPLER_DISCRETE_DDIM, SAMPLER_BLOCK_REFINEMENT}


def test_every_setting_is_declared_once_and_every_declaration_is_a_setting():
    fields = [f.name for f in dataclasses.fields(GenerationSettings)]
    assert list(KNOBS) == fields  # the same names, in the same order (the CLI's and the app's order)
    for knob in KNOBS.values():
        assert knob.kind in (int, float, bool, str) or knob.check is not None, knob.name  # structured: its own test
        assert knob.help and "\n" not in knob.help and knob.label == knob.label.lower(), knob.name
        assert knob.samplers is None or set(knob.samplers) <= SAMPLERS, knob.name
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
    # a value of each knob other than its default, from its declaration: its largest, a switch on
    generated = {name: k for name, k in KNOBS.items() if k.generated_flag}  # pins, layers, --no-shift: record's own
    values = {name: True if k.kind is bool else "discrete-ddim" if name == "sampler" else k.kind(k.high)
              for name, k in generated.items()}
    argv = []
    for name, value in values.items():
        argv += [KNOBS[name].cli_flag] if value is True else [KNOBS[name].cli_flag, str(value)]
    assert settings_from_args(parser.parse_args(argv)) == GenerationSettings(**values)
    assert KNOBS["max_denoising_steps"].cli_flag == "--steps" and KNOBS["record_topk"].cli_flag == "--topk"  # old command lines


def test_which_knobs_a_run_reads_follows_the_table_and_the_backend():
    from backends.registry import BACKENDS

    diffusers, mlx = BACKENDS["diffusers"].capabilities, BACKENDS["mlx"].capabilities
    assert {"corrector_steps", "corrector_k", "temperature"} <= diffusers.knobs_for("discrete-ddim")
    assert not {"entropy_bound", "refine_threshold", "t_min"} & diffusers.knobs_for("discrete-ddim")
    assert "temperature" not in diffusers.knobs_for("entropy-bound")  # its own schedule (`not_read`)
    assert "temperature" in mlx.knobs_for("entropy-bound") and "t_min" in mlx.knobs_for("confidence-threshold")
    assert "entropy_bound" not in mlx.knobs_for("confidence-threshold")


def test_structured_knobs_are_tested_by_their_own_check_and_have_no_generated_flag():
    assert KNOBS["pins"].problem(((3, "Paris"),)) is None and KNOBS["layers"].problem((0, 9)) is None
    assert KNOBS["pins"].problem(((3, ""),)).startswith("the pin at position 3 has an empty text")
    assert KNOBS["layers"].problem((1, 1)).startswith("layers must be distinct")
    assert GenerationSettings(layers="every").problems() == ["layers must be distinct layer numbers from 0, or 'all' (got 'every')"]
    assert not any(KNOBS[name].generated_flag for name in ("pins", "layers", "record_shift"))
    assert KNOBS["pins"].in_app and KNOBS["layers"].in_app and not KNOBS["record_shift"].in_app  # the app: text boxes


@pytest.mark.parametrize("text, value", [
    ("", None), ("  ", None), ("all", "all"), ("ALL", "all"), ("0,9, 19,29", (0, 9, 19, 29)), ("3", (3,)),
])
def test_the_layers_box_reads_numbers_all_or_nothing(text, value):
    assert KNOBS["layers"].from_text(text) == value


def test_the_pins_box_reads_one_pin_a_line_and_keeps_the_text_as_typed():
    assert KNOBS["pins"].from_text("11=moon\n\n 40= sea=salt\n") == ((11, "moon"), (40, " sea=salt"))
    assert KNOBS["pins"].from_text("") == () and KNOBS["pins"].from_text("-2=x") == ((-2, "x"),)  # the check says why


@pytest.mark.parametrize("name, text, message", [
    ("layers", "0,a", "layers takes layer numbers separated by commas"),
    ("layers", "0;1", "layers takes layer numbers separated by commas"),
    ("pins", "moon", "each pin is a line POS=TEXT"),
    ("pins", "x=moon", "each pin is a line POS=TEXT"),
])
def test_a_box_that_does_not_parse_says_so_in_one_line(name, text, message):
    with pytest.raises(ValueError, match=message) as info:
        KNOBS[name].from_text(text)
    assert "\n" not in str(info.value)


def test_a_structured_knob_counts_what_it_asks_for():
    layers, pins = KNOBS["layers"], KNOBS["pins"]
    assert layers.count("0,1,2") == 3 and layers.count((0, 1)) == 2 and layers.count("all") == math.inf
    assert layers.count("") == 0 and layers.count(None) == 0 and layers.count("0,a") == 0  # the run's own check says why
    assert pins.count("1=a\n2=b") == 2 and pins.count([[1, "a"]]) == 1
