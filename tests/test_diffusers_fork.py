"""Forks on the diffusers backend (issue 55), on each of its three schedulers: a fork with no intervention equals its
parent from the fork step on bit for bit, each intervention holds from its step, a forbidden token never appears at
its position after the fork, a knob changes the run from its step on (each sampler's own knobs; the others refused in
one line naming those it reads).

The project's random-weight model with no EOS (tests/conftest.py) on the CPU, eager; the CLI on the built-in model.
The compiled path is the transformers backend's (diffusers records `compiled` as not read): its forks are
tests/test_fork.py's compiled test, bit for bit with no recompile.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backends import BackendError
from backends.diffusers_backend import DiffusersBackend
from backends.interventions import fork_trace, warm_start_trace
from backends.run import record_trace
from cli.main import main
from tests.spies import spy_on_decoder_inputs
from visualizer.interventions import content_hash, parse_spec
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

pytestmark = pytest.mark.model

PROMPT = "Write a six-line poem about the ocean."
# Each scheduler drawing (temperature above 0), so a fork that moved the pipeline's generator would show.
KNOBS = {
    "entropy-bound": dict(entropy_bound=0.5),
    "discrete-ddim": dict(temperature=0.7, corrector_steps=1, corrector_k=3),
    "block-refinement": dict(temperature=0.7, refine_threshold=0.6),
}
SAMPLERS = list(KNOBS)
ARRAYS = ("canvas", "accepted", "argmax", "entropy_nats", "topk_ids", "topk_probs")


@pytest.fixture(scope="module")
def backend(no_eos_model_dir):
    return DiffusersBackend(str(no_eos_model_dir), device="cpu")


def settings_for(sampler: str, **more) -> GenerationSettings:
    return GenerationSettings(seed=5, max_new_tokens=256, max_denoising_steps=7, sampler=sampler, **KNOBS[sampler], **more)


@pytest.fixture(scope="module")
def parents(backend):
    return {sampler: record_trace(backend, PROMPT, settings_for(sampler)) for sampler in SAMPLERS}


def fork(backend, parent, at, *specs):
    return fork_trace(backend, parent, "0" * 64, block=at[0], step=at[1],
                      interventions=tuple(parse_spec(spec) for spec in specs))


def same_step(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ARRAYS)


def first_changed(parent, branch) -> int | None:
    return next((i for i, (a, b) in enumerate(zip(parent.steps, branch.steps)) if not same_step(a, b)), None)


def one_token_text(backend, token: int) -> str:
    text = backend.tokenizer.decode([token])
    assert backend.tokenizer.encode(text, add_special_tokens=False) == [token]
    return text


# ---- the fork changes nothing else ---------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_fork_without_interventions_equals_its_parent_bit_for_bit(backend, parents, sampler):
    parent = parents[sampler]
    for at in ((1, 1), (1, 4)):
        branch = fork(backend, parent, at)
        assert len(branch.steps) == len(parent.steps) >= 4 and all(same_step(a, b) for a, b in zip(parent.steps, branch.steps))
        np.testing.assert_array_equal(branch.end.sequence, parent.end.sequence)
        assert branch.branch.to_dict() == {"parent": "0" * 64, "at": list(at), "interventions": []}


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_fork_in_the_second_block_equals_its_parent_and_topk_starts_after_it(backend, sampler):
    # seed 3: a block commits its last canvas, noise included, and at seed 5 that noise holds an EOS in block 1
    settings = settings_for(sampler).replace(seed=3, max_new_tokens=512, max_denoising_steps=4)
    parent = record_trace(backend, PROMPT, settings)
    assert len(parent.blocks) == 2
    assert all(same_step(a, b) for a, b in zip(parent.steps, fork(backend, parent, (2, 2)).steps))
    topk = fork(backend, parent, (2, 2), "topk 2")
    per_block = sum(s.block == 0 for s in parent.steps)  # DDIM's corrector takes a share of the 4 forwards
    assert first_changed(parent, topk) == per_block + 2  # block 2's step 2 conditions its step 3: the first changed
    np.testing.assert_array_equal(topk.blocks[0].tokens, parent.blocks[0].tokens)


# ---- each kind holds -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_forbidden_token_never_appears_at_its_position_after_the_fork(backend, parents, sampler):
    parent = parents[sampler]
    position = next(p for p in range(9, 60) if backend.tokenizer.encode(
        backend.tokenizer.decode([int(parent.blocks[0].tokens[p])]), add_special_tokens=False) == [int(parent.blocks[0].tokens[p])])
    token = int(parent.blocks[0].tokens[position])  # what the parent committed there
    branch = fork(backend, parent, (1, 2), f"forbid {position}={one_token_text(backend, token)}")
    assert first_changed(parent, branch) == 1
    for s in branch.steps[1:]:
        assert s.canvas[position] != token and s.argmax[position] != token  # not even as noise
        assert token not in s.topk_ids[position][s.topk_probs[position] > 0]
    assert branch.blocks[0].tokens[position] != token and branch.branch.token_ids == ((token,),)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_set_holds_from_its_step_to_the_block_end(backend, parents, sampler):
    parent = parents[sampler]
    branch = fork(backend, parent, (1, 3), "set 20=ocean waves")
    ids = np.array(backend.tokenizer.encode("ocean waves", add_special_tokens=False))
    where = np.arange(20, 20 + len(ids))
    assert len(ids) >= 2 and first_changed(parent, branch) == 2
    for s in branch.steps[2:]:
        assert s.accepted[where].all()
        np.testing.assert_array_equal(s.canvas[where], ids)
        np.testing.assert_array_equal(s.argmax[where], ids)
    np.testing.assert_array_equal(branch.blocks[0].tokens[where], ids)
    assert branch.branch.interventions == ("set 20=ocean waves",)


@pytest.mark.parametrize("sampler", ["entropy-bound", "block-refinement"])  # one decoder call a step (no corrector)
def test_remask_puts_the_forks_own_noise_on_the_canvas_the_fork_step_denoises(backend, parents, sampler, monkeypatch):
    parent = parents[sampler]
    inputs = spy_on_decoder_inputs(monkeypatch, backend.model)
    branch = fork(backend, parent, (1, 4), "remask 0-99")
    seen = inputs[3]["decoder_input_ids"][0].numpy()  # what step 4 denoised
    noise = torch.randint(0, backend.info.vocab_size, (1, 100), generator=torch.Generator().manual_seed(5))[0].numpy()
    np.testing.assert_array_equal(seen[:100], noise)
    np.testing.assert_array_equal(seen[100:], parent.steps[2].canvas[100:])
    assert all(same_step(a, b) for a, b in zip(parent.steps[:3], branch.steps[:3])) and first_changed(parent, branch) == 3
    if sampler == "block-refinement":  # what it had committed there is forgotten, by the record and the scheduler
        committed = np.flatnonzero(parent.steps[2].accepted[:100])
        assert committed.size > 10
        assert branch.steps[3].accepted[:100].sum() < parent.steps[3].accepted[:100].sum()
        # committed again later with sampled tokens, not kept as the noise (what a scheduler still holding them does)
        assert np.mean(branch.blocks[0].tokens[committed] == noise[committed]) < 0.1


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_nudge_and_topk_change_what_the_next_step_is_conditioned_on(backend, parents, sampler, monkeypatch):
    parent = parents[sampler]
    inputs = spy_on_decoder_inputs(monkeypatch, backend.model)
    branch = fork(backend, parent, (1, 3), "nudge 12=sea:0.5", "topk 4")
    sea = backend.tokenizer.encode("sea", add_special_tokens=False)[0]
    # step 3's own records are the parent's and step 4 reads the edit; DDIM's corrector sweeps after step 3's
    # predictor read step 3's distribution too, so there step 3's canvas changes already
    assert first_changed(parent, branch) == (2 if sampler == "discrete-ddim" else 3)
    later = [i for i in inputs if i["self_conditioning_logits"] is not None][2 if sampler != "discrete-ddim" else 4:]
    assert later
    for conditioned in later:  # every decoder call from step 4 on (DDIM's corrector after step 3's too)
        probs = conditioned["self_conditioning_logits"][0].float().softmax(-1)
        assert probs[12, sea] >= 0.5 - 1e-6
        kept = (probs > 0).sum(-1)
        assert kept[np.r_[0:12, 13:256]].max() <= 4 and kept[12] <= 5  # the nudge may add one outside the top 4


# ---- knobs: each sampler's own, from the fork step on -------------------------------------------------------
FORK_KNOBS = {"entropy-bound": ("entropy_bound", "t_min", "t_max"), "discrete-ddim": ("temperature", "corrector_k"),
              "block-refinement": ("temperature", "refine_threshold", "editing_threshold")}


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_knobs_set_to_their_current_values_equal_the_parent_bit_for_bit(backend, parents, sampler):
    parent = parents[sampler]
    assert backend.capabilities.sampler(sampler).fork_knobs == frozenset(FORK_KNOBS[sampler])
    current = parent.settings.to_dict()  # editing_threshold is off (None) in the parent: no value to set it to
    specs = [f"knob {name}={current[name]!r}" for name in FORK_KNOBS[sampler] if current[name] is not None]
    assert specs
    branch = fork(backend, parent, (1, 3), *specs)
    assert all(same_step(a, b) for a, b in zip(parent.steps, branch.steps)) and len(branch.steps) == len(parent.steps)
    np.testing.assert_array_equal(branch.end.sequence, parent.end.sequence)
    assert branch.branch.interventions == tuple(specs)


@pytest.mark.parametrize("sampler, spec", [
    ("entropy-bound", "knob entropy_bound=1000"),  # a step argument
    ("entropy-bound", "knob t_max=0.2"),  # the scheduler's config, read each step
    ("discrete-ddim", "knob temperature=0"),
    ("block-refinement", "knob refine_threshold=0.0001"),  # random weights: no sample is 0.001 probable
    ("block-refinement", "knob editing_threshold=0.0001"),  # editing turned on: committed tokens are redrawn
])
def test_a_changed_knob_changes_the_run_only_from_the_fork_step_on(backend, parents, sampler, spec):
    parent = parents[sampler]
    branch = fork(backend, parent, (1, 3), spec)
    assert first_changed(parent, branch) == 2  # steps 1 and 2 are the parent's; step 3 reads the new value
    assert branch.branch.interventions == (spec,)
    if spec.endswith("entropy_bound=1000") or "refine_threshold" in spec:  # a looser bar accepts more at once
        assert branch.steps[2].accepted.sum() > parent.steps[2].accepted.sum()


def test_ddims_corrector_k_changes_the_sweeps_from_the_fork_step_on(backend, parents, monkeypatch):
    # corrector_k is read from the run's scheduler at each sweep (a sweep follows each of the first 3 of the block's
    # 4 predictor steps here): the sweep after step 1 resamples the parent's 3 positions, those from step 2 on 40
    from diffusers import DiscreteDDIMScheduler

    picked = []
    select = DiscreteDDIMScheduler._select_positions
    monkeypatch.setattr(DiscreteDDIMScheduler, "_select_positions",
                        lambda self, *a, **kw: picked.append(int(self.config.corrector_k)) or select(self, *a, **kw))
    parent = parents["discrete-ddim"]
    branch = fork(backend, parent, (1, 2), "knob corrector_k=40")
    assert picked == [3, 40, 40]  # one run: the parent's k up to the fork step, the fork's from it on
    assert first_changed(parent, branch) == 1 and branch.branch.interventions == ("knob corrector_k=40",)


@pytest.mark.parametrize("sampler, spec, reads", [
    ("entropy-bound", "knob temperature=0.5", "entropy_bound, t_max, t_min"),  # its own t schedule, no temperature
    ("discrete-ddim", "knob refine_threshold=0.5", "corrector_k, temperature"),  # block refinement's knob
])
def test_a_knob_the_sampler_does_not_read_is_refused_naming_those_it_does(backend, parents, sampler, spec, reads):
    with pytest.raises(BackendError) as info:
        fork(backend, parents[sampler], (1, 2), spec)
    knob = spec.split()[1].split("=")[0]
    assert str(info.value) == (f"the diffusers backend's {sampler} sampler cannot change {knob} mid-run: "
                               f"it reads {reads} afresh each step")


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_warm_start_places_its_tokens_on_the_first_canvas_only(backend, parents, sampler, monkeypatch):
    settings = settings_for(sampler)
    plain, _ = warm_start_trace(backend, PROMPT, settings, ())
    assert all(same_step(a, b) for a, b in zip(parents[sampler].steps, plain.steps))  # nothing placed: a plain run
    inputs = spy_on_decoder_inputs(monkeypatch, backend.model)
    placed = tuple((p, 7) for p in range(30, 40))
    warm, kept = warm_start_trace(backend, PROMPT, settings, placed)
    assert kept == placed and np.all(inputs[0]["decoder_input_ids"][0, 30:40].numpy() == 7)
    first = inputs[0]["decoder_input_ids"][0].numpy()
    np.testing.assert_array_equal(np.delete(first, range(30, 40)),
                                  np.delete(torch.randint(0, backend.info.vocab_size, (1, 256), generator=torch.Generator()
                                                          .manual_seed(5))[0].numpy(), range(30, 40)))


# ---- the command, on the built-in model ----------------------------------------------------------------------
def test_fork_through_main_on_a_diffusers_run_of_the_built_in_model(tmp_path, capsys):
    run, branch = tmp_path / "run.json", tmp_path / "branch.json"
    assert main(["record", "--prompt", "What is 18 plus 24?", "--sampler", "block-refinement", "--seed", "0",
                 "--steps", "8", "--quiet", "--out", str(run)]) == 0
    parent = Trace.load(run)
    assert parent.model.backend == "diffusers"
    word = int(parent.blocks[0].tokens[2])
    text = parent.piece(word)
    assert main(["fork", str(run), "--at", "1:2", "--forbid", f"2={text}", "--quiet", "--out", str(branch)]) == 0
    made = Trace.load(branch)
    assert made.model.backend == "diffusers" and made.branch.parent == content_hash(run.read_bytes())
    assert made.blocks[0].tokens[2] != word and all(s.canvas[2] != word for s in made.steps[1:])
    assert same_step(parent.steps[0], made.steps[0])
    capsys.readouterr()
    assert main(["fork", str(run), "--at", "1:2", "--knob", "t_min=0.5", "--out", str(tmp_path / "no.json")]) == 2
    err = capsys.readouterr().err
    assert ("block-refinement sampler cannot change t_min mid-run: it reads editing_threshold, refine_threshold, "
            "temperature afresh each step") in err and err.count("\n") == 1
    assert not (tmp_path / "no.json").exists()
