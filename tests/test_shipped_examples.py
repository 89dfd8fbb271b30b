"""The shipped example runs (assets/traces, the app's "Recorded runs") show what their demo captions say: the
checkable ones pass their checker on the committed text, and each run's scaffolding commits before the rest."""

from __future__ import annotations

import numpy as np
import pytest

from prompts.demos import demo
from prompts.tasks.demo_families import check_demo_family, demo_task
from visualizer.metrics import block_commits, live_readout
from visualizer.metrics.structure import DEMO_FAMILIES, structure_first
from visualizer.replay import example_traces
from visualizer.thinking import committed_text
from visualizer.trace import Trace

pytestmark = pytest.mark.unit

EXAMPLES = {path.stem: path for path in example_traces()}
CHECKED = [pytest.param("palindrome", marks=pytest.mark.processes),  # its doctest runs in a fresh interpreter
           "acrostic", "sky"]


def test_every_shipped_example_is_a_demo_run_of_its_prompt():
    assert set(EXAMPLES) == {"acrostic", "palindrome", "sky", "story"}
    for name, path in EXAMPLES.items():
        assert Trace.load(path).prompt == demo(name).prompt


@pytest.mark.parametrize("name", CHECKED)
def test_a_checkable_example_does_what_its_prompt_asks(name):
    trace = Trace.load(EXAMPLES[name])
    assert check_demo_family(demo_task(name), committed_text(trace))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_examples_scaffolding_commits_before_the_rest(name):
    figures = structure_first(Trace.load(EXAMPLES[name]), family=DEMO_FAMILIES[name])
    assert figures.difference > 0  # structural tokens are first accepted earlier, on average


def test_the_story_starts_first_and_its_two_ends_differ_as_its_caption_says():
    trace = Trace.load(EXAMPLES["story"])
    assert "two ends differ" in demo("story").scaffolding
    assert not check_demo_family(demo_task("story"), committed_text(trace))  # a re-recording that copies: reword it
    content = live_readout(trace, -1).content_length
    pieces = [trace.piece(int(t)) for t in trace.blocks[0].tokens[:content]]
    sentence = np.cumsum([0] + ["." in p for p in pieces[:-1]])  # the sentence each position belongs to
    steps = block_commits(trace, 0).commit_step[:content]
    first, middle = steps[sentence == 0], steps[(sentence > 0) & (sentence < sentence.max())]
    assert np.median(first) < np.median(middle)
