"""`capture_steps` on its own, in seconds: every field of a batched run against what stock computed.

tests/test_capture.py and tests/test_capture_independent.py check the capture through the backend
on whole runs (the compiled path too); under mutation testing they cost minutes a mutant. This file
drives `capture_steps` directly on the tiny random model (built in memory: backends/small_models.py,
with a 64-token canvas) for 2 blocks of 3 steps, with three prompts that a logits processor makes behave differently:

- row 0: one token near-certain everywhere: the stopping rule fires at its second step of every
  block (converged), and the row goes on to the next block;
- row 1: random, the EOS ids masked (-inf logits): it denoises every step of both blocks;
- row 2: EOS near-certain: it converges and ends its generation in block 0, so it gets no record in
  block 1 though transformers still computes it.

The stock run is spied on at class level, as in tests/test_capture_independent.py (the spies only
copy; they draw no random numbers), and every field the capture recorded is compared with it, row by
row. This file is the capture's test selection for mutation testing (docs/mutation.md).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import DiffusionGemmaForBlockDiffusion, LogitsProcessorList
from transformers.models.diffusion_gemma import generation_diffusion_gemma as stock

from backends.base import BackendError
from backends.bridge import GenerationCancelled
from backends.sharded_server import FailedInStep
from backends import capture
from backends.capture import _accepting_sampler, _to_host, capture_steps
from backends.random_model import load_project_tokenizer, set_generation_defaults
from backends.small_models import small_config

SURE_ID = 7  # row 0's near-certain token (not an EOS)
EOS_ID, END_TURN_ID = 1, 106  # training/tokenizer.py: the ids that end a generation
PROMPT_LENGTH = 4
STEPS = 3
CANVAS = 64  # tokens a block: a quarter of the real 256, for speed
HOOKS = ("_prepare_logits_processor", "_prepare_denoiser_inputs", "_denoising_step", "_finalize_canvas")


@pytest.fixture(scope="module")
def model():
    """The random test model's architecture (backends/random_model.py) with a 64-token canvas, built in memory."""
    tokenizer = load_project_tokenizer()
    torch.manual_seed(0)
    model = DiffusionGemmaForBlockDiffusion(small_config(len(tokenizer), "test", canvas_length=CANVAS)).eval()
    set_generation_defaults(model, tokenizer)
    return model


class Steer:
    """The logits processor that gives each row its behaviour (applied before the temperature)."""

    def __call__(self, input_ids, scores, cur_step=None):
        scores = scores.clone()
        scores[0, :, SURE_ID] += 50.0
        if len(scores) > 1:
            scores[1, :, [EOS_ID, END_TURN_ID]] = -float("inf")
        if len(scores) > 2:
            scores[2, :, EOS_ID] += 50.0
        return scores


def prompts() -> torch.Tensor:
    return torch.tensor([[2, 105, 200, 106], [2, 105, 300, 106], [2, 105, 400, 106]])  # (rows, PROMPT_LENGTH)


def generate(model, rows: int = 3, max_new_tokens: int = 2 * CANVAS, seed: int = 0):
    torch.manual_seed(seed)
    return model.generate(
        prompts()[:rows], max_new_tokens=max_new_tokens, max_denoising_steps=STEPS, logits_processor=LogitsProcessorList([Steer()])
    )


def stock_run(model):
    """Plain `generate`, spied on: per step the sampler's processed logits, accepted mask and
    cur_step, the renoised canvas (the next step's input), the argmax the stopping rule was given
    and whether it fired, each for every row (a leading batch axis)."""
    steps, partial = [], {}
    accept, renoise = stock.EntropyBoundSampler.accept_canvas, stock.EntropyBoundSampler.renoise_canvas
    criterion = stock.StableAndConfidentStoppingCriteria.__call__

    def spy_accept(self, current_canvas, denoiser_canvas, logits, cur_step):
        out = accept(self, current_canvas, denoiser_canvas, logits, cur_step)
        partial.update(cur_step=int(cur_step), logits=logits.detach().clone(), accepted=self.accepted_token_mask.numpy().copy())
        return out

    def spy_renoise(self, accepted_canvas, cur_step):
        out = renoise(self, accepted_canvas, cur_step)
        partial["canvas"] = out.numpy().copy()
        return out

    def spy_criterion(self, argmax_canvas, logits, **kwargs):
        out = criterion(self, argmax_canvas, logits, **kwargs)
        steps.append(SimpleNamespace(argmax=argmax_canvas.numpy().copy(), fired=out.numpy().copy(), **partial))
        partial.clear()
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stock.EntropyBoundSampler, "accept_canvas", spy_accept)
        patch.setattr(stock.EntropyBoundSampler, "renoise_canvas", spy_renoise)
        patch.setattr(stock.StableAndConfidentStoppingCriteria, "__call__", spy_criterion)
        out = generate(model)
    blocks = []
    for s in steps:  # cur_step counts down from STEPS in every block
        if s.cur_step == STEPS:
            blocks.append([])
        blocks[-1].append(s)
    return blocks, out.sequences[:, PROMPT_LENGTH:].numpy()


def captured_run(model, **kwargs):
    records = []
    started = time.perf_counter()
    with capture_steps(model, records.append, records.append, **kwargs):
        out = generate(model)
    elapsed = time.perf_counter() - started
    assert [n for n in HOOKS if n in vars(model)] == []
    return records, out.sequences[:, PROMPT_LENGTH:].numpy(), elapsed


@pytest.fixture
def runs(model):
    """Computed in every test that checks it: mutmut credits a test with the functions that ran
    during it (its fixtures' setup included), so a module-scoped run would count for the first
    test only, and the mutants that only the later tests catch would pass untried (docs/mutation.md)."""
    stock_blocks, stock_sequences = stock_run(model)
    records, sequences, elapsed = captured_run(model, topk=3)
    return stock_blocks, stock_sequences, records, sequences, elapsed


def test_the_rows_behave_as_meant_and_the_captured_run_is_the_stock_run_bit_for_bit(runs):
    """The scenario itself (otherwise the checks below would not reach what they are meant to), and
    the capture changes nothing: the same seed gives the same sequences with and without it."""
    stock_blocks, stock_sequences, _, sequences, _ = runs
    assert len(stock_blocks) == 2 and all(len(b) == STEPS for b in stock_blocks)  # row 1 keeps both blocks going
    fired = [np.array([s.fired for s in block]) for block in stock_blocks]  # (steps, rows) per block
    assert fired[0][:, 0].any() and fired[0][:, 2].any() and not fired[0][:, 1].any()
    assert fired[0][:, 0].argmax() < STEPS - 1  # row 0 converges before the block's last step
    assert stock_sequences[2, 0] == EOS_ID and np.all(stock_sequences[2, 1:] == 0)  # row 2: EOS, then pad to the end
    assert not np.isin(stock_sequences[:2], [EOS_ID, END_TURN_ID]).any()
    np.testing.assert_array_equal(sequences, stock_sequences)


def expected_order(stock_blocks, sequences, canvas: int):
    """(kind, block, step, row) of every record the capture should emit, in order, and each row's
    steps used per block. A row gets step records until its stopping rule fires, and none at all
    after the block in which it committed an EOS."""
    order, used = [], {}
    eos_block = {}
    for row in range(sequences.shape[0]):
        hits = np.flatnonzero(np.isin(sequences[row], [EOS_ID, END_TURN_ID]))
        eos_block[row] = hits[0] // canvas if hits.size else None
    settled_at = {}
    for b, block in enumerate(stock_blocks):
        live = [r for r in range(sequences.shape[0]) if eos_block[r] is None or eos_block[r] >= b]
        for row in live:
            fired = np.flatnonzero([s.fired[row] for s in block])
            settled_at[b, row] = int(fired[0]) if fired.size else None
            used[b, row] = settled_at[b, row] + 1 if fired.size else len(block)
        for i in range(len(block)):
            order += [("step", b, i, row) for row in live if i < used[b, row]]
        order += [("block", b, None, row) for row in live]
    return order, used, settled_at


def test_each_step_record_is_what_stock_computed_for_its_row(runs, model):
    stock_blocks, stock_sequences, records, _, elapsed = runs
    canvas = model.config.canvas_length
    order, used, settled_at = expected_order(stock_blocks, stock_sequences, canvas)
    got = [("step", r.block, r.step, r.row) if hasattr(r, "accepted") else ("block", r.block, None, r.row) for r in records]
    assert got == order

    steps = [r for r in records if hasattr(r, "accepted")]
    assert {r.row for r in steps} == {0, 1, 2} and not any(r.row == 2 and r.block == 1 for r in steps)
    for r in steps:
        want = stock_blocks[r.block][r.step]
        where = f"block {r.block} step {r.step} row {r.row}"
        assert r.steps_remaining == want.cur_step == STEPS - r.step, where
        assert r.accepted.dtype == bool and r.canvas.dtype == np.int32 and r.argmax.dtype == np.int32, where
        np.testing.assert_array_equal(r.accepted, want.accepted[r.row], err_msg=where)
        np.testing.assert_array_equal(r.canvas, want.canvas[r.row], err_msg=where)
        np.testing.assert_array_equal(r.argmax, want.argmax[r.row], err_msg=where)
        assert r.converged == (settled_at[r.block, r.row] == r.step), where
        logits = want.logits[r.row].double()  # (canvas, vocab): the truth, in float64
        truth = torch.distributions.Categorical(logits=logits, validate_args=False).entropy().numpy()
        assert r.entropy_nats.dtype == np.float32 and r.entropy_nats.shape == (canvas,), where
        np.testing.assert_allclose(r.entropy_nats, truth, rtol=0, atol=1e-5, err_msg=where)
        values, ids = torch.topk(want.logits[r.row], 3)
        assert r.topk_ids.dtype == np.int32 and r.topk_probs.dtype == np.float16, where
        np.testing.assert_array_equal(r.topk_ids, ids.numpy(), err_msg=where)
        probs = torch.softmax(logits, -1).gather(-1, ids).numpy()
        np.testing.assert_allclose(r.topk_probs.astype(np.float64), probs, rtol=1e-3, atol=1e-4, err_msg=where)
    # The three rows really differ where it matters: near-certain, masked, and the canvas is not the argmax.
    assert max(r.entropy_nats.max() for r in steps if r.row == 0) < 1e-6
    assert min(r.entropy_nats.min() for r in steps if r.row == 1) > 1.0
    assert any(np.any(r.canvas != r.argmax) for r in steps if r.row == 1)
    # One clock reading per step, shared by its rows, and within the whole run's time.
    for b, s in {(r.block, r.step) for r in steps}:
        times = {r.wall_time_s for r in steps if (r.block, r.step) == (b, s)}
        assert len(times) == 1 and 0 < times.pop() <= elapsed


def test_each_block_record_is_what_stock_committed_for_its_row(runs, model):
    stock_blocks, stock_sequences, records, _, _ = runs
    canvas = model.config.canvas_length
    _, used, settled_at = expected_order(stock_blocks, stock_sequences, canvas)
    blocks = [r for r in records if not hasattr(r, "accepted")]
    assert [(r.block, r.row) for r in blocks] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    for r in blocks:
        where = f"block {r.block} row {r.row}"
        assert r.tokens.dtype == np.int32, where
        np.testing.assert_array_equal(r.tokens, stock_sequences[r.row, r.block * canvas : (r.block + 1) * canvas], err_msg=where)
        assert r.steps_used == used[r.block, r.row], where
        assert r.converged == (settled_at[r.block, r.row] is not None), where
    assert [r.steps_used for r in blocks] == [2, STEPS, 2, 2, STEPS]


def test_without_top_k_no_candidates_are_recorded(model):
    steps = []
    with capture_steps(model, steps.append, lambda block: None):
        generate(model, rows=1, max_new_tokens=CANVAS)
    assert len(steps) == 2  # row 0 converges at its second step
    assert all(s.topk_ids is None and s.topk_probs is None for s in steps)


def test_a_stop_is_honoured_between_two_steps(model):
    """should_stop is asked before every step: the run ends with GenerationCancelled after exactly
    the steps taken before it turned true, and no hook is left."""
    steps, blocks = [], []
    with pytest.raises(GenerationCancelled):
        with capture_steps(model, steps.append, blocks.append, lambda: len(steps) >= 1):
            generate(model, rows=2)
    assert [(s.block, s.step, s.row) for s in steps] == [(0, 0, 0), (0, 0, 1)] and blocks == []
    assert [n for n in HOOKS if n in vars(model)] == []


def calls_of(model, monkeypatch, method: str, argument: str) -> list:
    """`argument` of each call of the stock `method` (the capture's wrapper calls the class's)."""
    calls = []
    real = getattr(type(model), method)

    def counting(self, *args, **kwargs):
        calls.append(kwargs[argument])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(model), method, counting)
    return calls


def test_a_stop_is_honoured_before_the_next_block_is_prepared(model, monkeypatch):
    prepared = calls_of(model, monkeypatch, "_prepare_denoiser_inputs", "batch_size")
    steps, blocks = [], []
    with pytest.raises(GenerationCancelled):
        with capture_steps(model, steps.append, blocks.append, lambda: bool(blocks)):
            generate(model, rows=1)
    assert prepared == [1] and [b.block for b in blocks] == [0] and {s.block for s in steps} == {0}
    assert [n for n in HOOKS if n in vars(model)] == []

    with pytest.raises(GenerationCancelled):  # a stop before the run starts: not one step
        with capture_steps(model, steps.append, blocks.append, lambda: True):
            generate(model, rows=1)
    assert prepared == [1] and len(blocks) == 1


def test_no_hook_survives_a_failing_consumer_and_nesting_is_refused(model):
    def explode(step):
        raise ValueError("consumer failed")

    with pytest.raises(ValueError, match="consumer failed"):
        with capture_steps(model, explode, lambda block: None):
            generate(model, rows=1, max_new_tokens=CANVAS)
    assert [n for n in HOOKS if n in vars(model)] == []

    with capture_steps(model, lambda s: None, lambda b: None):
        assert sorted(n for n in HOOKS if n in vars(model)) == sorted(HOOKS)
        with pytest.raises(BackendError) as refused:
            with capture_steps(model, lambda s: None, lambda b: None):
                pass
        assert str(refused.value) == (  # shown to the user as is: it says why and what to do
            "capture_steps is already active on this model: its hooks sit on the model instance, so one capture "
            "(one generate call, of any batch size) runs at a time; wait for it, or load a second model"
        )
        assert sorted(n for n in HOOKS if n in vars(model)) == sorted(HOOKS)  # the refusal left the first capture alone
    assert [n for n in HOOKS if n in vars(model)] == []


class Ballot:
    """A sharded model's vote (`capture_steps(agree=...)`) with one rank: keeps every ballot and the
    canvas it came with; `others` says what the other ranks want at each vote (True: one of them stops
    the run)."""

    def __init__(self, others=lambda vote: False):
        self.ballots, self.canvases, self.others = [], [], others

    def __call__(self, wants: bool, canvas=None) -> bool:
        self.ballots.append(wants)
        self.canvases.append(None if canvas is None else canvas.clone())
        return wants or self.others(len(self.ballots))


def keeping_and_failing_at(call: int, kept: list, message: str):
    """A recording callback that appends what it is given to `kept` and raises ValueError(message) at
    its `call`-th call (a recording error on rank 0)."""

    def record(item):
        kept.append(item)
        if len(kept) == call:
            raise ValueError(message)

    return record


def test_with_a_vote_each_step_is_voted_on_with_the_canvas_it_denoises(model):
    """The canvas goes to the vote so that the ranks can compare theirs (`backends.sharded_server.agreed`):
    before each step, the canvas that step starts from (the last step's output); at a block's start, none."""
    steps, blocks, ballot = [], [], Ballot()
    with capture_steps(model, steps.append, blocks.append, agree=ballot):
        generate(model, rows=1)
    at_block_start = [i for i, canvas in enumerate(ballot.canvases) if canvas is None]
    assert len(at_block_start) == len(blocks) >= 2
    before_steps = [canvas for canvas in ballot.canvases if canvas is not None]
    assert len(before_steps) == len(steps)
    for block in range(len(blocks)):
        in_block = [i for i, step in enumerate(steps) if step.block == block]
        for previous, this in zip(in_block, in_block[1:]):
            np.testing.assert_array_equal(before_steps[this][0].numpy(), steps[previous].canvas)


def test_with_a_vote_a_recording_error_is_held_until_the_next_vote_then_raised_in_step(model, monkeypatch):
    """Rank 0 alone records, so an error of its recording must not end its `generate` on the spot
    (the other ranks would wait in a collective it never joins): the stock step's result goes on,
    the next vote says stop for every rank, and FailedInStep is raised there from the error."""
    ran = calls_of(model, monkeypatch, "_denoising_step", "cur_step")
    steps, ballot = [], Ballot()
    fail_at_second = keeping_and_failing_at(2, steps, "recording failed")

    with pytest.raises(FailedInStep) as failed:
        with capture_steps(model, fail_at_second, lambda block: None, lambda: False, agree=ballot):
            generate(model, rows=1)
    assert isinstance(failed.value.__cause__, ValueError) and str(failed.value.__cause__) == "recording failed"
    # votes: block 0's start, before step 0, before step 1 (the error; row 0 converges there, its block ends),
    # then block 1's start, which says stop: block 1 never runs a step
    assert ballot.ballots == [False, False, False, True]
    assert len(ran) == 2 and [(s.block, s.step) for s in steps] == [(0, 0), (0, 1)]
    assert [n for n in HOOKS if n in vars(model)] == []


def test_with_a_vote_an_error_after_the_last_vote_is_raised_when_generate_returns(model):
    """A block record fails at the very end: no vote comes after it, every rank has left `generate`."""
    blocks, ballot = [], Ballot()
    fail_at_last = keeping_and_failing_at(2, blocks, "the last block failed")

    with pytest.raises(FailedInStep) as failed:
        with capture_steps(model, lambda step: None, fail_at_last, agree=ballot):
            generate(model, rows=1)
    assert str(failed.value.__cause__) == "the last block failed" and not any(ballot.ballots)
    assert [n for n in HOOKS if n in vars(model)] == []


def test_with_a_vote_an_error_of_the_logit_summary_is_held_too(model, monkeypatch):
    """The summary runs inside transformers' sampling (a logits processor): held there, not raised."""
    calls = []
    real = capture.summarize_logits

    def summary_failing_at_third(scores, topk, **options):
        calls.append(topk)
        if len(calls) == 3:
            raise RuntimeError("CUDA out of memory (pretend)")
        return real(scores, topk, **options)

    monkeypatch.setattr(capture, "summarize_logits", summary_failing_at_third)
    ran = calls_of(model, monkeypatch, "_denoising_step", "cur_step")
    steps, ballot = [], Ballot()
    with pytest.raises(FailedInStep) as failed:
        with capture_steps(model, steps.append, lambda block: None, agree=ballot, topk=2):
            generate(model, rows=1)
    assert str(failed.value.__cause__) == "CUDA out of memory (pretend)"
    assert len(steps) == 2 and len(ran) == 3 and ballot.ballots[-1] is True and ballot.ballots.count(True) == 1

    with pytest.raises(RuntimeError, match="pretend"):  # without a vote it is raised at once, as before
        calls.clear()
        with capture_steps(model, lambda step: None, lambda block: None, topk=2):
            generate(model, rows=1)


def test_with_a_vote_another_rank_stop_cancels_the_run_here(model):
    """A follower records nothing and wants nothing: rank 0's stop reaches it through the vote."""
    steps = []
    ballot = Ballot(others=lambda vote: vote == 3)  # rank 0 stops at the third vote (before step 1)
    with pytest.raises(GenerationCancelled):
        with capture_steps(model, steps.append, lambda block: None, agree=ballot):
            generate(model, rows=1)
    assert ballot.ballots == [False, False, False] and len(steps) == 1


def test_to_host_copies_every_tensor_and_skips_none():
    """The copies must not share memory with the model's tensors (the next step overwrites those)."""
    canvas = torch.arange(6).reshape(2, 3)
    weights = torch.ones(2, 3, requires_grad=True) * 2  # a tensor still in an autograd graph
    host = _to_host({"canvas": canvas, "weights": weights, "topk_ids": None})
    assert sorted(host) == ["canvas", "weights"]
    canvas[0, 0] = 99
    np.testing.assert_array_equal(host["canvas"], [[0, 1, 2], [3, 4, 5]])
    assert isinstance(host["weights"], np.ndarray) and np.all(host["weights"] == 2)


def test_the_accepted_mask_is_read_from_the_sampler_that_set_it():
    """A compiled accept_canvas stays bound to the first run's sampler (`__wrapped__.__self__`); a
    bound method sets its own object's mask; anything else falls back to the sampler given."""

    class Sampler:
        def accept_canvas(self):
            return None

    first, second = Sampler(), Sampler()
    assert _accepting_sampler(first) is first

    def compiled():
        return None

    compiled.__wrapped__ = first.accept_canvas
    second.accept_canvas = compiled
    assert _accepting_sampler(second) is first

    second.accept_canvas = first.accept_canvas  # bound to the first sampler, not wrapped: it sets the first's mask
    assert _accepting_sampler(second) is first

    second.accept_canvas = lambda: None  # neither wrapped nor bound
    assert _accepting_sampler(second) is second
