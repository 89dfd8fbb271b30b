"""One way to name a step (visualizer.step_names): BLOCK:STEP from 1, as the captions show it, on every command."""

from __future__ import annotations

import pytest

from tests.trace_factory import trace_from_text
from visualizer.step_names import StepAt, StepName, StepNameError, locate_step, parse_step


@pytest.mark.parametrize("text, name", [("2:10", StepName(2, 10)), ("10", StepName(None, 10)), (" 1:1 ", StepName(1, 1))])
def test_a_step_is_block_colon_step_or_a_step_of_the_commands_block(text, name):
    assert parse_step(text) == name


@pytest.mark.parametrize("text, message", [
    ("five", "a step is BLOCK:STEP or STEP"), ("1:2:3", "a step is BLOCK:STEP or STEP"), ("", "a step is BLOCK:STEP"),
    ("0", "a step counts from 1"), ("0:3", "a block counts from 1"), ("2:-1", "a step counts from 1"),
])
def test_a_step_that_is_not_one_is_refused_in_one_line(text, message):
    with pytest.raises(StepNameError, match=message) as info:
        parse_step(text)
    assert "\n" not in str(info.value)


def test_a_named_step_is_found_in_the_run_as_its_caption_counts_it():
    trace = trace_from_text([["a", "b"], ["c", "d"]], [[0, 1], [0, 2]], n_steps=3)  # two blocks of 3 steps
    assert locate_step(trace, parse_step("1:1")) == StepAt(0, 0, 0)
    assert locate_step(trace, parse_step("2:3")) == StepAt(1, 2, 5)
    assert locate_step(trace, parse_step("2"), block=2) == StepAt(1, 1, 4)  # a bare step: of the command's block
    at = locate_step(trace, parse_step("2:2"))
    record = trace.steps[at.index]
    assert (record.block, record.step) == (at.block, at.step) == (1, 1)


@pytest.mark.parametrize("text, message", [
    ("3:1", "block 3 is outside this run: it has blocks 1 to 2"),
    ("1:4", "step 1:4 is outside this run: block 1 has steps 1 to 3"),
])
def test_a_step_outside_the_run_is_refused_naming_the_runs_range(text, message):
    trace = trace_from_text([["a", "b"], ["c", "d"]], [[0, 1], [0, 2]], n_steps=3)
    with pytest.raises(StepNameError, match=f"^{message}$"):
        locate_step(trace, parse_step(text))
