"""The refilling loop (`backends.refill`): every generation it runs, beside whatever others share its rows at
whatever step, records the trace of that generation run alone (batch 1, stock `generate` under the capture),
step for step and bit for bit; and no pass computes a row that has finished. CPU, small runs."""

from __future__ import annotations

import threading

import pytest

from backends.base import BackendError
from backends.refill import refill_traces
from backends.run import record_trace
from tests.test_batch_capture import PROMPTS, builtin_backend, without_times  # noqa: F401 -- the fixture
from visualizer.settings import GenerationSettings

pytestmark = pytest.mark.model

MORE = [*PROMPTS, "List three primes.", "Say hello in French.", "Name a colour of the sea."]


def records(trace):
    return [without_times(r) for r in (trace.start, *trace.steps, *trace.blocks, trace.end)]


def assert_each_is_its_run_alone(backend, prompts, seeds, settings, traces):
    for prompt, seed, trace in zip(prompts, seeds, traces):
        alone = record_trace(backend, prompt, settings.replace(seed=seed))
        assert alone.end.finish_reason in ("eos", "length")
        assert trace.start.batch is None  # a run of one, as its reference
        assert records(trace) == records(alone)
        assert trace.pieces == alone.pieces


def test_every_refilled_trace_is_its_generation_run_alone(builtin_backend):
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=12)
    seeds = [0, 1, 2, 0, 3, 1]
    traces, row_passes = refill_traces(builtin_backend, MORE, seeds, settings, rows=3)
    steps = [len(t.steps) for t in traces]
    assert len(set(steps)) > 1  # the rows end at different steps: rows were refilled inside a block
    assert row_passes == sum(steps)  # every pass computed only rows still denoising
    assert_each_is_its_run_alone(builtin_backend, MORE, seeds, settings, traces)


def test_generations_of_several_blocks_encode_each_block_in_their_own_row(random_backend):
    # the random model runs every step and often every block: two blocks, rows that end in different ones
    settings = GenerationSettings(max_new_tokens=512, max_denoising_steps=3)
    seeds = [5, 6, 7, 8]
    traces, row_passes = refill_traces(random_backend, PROMPTS + PROMPTS[:1], seeds, settings, rows=2)
    assert any(len(t.blocks) == 2 for t in traces)
    assert row_passes == sum(len(t.steps) for t in traces)
    assert_each_is_its_run_alone(random_backend, PROMPTS + PROMPTS[:1], seeds, settings, traces)


def test_one_row_is_the_runs_one_after_another(builtin_backend):
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=8)
    traces, _ = refill_traces(builtin_backend, PROMPTS[:2], [4, 4], settings, rows=1)
    assert_each_is_its_run_alone(builtin_backend, PROMPTS[:2], [4, 4], settings, traces)


def test_a_stop_ends_every_unfinished_run_cancelled(builtin_backend):
    stop = threading.Event()
    stop.set()
    traces, _ = refill_traces(builtin_backend, PROMPTS, [0, 1, 2], GenerationSettings(max_denoising_steps=4), rows=2,
                              stop=stop)
    assert [t.end.finish_reason for t in traces] == ["cancelled"] * 3


@pytest.mark.parametrize("change, words", [
    (dict(compiled=True), "eager only"),
    (dict(pins=((0, "Hi"),)), "no pins"),
])
def test_what_it_cannot_run_is_refused_with_one_line(builtin_backend, change, words):
    with pytest.raises(BackendError, match=words) as caught:
        refill_traces(builtin_backend, PROMPTS[:1], [0], GenerationSettings(**change), rows=2)
    assert "\n" not in str(caught.value)
