"""Commit-order metrics pinned against hand-built traces with known answers, and tau_b against scipy."""

import itertools
import json

import numpy as np
import pytest
from scipy.stats import kendalltau
from tests.command_line import cli
from tests.trace_factory import PAD_ID, block_tokens, trace_from_commit_steps, trace_from_masks

from cli import main
from visualizer.metrics import (
    Undefined,
    bin_tau_b,
    block_commits,
    block_position_details,
    block_sequential_tau_b,
    live_readout,
    metrics_json,
    position_details,
    run_metrics,
    tau_b,
    tau_series,
)
from visualizer.metrics.order import same_step_fraction
from visualizer.states import frame_refs
from visualizer.trace import Trace


def tau_b_by_pairs(x, y) -> float:
    """Kendall tau_b from its definition, pair by pair (independent of scipy)."""
    concordant = discordant = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            ties_x += 1
        elif dy == 0:
            ties_y += 1
        elif dx == dy:
            concordant += 1
        else:
            discordant += 1
    return (concordant - discordant) / np.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))


# ---- tau_b, control, bins ---------------------------------------------------------------------------
def test_tau_b_matches_scipy_and_the_definition_on_heavily_tied_random_inputs():
    rng = np.random.default_rng(0)
    for _ in range(40):
        n = int(rng.integers(3, 120))
        steps = rng.integers(0, int(rng.integers(2, 5)), n)  # 2-4 distinct steps: heavy ties
        if np.all(steps == steps[0]):
            continue
        ours = tau_b(steps)
        assert ours == pytest.approx(kendalltau(np.arange(n), steps, variant="b").statistic, abs=1e-12)
        assert ours == pytest.approx(tau_b_by_pairs(np.arange(n), steps), abs=1e-12)


def test_tau_b_from_a_trace_equals_scipy_on_its_content_positions():
    rng = np.random.default_rng(1)
    for _ in range(10):
        canvas, n = 64, int(rng.integers(2, 64))
        commit = rng.integers(0, 4, canvas).tolist()
        trace = Trace.from_json(trace_from_commit_steps([commit], content_lengths=[n]).to_json())
        block = run_metrics(trace).blocks[0]
        expected = kendalltau(np.arange(n), commit[:n], variant="b").statistic
        if np.isnan(expected):
            assert isinstance(block.tau_b, Undefined)
        else:
            assert block.tau_b == pytest.approx(expected, abs=1e-12)
        assert block.tau_b_raw == pytest.approx(kendalltau(np.arange(canvas), commit, variant="b").statistic, abs=1e-12)


@pytest.mark.parametrize("n, block, expected", [(64, 16, 0.873), (128, 16, 0.939), (256, 16, 0.970), (256, 8, 0.986), (256, 32, 0.937), (256, 64, 0.868)])
def test_block_sequential_control_reproduces_the_reference_values(n, block, expected):
    assert round(block_sequential_tau_b(n, block), 3) == expected


def test_control_is_undefined_when_content_fits_one_control_block():
    assert isinstance(block_sequential_tau_b(16), Undefined)
    assert isinstance(block_sequential_tau_b(1), Undefined)
    assert block_sequential_tau_b(17) > 0


def test_bin_tau_b_uses_the_mean_commit_step_of_each_bin():
    # bins of 4: means 1.5, 0.5, 3.0 -> ranks 2, 1, 3 against bins 0, 1, 2: tau_b = 1/3
    steps = [0, 1, 2, 3, 0, 0, 1, 1, 3, 3, 3, 3]
    assert bin_tau_b(steps, bin_size=4) == pytest.approx(1 / 3)
    assert bin_tau_b(steps, bin_size=8) == pytest.approx(1.0)  # means 0.875 then 3.0
    assert "only one bin" in bin_tau_b(steps, bin_size=16).reason
    assert "same mean" in bin_tau_b([0, 1, 1, 0], bin_size=2).reason


def test_same_step_fraction_counts_tied_pairs():
    assert same_step_fraction([0, 0, 0, 1]) == pytest.approx(3 / 6)
    assert same_step_fraction([0, 1, 2]) == 0
    assert isinstance(same_step_fraction([5]), Undefined)


# ---- the trailing-EOS trap ------------------------------------------------------------------------------
def test_trailing_eos_committed_first_gives_negative_raw_tau_and_the_right_content_value():
    positions = np.arange(256)
    commit = np.where(positions < 64, 1 + positions // 16, 0)  # EOS and pad at step 0, content in blocks
    trace = trace_from_commit_steps([commit.tolist()], content_lengths=[64])
    block = run_metrics(trace).blocks[0]
    assert block.tau_b_raw < -0.4
    assert block.tau_b == pytest.approx(0.8728715609439697)  # content alone: the block-sequential value
    assert block.control_tau_b == pytest.approx(block.tau_b)
    assert (block.content_length, block.excluded_eos, block.excluded_pad) == (64, 1, 191)


def test_content_cuts_trailing_pad_and_an_eos_of_either_id():
    tokens = block_tokens(16, None)
    tokens[10:] = PAD_ID
    tokens[8] = 3  # the end-of-turn id, the model's second EOS
    tokens[6:8] = PAD_ID  # pad right before the EOS is cut too
    trace = trace_from_commit_steps([[0] * 16], tokens=[tokens])
    commits = block_commits(trace, 0)
    assert (commits.content_length, commits.excluded_eos, commits.excluded_pad) == (6, 1, 9)


# ---- per-position definitions --------------------------------------------------------------------------
def remask_trace():
    masks = [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0],  # position 0 re-masked at step 1
        [1, 1, 1, 1, 0, 0],
        [1, 0, 1, 1, 1, 0],  # position 1 re-masked at step 3; position 5 never accepted
    ]
    argmax = [[20, 21, 22, 23, 24, 25], [30, 21, 22, 23, 24, 25], [30, 21, 40, 23, 24, 25], [30, 21, 40, 23, 24, 25]]
    entropy = [[0.1 * (t + 1) + 0.01 * p for p in range(6)] for t in range(4)]
    tokens = [30, 21, 40, 23, 24, 25]
    return trace_from_masks([masks], tokens=[tokens], argmax=[argmax], entropy=[entropy], step_budget=10)


def test_commit_settle_remask_and_entropy_at_commit_by_hand():
    trace = Trace.from_json(remask_trace().to_json())
    block = run_metrics(trace).blocks[0]
    assert block.commit_step == [0, 1, 1, 2, 3, 4]  # 4 = steps_used: committed at finalization
    assert block.settle_step == [1, 0, 2, 0, 0, 0]
    assert block.remask_events == 2 and block.remasked_positions == [0, 1]
    assert block.commit_entropy_nats == pytest.approx([0.1, 0.21, 0.22, 0.33, 0.44, 0.45])  # last step for pos 5
    assert block.commits_per_step == [1, 2, 1, 1]
    assert block.accept_steps == 4 and block.tokens_per_accept_step == pytest.approx(5 / 4)
    assert block.committed_at_finalize == 1
    assert block.same_step_fraction == pytest.approx(1 / 15)
    assert block.mean_commit_entropy_nats == pytest.approx(np.mean([0.1, 0.21, 0.22, 0.33, 0.44, 0.45]))
    assert (block.steps_used, block.step_budget) == (4, 10)
    run = run_metrics(trace)
    assert run.monotone is False and run.remask_events == 2


def test_monotone_run_and_steps_against_budget():
    run = run_metrics(trace_from_commit_steps([[0, 1, 1, 2]], step_budget=48))
    assert run.monotone is True and run.remask_events == 0
    assert (run.steps_used, run.step_budget) == (3, 48)


def test_blocks_are_averaged_never_pooled():
    first = [0, 0, 1, 1, 2, 2, 3, 3]  # left to right
    second = [3, 3, 2, 2, 1, 1, 0, 0]  # right to left
    trace = trace_from_commit_steps([first, second], content_lengths=[None, None])
    run = run_metrics(trace)
    per_block = [m.tau_b for m in run.blocks]
    assert per_block[0] == pytest.approx(-per_block[1])
    assert run.tau_b_mean == pytest.approx(0.0)
    pooled = kendalltau(np.arange(16), first + [s + 4 for s in second], variant="b").statistic
    assert abs(pooled) > 0.3  # what pooling the positions of both canvases would have reported


# ---- degenerate cases ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "commit, content, reason",
    [
        ([0, 1, 2, 3], 1, "only one content position"),
        ([2, 2, 2, 1], 3, "same step"),
        ([0, 1, 2, 3], 0, "no content positions"),
    ],
)
def test_degenerate_blocks_are_undefined_with_a_reason(commit, content, reason):
    trace = trace_from_commit_steps([commit], content_lengths=[content])
    block = run_metrics(trace).blocks[0]
    assert isinstance(block.tau_b, Undefined) and reason in block.tau_b.reason
    data = metrics_json(trace)
    assert data["blocks"][0]["tau_b"] is None and reason in data["blocks"][0]["tau_b_undefined"]
    assert data["tau_b_mean"] is None and data["tau_b_mean_undefined"]
    json.dumps(data, allow_nan=False)


def test_empty_block_reports_every_figure_as_undefined_not_zero():
    run = run_metrics(trace_from_commit_steps([[0, 0, 1, 1]], content_lengths=[0]))
    block = run.blocks[0]
    for name in ("tau_b", "tokens_per_accept_step", "same_step_fraction", "mean_commit_entropy_nats"):
        assert isinstance(getattr(block, name), Undefined), name
    assert block.content_length == 0 and block.excluded_eos == 1 and block.excluded_pad == 3


def test_cancelled_run_counts_the_unfinished_block_and_measures_the_committed_one():
    trace = trace_from_commit_steps([[0, 1, 2, 3], [0, 0, 1, 1]], unfinished=1)
    run = run_metrics(trace)
    assert len(run.blocks) == 1 and run.unfinished_blocks == 1
    assert run.tau_b_mean == pytest.approx(1.0)


def test_metrics_json_is_strict_json_with_reasons_for_undefined_bins():
    data = metrics_json(remask_trace())
    text = json.dumps(data, allow_nan=False)
    assert json.loads(text)["blocks"][0]["bin_tau_b"]["8"] is None
    assert json.loads(text)["blocks"][0]["bin_tau_b"]["4"] == pytest.approx(1.0)
    assert "only one bin" in data["blocks"][0]["bin_tau_b_undefined"]["8"]
    assert "4" not in data["blocks"][0]["bin_tau_b_undefined"]
    assert "never pooled" in data["definitions"]["tau_b"]


# ---- the live readout --------------------------------------------------------------------------------
def live_trace():
    rng = np.random.default_rng(3)
    commit = rng.integers(0, 6, 40).tolist()
    commit[0], commit[5] = 0, None  # position 5 is never accepted
    masks = [[c is not None and c <= t for c in commit] for t in range(7)]
    masks[3][0] = False  # a re-mask
    argmax = [block_tokens(40, 30 if t >= 2 else 12) for t in range(7)]  # the EOS moves: 12, then 30
    entropy = rng.uniform(0.001, 2.0, (7, 40))
    return trace_from_masks([masks, masks], content_lengths=[30, 30], argmax=[argmax, argmax], entropy=[entropy, entropy])


def test_live_tau_counts_pending_positions_as_tied_later_and_reads_content_from_the_argmax():
    trace = live_trace()
    refs = frame_refs(trace)
    readout = live_readout(trace, 1, refs=refs)  # block 0 after step 1
    masks = np.array([s.accepted for s in trace.steps[:2]])
    first = np.where(masks.any(0), masks.argmax(0), 2)[:12]  # content: 12 positions (EOS in the argmax)
    assert readout.step == 1 and readout.content_length == 12 and not readout.final
    assert readout.tau_b == pytest.approx(kendalltau(np.arange(12), first, variant="b").statistic)
    assert readout.pending == int(np.count_nonzero(first == 2))


def test_live_values_end_exactly_on_the_end_of_run_metrics():
    trace = live_trace()
    refs = frame_refs(trace)
    final = run_metrics(trace).blocks[0]
    for frame in (6, 7):  # the block's last step, then its commit frame
        r = live_readout(trace, frame, refs=refs)
        assert r.final
        assert r.tau_b == pytest.approx(final.tau_b)
        assert r.control_tau_b == pytest.approx(final.control_tau_b)
        assert r.tau_b_raw == pytest.approx(final.tau_b_raw)
        assert r.content_length == final.content_length
        assert r.tokens_per_accept_step == pytest.approx(final.tokens_per_accept_step)
        assert r.same_step_fraction == pytest.approx(final.same_step_fraction)
        assert r.remask_events == final.remask_events
        assert r.pending == final.committed_at_finalize
        assert r.mean_commit_entropy_nats == pytest.approx(final.mean_commit_entropy_nats)
    assert live_readout(trace, 6, refs=refs).run_blocks == 0
    assert live_readout(trace, 7, refs=refs).run_blocks == 1
    assert live_readout(trace, 7, refs=refs).run_tau_b_mean == pytest.approx(final.tau_b)


def test_tau_series_matches_the_readout_at_every_frame_and_is_not_stale():
    trace = live_trace()
    refs = frame_refs(trace)
    series = tau_series(trace, 1)
    for point, frame in zip(series, range(8, 15)):
        r = live_readout(trace, frame, refs=refs)
        assert (point.step, point.measured_length) == (r.step, r.measured_length)
        assert point.tau_b == r.tau_b or point.tau_b == pytest.approx(r.tau_b)
    other = trace_from_commit_steps([list(range(40))[::-1]])  # a different trace: its own values
    assert tau_series(other, 0)[-1].tau_b == pytest.approx(-1.0)
    assert len(tau_series(trace, 1, frame=10, refs=refs)) == 3


def test_monotone_flag_and_run_mean_follow_the_frames():
    trace = live_trace()
    refs = frame_refs(trace)
    assert live_readout(trace, 2, refs=refs).monotone is True
    assert live_readout(trace, 3, refs=refs).monotone is False  # re-mask at step 3
    later = live_readout(trace, 8, refs=refs)  # block 1, step 0: block 0 had a re-mask
    assert later.monotone is False and later.run_blocks == 1


def test_position_details_tell_a_tokens_story():
    trace = remask_trace()
    d = position_details(trace, 0, 1)
    assert (d["commit_step"], d["settle_step"], d["remask_steps"]) == (1, 0, [3])
    assert d["accepted_spans"] == [[1, 2]]
    assert d["commit_entropy_nats"] == pytest.approx(0.21)
    assert d["piece"] == "t21" and d["settled"] and not d["pending"]
    last = position_details(trace, 0, 5)
    assert last["committed_at_finalize"] and last["commit_step"] == 4
    early = position_details(trace, 0, 5, frame=1)
    assert early["pending"] and early["commit_step"] is None and early["commit_entropy_nats"] is None
    assert early["token_id"] is None and early["piece"] is None  # noise is never shown as text
    zero = position_details(trace, 0, 0, frame=1)
    assert zero["remask_steps"] == [1] and zero["accepted_spans"] == [[0, 0]] and not zero["accepted_now"]
    with pytest.raises(ValueError):
        position_details(trace, 0, 6)


def test_block_position_details_before_the_block_starts():
    trace = live_trace()
    details = block_position_details(trace, 1, frame=0)
    assert len(details) == 40 and not any(d["started"] for d in details)


# ---- command line --------------------------------------------------------------------------------
def test_metrics_command_prints_json_through_the_entry_point(tmp_path):
    path = remask_trace().save(tmp_path / "run.json")
    out = cli("metrics", path, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["blocks"][0]["commit_step"] == [0, 1, 1, 2, 3, 4]
    assert data["blocks"][0]["bin_tau_b"]["8"] is None


def test_metrics_command_prints_a_summary_counting_blocks_and_steps_from_1(tmp_path, capsys):
    trace = remask_trace()
    path = trace.save(tmp_path / "run.json")
    assert main(["metrics", str(path)]) == 0
    out = capsys.readouterr().out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)  # a person's lines, not JSON
    data = json.loads(_metrics_json(path, capsys))
    block = data["blocks"][0]
    assert f"block 1: {block['steps_used']} of {block['step_budget']} steps" in out and "block 0" not in out
    assert f"tau_b {block['tau_b']:.3g}" in out and f"{data['remask_events']} re-masks" in out
    assert out.rstrip().endswith("--json")


def _metrics_json(path, capsys) -> str:
    assert main(["metrics", str(path), "--json"]) == 0
    return capsys.readouterr().out


def test_metrics_command_can_leave_out_positions(tmp_path, capsys):
    path = remask_trace().save(tmp_path / "run.json")
    assert main(["metrics", str(path), "--no-positions"]) == 0
    block = json.loads(capsys.readouterr().out)["blocks"][0]
    assert "commit_step" not in block and block["remask_events"] == 2


def test_metrics_command_reports_a_bad_file_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["metrics", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert main(["metrics", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_position_details_mark_the_eos_and_the_pad_after_it_as_excluded():
    """Past the content: the EOS position says "eos", the pad after it "pad" (the tooltip's
    "excluded from tau_b (...)"); content positions say None. Mutation testing found this unchecked."""
    from tests.trace_factory import trace_from_text
    from visualizer.metrics.live import block_position_details

    trace = trace_from_text([["a", "b"]], [[0, 1, 0, 0, 0]])  # canvas 5: a, b, EOS, pad, pad
    details = block_position_details(trace, 0)
    assert [d["excluded"] for d in details] == [None, None, "eos", "pad", "pad"]
    assert [d["content"] for d in details] == [True, True, False, False, False]
    assert all(d["started"] for d in details)


# ---- found by mutation testing (docs/mutation.md) ----------------------------------------------------
def test_the_run_values_use_each_blocks_own_figures():
    """Two blocks in opposite orders (tau_b +1 and -1) and different commit entropies: the live
    run mean and the run's mean commit entropy must combine both blocks, never repeat the first
    (the final value of a block is cached per block and per include_thought)."""
    trace = trace_from_commit_steps(
        [list(range(40)), list(range(40))[::-1]], entropy=[np.full((40, 40), 0.5), np.full((40, 40), 1.5)]
    )
    refs = frame_refs(trace)
    metrics = run_metrics(trace)
    assert [b.tau_b for b in metrics.blocks] == [pytest.approx(1.0), pytest.approx(-1.0)]
    assert metrics.mean_commit_entropy_nats == pytest.approx(1.0)
    for include_thought in (False, True):
        last = live_readout(trace, len(refs) - 1, refs=refs, include_thought=include_thought)
        assert last.run_blocks == 2 and last.run_tau_b_mean == pytest.approx(0.0)


def test_a_bootstrap_ci_needs_at_least_half_of_its_resamples_defined():
    from visualizer.metrics.stats import clustered_ci

    def defined_every(n):
        calls = itertools.count()
        return lambda rows: 1.0 if next(calls) % n == 0 else Undefined("one class only")

    assert clustered_ci(["a", "b"], defined_every(2), n_resamples=10) == (1.0, 1.0)  # 5 of 10: enough
    assert clustered_ci(["a", "b"], defined_every(3), n_resamples=10) == Undefined("undefined in 6 of 10 resamples")


def test_an_empty_tertile_is_named_and_undefined():
    """Ties at a cut leave a tertile empty: it keeps its name, with no generations and reasons."""
    from visualizer.metrics.stats import reliability_tertiles

    rows = reliability_tertiles([1, 1, 1, 1, 2, 2], [True, False] * 3, ["a", "b", "c"] * 2, n_resamples=20)
    assert [r["tertile"] for r in rows] == ["low", "middle", "high"]
    [empty] = [r for r in rows if r["generations"] == 0]
    assert empty == {"tertile": empty["tertile"], "generations": 0, "entropy_range": Undefined("empty tertile"),
                     "accuracy": Undefined("empty tertile (ties at the cut)"), "accuracy_ci": Undefined("empty tertile")}


def test_structure_figures_with_nothing_to_measure_say_why():
    from visualizer.metrics.structure import difference_ci, structure_first

    assert difference_ci(["p", "q"], [Undefined("x"), Undefined("y")]) == (
        Undefined("undefined in every run"), Undefined("no defined run"), None)
    unfinished = trace_from_commit_steps([[0, 1, 2, 3]], unfinished=1)  # cancelled before its first commit
    for include_thought in (False, True):
        empty = structure_first(unfinished, family="sentences", include_thought=include_thought)
        assert empty.include_thought is include_thought and empty.blocks == ()
        assert empty.difference == Undefined("no block committed yet")


def test_metrics_json_measures_both_parts_with_the_thought_asked_for():
    """`--include-thought` reaches the commit-order metrics as well as structure first."""
    trace = trace_from_commit_steps([[0, 1, 2, 3]])
    for include_thought, label in ((False, "answer tokens only"), (True, "answer and thought tokens")):
        out = metrics_json(trace, include_thought=include_thought)
        assert out["measured"] == out["blocks"][0]["measured"] == out["structure_first"]["measured"] == label


def test_the_run_means_say_which_figure_is_undefined_and_average_each_bin_size():
    """Block 1 commits every position on one step: its tau_b and bin values are undefined, so the
    run means are block 0's; with no defined block at all, the reason names the figure."""
    from visualizer.metrics import BIN_SIZES

    run = run_metrics(trace_from_commit_steps([list(range(40)), [0] * 40]))
    assert run.tau_b_mean == pytest.approx(run.blocks[0].tau_b)
    assert set(run.bin_tau_b_mean) == set(BIN_SIZES)
    assert run.bin_tau_b_mean[16] == pytest.approx(run.blocks[0].bin_tau_b[16])
    assert run.bin_tau_b_mean[64] == Undefined("no block has a defined tau_b at bin size 64")
    flat = run_metrics(trace_from_commit_steps([[0] * 40]))
    assert flat.tau_b_mean == Undefined("no block has a defined tau_b")


def test_a_live_readout_counts_same_step_pairs_among_the_accepted_positions_only():
    """Before the block ends, pending positions have no commit step yet: same_step_fraction is over
    the positions accepted so far (at the block's end, over all of them)."""
    trace = live_trace()
    readout = live_readout(trace, 1, refs=frame_refs(trace))  # block 0 after step 1
    masks = np.array([s.accepted for s in trace.steps[:2]])[:, :12]  # content: 12 positions
    accepted = masks.argmax(0)[masks.any(0)]
    assert not readout.final and accepted.size < 12
    assert readout.same_step_fraction == pytest.approx(same_step_fraction(accepted))


def test_auroc_is_the_share_of_positive_negative_pairs_in_order():
    from visualizer.metrics.stats import auroc

    scores, labels = [0.9, 0.8, 0.8, 0.3, 0.2], [True, True, False, False, True]
    pairs = [(p, n) for p, lp in zip(scores, labels) if lp for n, ln in zip(scores, labels) if not ln]
    by_hand = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs) / len(pairs)
    assert auroc(scores, labels) == pytest.approx(by_hand)
    assert auroc([1.0, 2.0], [True, True]) == Undefined("needs both correct and incorrect answers")


def test_metrics_json_uses_the_family_asked_for():
    trace = trace_from_commit_steps([[0, 1, 2, 3]])  # its prompt suggests no family: "generic"
    assert metrics_json(trace)["structure_first"]["family"] == "generic"
    assert metrics_json(trace, family="code")["structure_first"]["family"] == "code"
