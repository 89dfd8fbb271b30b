"""The refilling loop (`backends.refill`): every generation it runs, beside whatever others share its rows at
whatever step, records the trace of that generation run alone (batch 1, stock `generate` under the capture),
step for step and bit for bit; and no pass computes a row that has finished. CPU, small runs."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
import torch

from backends.base import BackendError
from backends import refill as refill_module
from backends.refill import Job, refill_generate, refill_traces
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


def jobs_and_kwargs(backend, prompts, seeds, settings, caps=None):
    """The loop's inputs for these prompts, as `refill_traces` makes them: templated ids, one seed and cap each."""
    resolved = [backend.resolve(settings.replace(seed=s)) for s in seeds]
    ids = [backend._check_row(p, s, row, len(prompts)) for row, (p, s) in enumerate(zip(prompts, resolved))]
    caps = caps or [None] * len(prompts)
    return [Job(i, s.seed, cap) for i, s, cap in zip(ids, resolved, caps)], backend.generate_kwargs(resolved[0])


def looped(backend, jobs, kwargs, rows, exact=True, call_rows=None):
    """Each job's blocks (steps_used, tokens) and the row-passes the loop ran."""
    blocks: dict[int, list] = {i: [] for i in range(len(jobs))}
    ran = refill_generate(backend.model, jobs, rows=rows, generate_kwargs=kwargs, on_step=lambda j, s: None,
                          on_block=lambda j, b: blocks[j].append((b.steps_used, b.tokens.tolist())), exact=exact,
                          call_rows=call_rows)
    return blocks, ran


def test_a_jobs_own_step_cap_ends_it_as_that_cap_alone_would(builtin_backend):
    # Job.steps: each generation its own max_denoising_steps (the GPU benchmark forces the study's step counts so)
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=12)
    caps, seeds = [2, 6, 3, 5], [0, 1, 2, 3]
    jobs, kwargs = jobs_and_kwargs(builtin_backend, MORE[:4], seeds, settings, caps)
    blocks, ran = looped(builtin_backend, jobs, kwargs, rows=2)
    assert ran == sum(steps for job in blocks.values() for steps, _ in job)  # no pass computed a finished row
    for prompt, seed, cap, job in zip(MORE, seeds, caps, blocks.values()):
        assert all(steps <= cap for steps, _ in job)
        alone = record_trace(builtin_backend, prompt, settings.replace(seed=seed, max_denoising_steps=cap))
        assert [(b.steps_used, list(b.tokens)) for b in alone.blocks] == job


def test_experts_batched_run_one_grouped_pass_and_waste_nothing(builtin_backend, monkeypatch):
    # exact=False: the experts see every row's tokens at once (each expert's weights read once a pass, not a row)
    calls = []
    row_by_row = refill_module._row_experts
    monkeypatch.setattr(refill_module, "_row_experts", lambda *a: calls.append(1) or row_by_row(*a))
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=6)
    jobs, kwargs = jobs_and_kwargs(builtin_backend, MORE[:4], [0, 1, 2, 3], settings)
    batched, ran = looped(builtin_backend, jobs, kwargs, rows=3, exact=False)
    assert calls == []  # the model's own experts implementation, on the whole batch
    assert ran == sum(steps for job in batched.values() for steps, _ in job)
    exact, _ = looped(builtin_backend, jobs, kwargs, rows=3, exact=True)
    assert len(calls) > 0
    # the same generations up to the experts' float32 rounding over more tokens (a row given another row's experts
    # output would share few tokens with its own run)
    for job in exact:
        for (_, mine), (_, theirs) in zip(batched[job], exact[job]):
            assert sum(a == b for a, b in zip(mine, theirs)) >= 0.9 * len(theirs)


def test_experts_batched_on_one_row_are_its_run_alone(builtin_backend):
    # one row: the grouped experts see that row's tokens only, as its pass alone does
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=8)
    jobs, kwargs = jobs_and_kwargs(builtin_backend, PROMPTS[:2], [4, 5], settings)
    batched, _ = looped(builtin_backend, jobs, kwargs, rows=1, exact=False)
    for prompt, seed, job in zip(PROMPTS, [4, 5], batched.values()):
        alone = record_trace(builtin_backend, prompt, settings.replace(seed=seed))
        assert [(b.steps_used, list(b.tokens)) for b in alone.blocks] == job


def test_a_pass_over_more_rows_than_a_call_takes_makes_several_calls_each_row_as_alone(builtin_backend, monkeypatch):
    # call_rows: on CUDA the batched projections are bit-identical to a row alone only up to a call's size
    sizes = []
    forward = type(builtin_backend.model).forward
    monkeypatch.setattr(type(builtin_backend.model), "forward",
                        lambda self, **kw: sizes.append(len(kw["decoder_input_ids"])) or forward(self, **kw))
    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=5)
    seeds = [0, 1, 2, 3, 4]
    jobs, kwargs = jobs_and_kwargs(builtin_backend, MORE[:5], seeds, settings)
    blocks, ran = looped(builtin_backend, jobs, kwargs, rows=5, call_rows=2)
    assert sizes and max(sizes) == 2 and sum(sizes) == ran
    monkeypatch.undo()
    for prompt, seed, job in zip(MORE, seeds, blocks.values()):
        alone = record_trace(builtin_backend, prompt, settings.replace(seed=seed))
        assert [(b.steps_used, list(b.tokens)) for b in alone.blocks] == job


@pytest.mark.parametrize("device, exact, given, rows", [
    ("cuda", True, None, refill_module.CUDA_EXACT_CALL_ROWS), ("cuda", False, None, None), ("cpu", True, None, None),
    ("cuda", True, 16, 16),
])
def test_an_exact_loop_on_cuda_calls_the_decoder_on_at_most_the_measured_rows(device, exact, given, rows):
    model = SimpleNamespace(device=torch.device(device))
    assert refill_module._call_rows(model, exact, given) == rows


def test_the_batched_pass_pads_and_masks_each_rows_own_keys(builtin_backend):
    # exact=False: one attention call over rows whose prompts differ in length (left-padded, the padding masked), one
    # self-conditioning product: each row's logits as its exact pass gives them, up to float32 rounding (a row
    # attending to another's keys or to padding would be far off)
    from backends.capture import _StepRecorder

    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=4)
    jobs, kwargs = jobs_and_kwargs(builtin_backend, MORE[3:6], [0, 1, 2], settings)
    assert len({len(job.ids) for job in jobs}) > 1
    model = builtin_backend.model
    refill_module._register_by_row()
    with torch.no_grad():
        rows = [refill_module._Generation(model, job, kwargs, _StepRecorder(
            model, lambda s: None, lambda b: None, None, topk=0, agree=None, shift=False, pins=())) for job in jobs]
        rows[0].step(refill_module._decoder_pass(model, rows[:1]))  # one row with self-conditioning, two without
        exact = refill_module._decoder_pass(model, rows, exact=True)
        batched = refill_module._decoder_pass(model, rows, exact=False)
    assert exact.shape == batched.shape
    torch.testing.assert_close(batched, exact, rtol=1e-3, atol=1e-3)


def encoder_batches(backend, monkeypatch) -> list[int]:
    """The rows of each encoder call from now on."""
    sizes = []
    encoder = backend.model.model.encoder
    forward = encoder.forward
    monkeypatch.setattr(encoder, "forward", lambda *a, **kw: sizes.append(len(kw["input_ids"])) or forward(*a, **kw))
    return sizes


def test_the_batched_loop_encodes_rows_holding_as_many_tokens_in_one_call_each_cache_as_its_own(builtin_backend,
                                                                                              monkeypatch):
    # exact=False: the encoder's weights read once for the rows admitted together (grouped by prompt length), each
    # row's cache filled with its own keys and values (a row given another's, or the batch's, would be far off)
    from backends.capture import _StepRecorder

    settings = GenerationSettings(max_new_tokens=256, max_denoising_steps=4)
    prompts = [MORE[3], MORE[4], MORE[3], MORE[4], MORE[3]]
    jobs, kwargs = jobs_and_kwargs(builtin_backend, prompts, [0, 1, 2, 3, 4], settings)
    assert len({len(job.ids) for job in jobs}) == 2
    model = builtin_backend.model

    def generation(job, together):
        return refill_module._Generation(model, job, kwargs, _StepRecorder(
            model, lambda s: None, lambda b: None, None, topk=0, agree=None, shift=False, pins=()), together=together)

    with torch.no_grad():
        alone = [generation(job, together=False) for job in jobs]
        sizes = encoder_batches(builtin_backend, monkeypatch)
        together = [generation(job, together=True) for job in jobs]
        assert sizes == [] and all(g.starting for g in together)
        refill_module._start_blocks(together, together=True)
    assert sorted(sizes) == [2, 3] and not any(g.starting for g in together)
    for mine, own in zip(together, alone):
        for layer, own_layer in zip(mine.cache.layers, own.cache.layers):
            assert layer.keys.shape == own_layer.keys.shape
            torch.testing.assert_close(layer.keys, own_layer.keys, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(layer.values, own_layer.values, rtol=1e-4, atol=1e-4)
        assert torch.equal(mine.canvas, own.canvas)  # each row's canvas drawn from its own seed


def test_the_batched_loop_starts_later_blocks_together_and_each_run_is_reproduced(random_backend, monkeypatch):
    # two blocks a generation (the random model runs every step): rows ending a block in one pass share the next
    # block's encoder call; the exact loop encodes each row alone, as its run alone
    settings = GenerationSettings(max_new_tokens=512, max_denoising_steps=3)
    jobs, kwargs = jobs_and_kwargs(random_backend, PROMPTS[:1] * 4, [5, 6, 7, 8], settings)
    sizes = encoder_batches(random_backend, monkeypatch)
    batched, ran = looped(random_backend, jobs, kwargs, rows=4, exact=False)
    starts = sum(len(job) for job in batched.values())  # every block started: one encoder row each
    assert sum(sizes) == starts and len(sizes) < starts and max(sizes) == 4
    assert ran == sum(steps for job in batched.values() for steps, _ in job)
    assert looped(random_backend, jobs, kwargs, rows=4, exact=False)[0] == batched  # reproduced from the plan
    sizes.clear()
    looped(random_backend, jobs, kwargs, rows=4, exact=True)
    assert sizes == [1] * starts
