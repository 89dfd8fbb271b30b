"""The fork (issue 55): a branch equals its parent up to the fork step, each intervention holds from there on and is
recorded, a branch replays from its trace, and bad forks are refused in one line with nothing lost.

Runs on the project's small random-weight models (tests/conftest.py) on the CPU, eager; the CLI on the built-in model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from backends import BackendError
from backends.interventions import fork_trace
from backends.run import record_trace
from cli.main import main
from tests.spies import spy_on_decoder_inputs
from visualizer.interventions import (
    InterventionError, content_hash, parse_branch, parse_intervention, parse_spec, plan_problems,
)
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace, TraceError

PROMPT = "Write a six-line poem about the ocean."
SETTINGS = GenerationSettings(seed=5, max_new_tokens=256, max_denoising_steps=7)
PARENT_HASH = "0" * 64
ARRAYS = ("canvas", "accepted", "argmax", "entropy_nats", "topk_ids", "topk_probs", "kl_nats")


@pytest.fixture(scope="module")
def parent(random_backend):
    return record_trace(random_backend, PROMPT, SETTINGS)


def fork(backend, parent, at, *specs):
    block, step = at
    return fork_trace(backend, parent, PARENT_HASH, block=block, step=step,
                      interventions=tuple(parse_spec(spec) for spec in specs))


def same_step(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ARRAYS if getattr(a, f) is not None) and (
        (a.kl_nats is None) == (b.kl_nats is None))


def first_changed(parent, branch) -> int | None:
    """The index of the first step whose records differ (None: every step equal)."""
    return next((i for i, (a, b) in enumerate(zip(parent.steps, branch.steps)) if not same_step(a, b)), None)


# ---- the fork itself -----------------------------------------------------------------------------------------
def test_a_fork_without_interventions_equals_its_parent_bit_for_bit(random_backend, parent):
    branch = fork(random_backend, parent, (1, 3))
    assert len(branch.steps) == len(parent.steps) == 7
    assert all(same_step(a, b) for a, b in zip(parent.steps, branch.steps))
    np.testing.assert_array_equal(branch.blocks[0].tokens, parent.blocks[0].tokens)
    np.testing.assert_array_equal(branch.end.sequence, parent.end.sequence)
    assert branch.branch.to_dict() == {"parent": PARENT_HASH, "at": [1, 3], "interventions": []}


def test_a_fork_in_the_second_block_equals_its_parent(no_eos_backend):
    settings = GenerationSettings(seed=2, max_new_tokens=512, max_denoising_steps=4)
    parent = record_trace(no_eos_backend, PROMPT, settings)
    branch = fork(no_eos_backend, parent, (2, 2))
    assert len(parent.blocks) == 2 and all(same_step(a, b) for a, b in zip(parent.steps, branch.steps))
    topk = fork(no_eos_backend, parent, (2, 2), "topk 2")
    assert first_changed(parent, topk) == 4 + 2  # block 2's step 2 conditions step 3: the first changed
    np.testing.assert_array_equal(topk.blocks[0].tokens, parent.blocks[0].tokens)


def test_set_holds_from_its_step_to_the_block_end_and_is_recorded(random_backend, parent):
    branch = fork(random_backend, parent, (1, 3), "set 20=ocean waves")
    ids = np.array(random_backend.tokenizer.encode("ocean waves", add_special_tokens=False))
    where = np.arange(20, 20 + len(ids))
    assert len(ids) >= 2 and first_changed(parent, branch) == 2
    for s in branch.steps[2:]:
        assert s.accepted[where].all() and np.all(s.entropy_nats[where] == 0)
        np.testing.assert_array_equal(s.canvas[where], ids)
        np.testing.assert_array_equal(s.argmax[where], ids)
    assert not all(s.accepted[where].all() for s in branch.steps[:2])
    np.testing.assert_array_equal(branch.blocks[0].tokens[where], ids)
    assert branch.branch.interventions == ("set 20=ocean waves",) and branch.branch.token_ids == (tuple(ids),)


def test_a_forbidden_token_never_appears_at_its_position_after_the_fork(random_backend, parent):
    position = 9
    token = int(parent.blocks[0].tokens[position])  # the token the parent committed there
    text = random_backend.tokenizer.decode([token])
    assert random_backend.tokenizer.encode(text, add_special_tokens=False) == [token]
    branch = fork(random_backend, parent, (1, 2), f"forbid {position}={text}")
    assert first_changed(parent, branch) == 1
    for s in branch.steps[1:]:
        assert s.argmax[position] != token
        assert not (s.accepted[position] and s.canvas[position] == token)  # never accepted there
        assert s.topk_ids[position, 0] != token and token not in s.topk_ids[position][s.topk_probs[position] > 0]
    assert branch.blocks[0].tokens[position] != token
    assert branch.branch.token_ids == ((token,),)


def test_remask_puts_noise_on_the_canvas_the_fork_step_denoises(random_backend, parent, monkeypatch):
    record_trace(random_backend, PROMPT, SETTINGS)
    stock_draws = torch.random.get_rng_state()  # the global generator after the parent's run
    inputs = spy_on_decoder_inputs(monkeypatch, random_backend.model)
    branch = fork(random_backend, parent, (1, 4), "remask 30-39")
    seen = inputs[3]["decoder_input_ids"][0].numpy()  # what step 4 denoised
    before = parent.steps[2].canvas  # what it would have denoised: step 3's next canvas
    noise = torch.randint(0, random_backend.info.vocab_size, (1, 10), generator=torch.Generator().manual_seed(SETTINGS.seed))
    np.testing.assert_array_equal(seen[30:40], noise[0].numpy())
    np.testing.assert_array_equal(np.delete(seen, range(30, 40)), np.delete(before, range(30, 40)))
    assert not np.array_equal(seen[30:40], before[30:40])
    assert all(same_step(a, b) for a, b in zip(parent.steps[:3], branch.steps[:3]))
    assert len(branch.steps) == len(parent.steps)
    assert torch.equal(torch.random.get_rng_state(), stock_draws)  # the noise drew nothing from the run's generator
    assert branch.branch.interventions == ("remask 30-39",)


def test_nudge_and_topk_change_what_the_next_step_is_conditioned_on(random_backend, parent, monkeypatch):
    inputs = spy_on_decoder_inputs(monkeypatch, random_backend.model)
    branch = fork(random_backend, parent, (1, 3), "nudge 12=sea:0.5", "topk 4")
    sea = random_backend.tokenizer.encode("sea", add_special_tokens=False)[0]
    assert first_changed(parent, branch) == 3  # step 3's own records are the parent's; step 4 reads the edit
    for conditioned in inputs[3:]:  # the self-conditioning step 4 onwards read
        probs = conditioned["self_conditioning_logits"][0].float().softmax(-1)
        assert probs[12, sea] >= 0.5 - 1e-6
        kept = (probs > 0).sum(-1)
        assert kept[np.r_[0:12, 13:256]].max() <= 4 and kept[12] <= 5  # the nudge may add one outside the top 4
    assert branch.branch.interventions == ("nudge 12=sea:0.5", "topk 4")


def test_a_knob_changes_from_the_fork_step_on(random_backend, parent):
    branch = fork(random_backend, parent, (1, 4), "knob entropy_bound=1000")
    assert first_changed(parent, branch) == 3
    assert all(b.accepted.sum() > a.accepted.sum() for a, b in zip(parent.steps[3:], branch.steps[3:]))
    cooler = fork(random_backend, parent, (1, 4), "knob t_max=0.2")
    assert first_changed(parent, cooler) == 3
    assert all(b.entropy_nats.mean() < a.entropy_nats.mean() for a, b in zip(parent.steps[3:], cooler.steps[3:]))
    again = record_trace(random_backend, PROMPT, SETTINGS)  # nothing of the fork stays on the model
    assert all(same_step(a, b) for a, b in zip(parent.steps, again.steps))


def test_a_knob_another_backend_reads_is_refused_naming_what_this_sampler_reads(random_backend, parent):
    """temperature is a fork knob on diffusers; transformers' entropy-bound reads its t schedule instead."""
    with pytest.raises(BackendError) as info:
        fork(random_backend, parent, (1, 4), "knob temperature=0.5")
    assert str(info.value) == ("the transformers backend's entropy-bound sampler cannot change temperature mid-run: "
                               "it reads entropy_bound, t_max, t_min afresh each step")


def test_a_branch_replays_from_its_trace(random_backend, parent, tmp_path):
    branch = fork(random_backend, parent, (1, 2), "set 5=sea", "remask 40-41")
    loaded = Trace.load(branch.save(tmp_path / "branch.json"))
    assert loaded == branch and loaded.to_json() == branch.to_json()
    recorded = loaded.branch
    again = fork_trace(random_backend, parent, recorded.parent, block=recorded.block, step=recorded.step,
                       interventions=recorded.parsed())
    assert all(same_step(a, b) for a, b in zip(loaded.steps, again.steps)) and again.branch == recorded
    from visualizer.states import frame_refs, frame_state

    refs = frame_refs(loaded)
    assert frame_state(loaded, len(refs) - 1, refs) is not None


# ---- the record in the trace ---------------------------------------------------------------------------------
def test_a_trace_without_a_branch_writes_none_and_bad_branches_are_refused(parent):
    data = parent.to_dict()
    assert "branch" not in data and Trace.from_dict(data).branch is None
    good = {"parent": "a" * 64, "at": [1, 2], "interventions": [{"spec": "forbid 3=x", "ids": [7]}]}
    assert Trace.from_dict({**data, "branch": good}).branch.to_dict() == good
    for bad, message in (
        ({**good, "parent": "xyz"}, "sha256"),
        ({**good, "at": [0, 2]}, "counted from 1"),
        ({**good, "interventions": [{"spec": "forbid 999=x", "ids": [7]}]}, "outside the canvas"),
        ({**good, "interventions": [{"spec": "explode 3", "ids": []}]}, "unknown intervention"),
        ({**good, "interventions": [{"spec": "set 3=x", "ids": [10 ** 9]}]}, "vocabulary"),
    ):
        with pytest.raises(TraceError, match=message) as info:
            Trace.from_dict({**data, "branch": bad})
        assert "\n" not in str(info.value)
    assert parse_branch(None, 256, 10) is None


@pytest.mark.parametrize("kind, arg, message", [
    ("set", "3=", "empty text"),
    ("set", "x=sea", "canvas position"),
    ("forbid", "3", "POS=TEXT"),
    ("remask", "9-3", "before the first"),
    ("nudge", "3=sea:1.5", "above 0 and below 1"),
    ("nudge", "3=sea", "POS=TEXT:EPS"),
    ("topk", "0", "from 1"),
    ("knob", "seed=3", "cannot change mid-run"),
    ("knob", "nonsense=3", "cannot change mid-run: a fork changes entropy_bound, t_min, t_max, temperature, "),
    ("knob", "entropy_bound=-1", "entropy bound must be"),
])
def test_bad_interventions_are_refused_in_one_line(kind, arg, message):
    with pytest.raises(InterventionError, match=message) as info:
        parse_intervention(kind, arg)
    assert "\n" not in str(info.value)


def test_positions_outside_the_canvas_and_conflicts_are_refused(random_backend, parent):
    assert plan_problems((parse_spec("remask 250-256"),), 256) == [
        "remask 250-256: position 256 is outside the canvas (positions 0 to 255)"]
    assert plan_problems((parse_spec("set 4=a"), parse_spec("forbid 4=b")), 256) == [
        "position 4 is both set and forbidden: give it one of the two"]
    for at, specs, message in (
        ((1, 8), (), "outside this run: block 1 has steps 1 to 7"),
        ((2, 1), (), "outside this run: it has block 1 only"),
        ((1, 2), ("forbid 3=ocean waves",), "forbid takes one token"),
        ((1, 2), ("set 255=ocean waves",), "run past the canvas"),
    ):
        with pytest.raises(BackendError, match=message):
            fork(random_backend, parent, at, *specs)


def test_a_backend_without_forks_is_refused_naming_the_ones_with(random_backend, parent, monkeypatch):
    from backends.transformers_backend import CAPABILITIES

    monkeypatch.setattr(random_backend, "capabilities", CAPABILITIES.__class__(
        knobs=CAPABILITIES.knobs, samplers=CAPABILITIES.samplers, interventions=frozenset({"set"})))
    with pytest.raises(BackendError, match=r"cannot forbid a token \(forbid\): it applies set"):
        fork(random_backend, parent, (1, 2), "forbid 3=a")


@pytest.mark.parametrize("spec", ["set 4=ocean waves", "remask 3", "remask 3-9", "forbid 0=a=b", "nudge 5=x:y:0.123456789",
                                  "topk 7", "knob entropy_bound=0.123456789", "knob t_min=1e-05"])
def test_an_intervention_reads_back_from_its_record(spec):
    iv = parse_spec(spec)
    assert parse_spec(iv.spec()) == iv


def test_content_hash_is_the_files_sha256():
    assert content_hash(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# ---- the command, in-process on the built-in model -------------------------------------------------------
@pytest.mark.model
def test_fork_on_the_built_in_model_through_main(tmp_path, capsys):
    run, branch = tmp_path / "run.json", tmp_path / "branch.json"
    assert main(["record", "--demo", "acrostic", "--seed", "0", "--steps", "8", "--quiet", "--out", str(run)]) == 0
    before = run.read_bytes()
    parent = Trace.load(run)
    word = int(parent.blocks[0].tokens[11])
    from backends import default_model
    from backends.transformers_backend import load_tokenizer

    assert load_tokenizer(default_model()).encode(parent.piece(word), add_special_tokens=False) == [word]
    assert main(["fork", str(run), "--at", "1:4", "--forbid", f"11={parent.piece(word)}", "--set", "2=storm",
                 "--quiet", "--out", str(branch)]) == 0
    made = Trace.load(branch)
    assert made.branch.parent == content_hash(before) and made.branch.block == 1 and made.branch.step == 4
    assert made.branch.interventions == (f"forbid 11={parent.piece(word)}", "set 2=storm")
    assert made.blocks[0].tokens[11] != word and all(s.argmax[11] != word for s in made.steps[3:])
    assert all(same_step(a, b) for a, b in zip(parent.steps[:3], made.steps[:3]))
    capsys.readouterr()

    refused = tmp_path / "refused.json"
    for argv, message in (
        (["--at", "1:99"], "outside this run: block 1 has steps 1 to"),
        (["--at", "1:2", "--set", "999=a"], "outside the canvas"),
        (["--at", "1:2", "--set", "3="], "empty text"),
        (["--at", "1:2", "--knob", "colour=3"], "cannot change mid-run"),
        (["--at", "1:2", "--backend", "mlx"], "the mlx backend cannot fork a run (its capture applies no edits"),
        (["--at", "1:2", "--backend", "mlx"], "not even pins); forks run on: transformers, diffusers"),
        (["--at", "x"], "BLOCK:STEP"),
        (["--at", "1:2", "--forbid", "3=ocean waves"], "forbid takes one token"),
    ):
        assert main(["fork", str(run), *argv, "--out", str(refused)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not refused.exists() and not list(tmp_path.glob("refused*"))
    assert main(["fork", str(run), "--at", "1:2", "--out", str(run)]) == 2
    assert "the parent stays as recorded" in capsys.readouterr().err
    assert run.read_bytes() == before  # the parent is only read
    assert json.loads(branch.read_text())["branch"]["at"] == [1, 4]


def test_compiled_forks_equal_their_parent_and_hold(no_eos_model_dir):
    """The compiled path (static cache, torch.compile) on a backend of its own (see test_layers_and_pins's compiled
    test for why): the no-intervention fork equals its compiled parent bit for bit, a forbid and a topk hold there
    too, and no intervention costs a recompile; entropy_bound, compiled into the sampler, is refused."""
    from backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(no_eos_model_dir), device="cpu")
    parent = record_trace(backend, PROMPT, SETTINGS.replace(compiled=True))
    assert parent.settings.compiled and parent.end.error is None
    assert all(same_step(a, b) for a, b in zip(parent.steps, fork(backend, parent, (1, 3)).steps))
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    token = int(parent.blocks[0].tokens[9])
    branch = fork(backend, parent, (1, 2), f"forbid 9={backend.tokenizer.decode([token])}", "topk 3", "knob t_max=0.5")
    fork(backend, parent, (1, 2), "set 4=sea", "remask 10-20", "nudge 3=sea:0.2")
    assert counters["stats"]["unique_graphs"] == graphs  # the interventions sit outside the compiled functions
    assert branch.end.error is None and first_changed(parent, branch) == 1
    assert all(s.argmax[9] != token for s in branch.steps[1:]) and branch.blocks[0].tokens[9] != token
    with pytest.raises(BackendError, match="cannot change in a compiled run"):
        fork(backend, parent, (1, 2), "knob entropy_bound=2")
    backend.close()


def test_compare_marks_the_fork_point_and_what_changed(random_backend, parent):
    from visualizer.compare import align, branch_changes, run_labels, run_title, side_captions

    branch = fork(random_backend, parent, (1, 3), "set 20=ocean waves")
    changes = branch_changes(parent, branch)
    ids = random_backend.tokenizer.encode("ocean waves", add_special_tokens=False)
    changed = {p for _, p in changes.tokens}
    assert changes.fork_step == 2 and {20 + i for i, t in enumerate(ids) if parent.blocks[0].tokens[20 + i] != t} <= changed
    assert changes.commit_steps  # the set tokens are accepted at the fork step, not when the parent accepted them
    assert branch_changes(branch, parent) is None  # the parent is no branch
    assert run_labels(parent, branch)[1] == f"B: {run_title(branch)}; branch at 1:3 (set 20=ocean waves)"
    captions = [side_captions(parent, branch, at)[1][1] for at in align(parent, branch)]
    assert [i for i, line in enumerate(captions) if line.endswith("(fork point)")] == [2]
