"""The warm start (issue 55): `record --start-from RUN.json:BLOCK:STEP` puts the tokens RUN accepted at that step on
the new run's first canvas (its noise positions stay the new run's own noise), not held; the trace records where it
started; bad starts are refused in one line.

The mechanics on the project's small random-weight model (tests/conftest.py), the command on the built-in model.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from backends.interventions import warm_start_trace
from backends.run import record_trace
from tests.command_line import cli
from tests.spies import spy_on_decoder_inputs
from tests.trace_factory import trace_from_commit_steps
from visualizer.interventions import content_hash
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace, TraceError
from visualizer.warm_start import accepted_tokens, parse_warm_start

PROMPT = "Write a six-line poem about the ocean."
SETTINGS = GenerationSettings(seed=5, max_new_tokens=256, max_denoising_steps=6)
ARRAYS = ("canvas", "accepted", "argmax", "entropy_nats")


def same_run(a: Trace, b: Trace) -> bool:
    return len(a.steps) == len(b.steps) and all(
        np.array_equal(getattr(x, f), getattr(y, f)) for x, y in zip(a.steps, b.steps) for f in ARRAYS) and all(
        np.array_equal(x.tokens, y.tokens) for x, y in zip(a.blocks, b.blocks)) and np.array_equal(a.end.sequence, b.end.sequence)


def test_the_first_step_denoises_the_placed_tokens_on_the_runs_own_noise(random_backend, monkeypatch):
    plain_inputs = spy_on_decoder_inputs(monkeypatch, random_backend.model)
    parent = record_trace(random_backend, PROMPT, SETTINGS)
    own_noise = plain_inputs[0]["decoder_input_ids"][0].numpy()
    placed = accepted_tokens(parent.steps[2])
    assert 0 < len(placed) < 256
    inputs = spy_on_decoder_inputs(monkeypatch, random_backend.model)
    warm, recorded = warm_start_trace(random_backend, PROMPT, SETTINGS.replace(seed=6), placed)
    assert recorded == placed
    first = inputs[0]["decoder_input_ids"][0].numpy()
    where = [p for p, _ in placed]
    np.testing.assert_array_equal(first[where], [t for _, t in placed])
    again = spy_on_decoder_inputs(monkeypatch, random_backend.model)
    seed6 = record_trace(random_backend, PROMPT, SETTINGS.replace(seed=6))  # the new run's own noise elsewhere
    rest = np.setdiff1d(np.arange(256), where)
    np.testing.assert_array_equal(first[rest], again[0]["decoder_input_ids"][0].numpy()[rest])
    assert not np.array_equal(first[rest], own_noise[rest])  # seed 6's noise, not the parent's
    assert not same_run(warm, seed6) and warm.end.error is None
    assert not all(s.accepted[where].all() for s in warm.steps)  # not held: the sampler decides from step 1 on
    assert random_backend.fork_plan is None


def test_a_start_with_nothing_accepted_equals_a_plain_record_bit_for_bit(random_backend):
    parent = record_trace(random_backend, PROMPT, SETTINGS)
    step = parent.steps[0]
    noise_only = dataclasses.replace(step, accepted=np.zeros_like(step.accepted))  # a step-1 canvas all noise
    warm, placed = warm_start_trace(random_backend, PROMPT, SETTINGS, accepted_tokens(noise_only))
    assert placed == () and same_run(warm, parent)


def test_pins_keep_their_positions(random_backend):
    pinned = SETTINGS.replace(pins=((4, "sea"),))
    sea = random_backend.tokenizer.encode("sea", add_special_tokens=False)[0]
    warm, placed = warm_start_trace(random_backend, PROMPT, pinned, ((4, sea + 1), (5, sea + 1)))
    assert placed == ((5, sea + 1),)
    assert all(s.canvas[4] == sea for s in warm.steps)


def test_the_trace_records_its_start_and_older_traces_load_unchanged(random_backend, tmp_path):
    parent = record_trace(random_backend, PROMPT, SETTINGS)
    data = parent.to_dict()
    assert "warm_start" not in data and Trace.from_dict(data).warm_start is None
    good = {"from": "b" * 64, "at": [1, 3], "texts": ["0=Ocean"], "placed": [[0, 7], [9, 8]]}
    assert Trace.from_dict({**data, "warm_start": good}).warm_start.to_dict() == good
    text_only = {"from": None, "at": None, "texts": ["2=x"], "placed": [[2, 7]]}
    assert Trace.from_dict({**data, "warm_start": text_only}).warm_start.to_dict() == text_only
    for bad, message in (
        ({**good, "from": "xyz"}, "sha256"),
        ({**good, "at": None}, "with its from"),
        ({**good, "placed": [[256, 7]]}, "inside the canvas"),
        ({**good, "placed": [[3, 7], [3, 8]]}, "each position once"),
        ({"from": None}, "must be an object"),
    ):
        with pytest.raises(TraceError, match=message) as info:
            Trace.from_dict({**data, "warm_start": bad})
        assert "\n" not in str(info.value)
    assert parse_warm_start(None, 256, 10) is None


# ---- the command, in-process on the built-in model -------------------------------------------------------
@pytest.mark.model
def test_record_start_from_on_the_built_in_model(tmp_path):
    run, warm_path = tmp_path / "run.json", tmp_path / "warm.json"
    assert cli("record", "--demo", "acrostic", "--seed", "0", "--steps", "8", "--quiet", "--out", run).returncode == 0
    parent = Trace.load(run)
    last = parent.block_steps(0)[-1]
    done = cli("record", "--demo", "acrostic", "--seed", "0", "--steps", "8", "--quiet",
               "--start-from", f"{run}:1:{len(parent.block_steps(0))}", "--start-from-text", "0=Ocean", "--out", warm_path)
    assert done.returncode == 0, done.stderr
    warm = Trace.load(warm_path)
    start = warm.warm_start
    assert start.source == content_hash(run.read_bytes()) and (start.block, start.step) == (1, len(parent.block_steps(0)))
    assert start.texts == ("0=Ocean",)
    placed = dict(start.placed)
    from backends import default_model
    from backends.transformers_backend import load_tokenizer

    ocean = load_tokenizer(default_model()).encode("Ocean", add_special_tokens=False)
    assert [placed[p] for p in range(len(ocean))] == ocean  # the text wins where it meets the run's tokens
    committed, eos = parent.blocks[0].tokens, parent.blocks[0].eos_position
    from_run = dict(accepted_tokens(last))
    # block 1's committed tokens are the start, where the last step accepted them, up to its EOS (after it the
    # commit writes pad where the canvas holds EOS)
    checked = [p for p in from_run if len(ocean) <= p <= (eos if eos is not None else 255)]
    assert len(checked) >= 30 and all(placed[p] == from_run[p] == committed[p] for p in checked)
    assert set(placed) == set(from_run) | set(range(len(ocean)))
    assert warm.end.error is None


@pytest.mark.model
def test_bad_starts_are_refused_in_one_line(tmp_path):
    other = trace_from_commit_steps([[1, 2, 3, 1, 2, 3, 1, 2]], n_steps=3)  # a run of a canvas of 8
    small = other.save(tmp_path / "small.json")
    out = tmp_path / "warm.json"
    for argv, message in (
        (["--start-from", f"{small}:1:9"], "step 1:9 is outside this run: block 1 has steps 1 to 3"),
        (["--start-from", f"{small}:2:1"], "block 2 is outside this run: it has block 1 only"),
        (["--start-from", f"{small}:1"], "--start-from takes RUN.json:BLOCK:STEP"),
        (["--start-from", f"{tmp_path / 'none.json'}:1:1"], "cannot read"),
        (["--start-from", f"{small}:1:1", "--backend", "mlx"], "the mlx backend cannot warm-start a run (its capture "
                                                                "applies no edits"),
        (["--start-from-text", "3=x", "--backend", "mlx"], "; warm starts run on: transformers, diffusers"),
        (["--start-from-text", "3="], "empty text"),
        (["--start-from", f"{small}:1:1"], "that run's canvas is 8 positions and this model's 256"),
        (["--start-from-text", "300=x"], "position 300 is outside the canvas"),
    ):
        done = cli("record", "--demo", "acrostic", "--steps", "2", "--quiet", *argv, "--out", out)
        assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, (argv, done.stderr)
        assert not out.exists()
