"""Every step read against its end (issue 56): finalized steps and flips on a hand-computed trace, found then
lost on scripted answers, ECE / Brier / AUPRC against direct computations, nothing pooled silently, and the
probe's new columns in the Parquet files."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.trace_factory import EOS_ID, PAD_ID, masks_from_commit_steps, trace_from_masks
from visualizer.metrics import Undefined
from visualizer.metrics.calibration import POOLED_WARNING, auprc, brier, calibration, ece, reliability_bins
from visualizer.metrics.found_lost import answer_trajectory, step_texts
from visualizer.metrics.trajectory import block_trajectory, run_trajectory, top2_margin

# One block of 6 positions over 4 steps; content is positions 0..3 (EOS at 4, pad at 5).
TOKENS = np.array([10, 11, 12, 13, EOS_ID, PAD_ID])
ARGMAX = [
    [10, 20, 12, 21, 1, 9],   # step 0
    [10, 11, 22, 13, 1, 0],   # step 1
    [10, 11, 12, 23, 1, 0],   # step 2
    [10, 11, 12, 13, 1, 0],   # step 3 = the committed tokens
]
COMMITS = [1, 1, 3, 0, 0, 0]  # first acceptance of each position


def _trace():
    masks = masks_from_commit_steps(COMMITS, 4)
    return trace_from_masks([masks], tokens=[TOKENS], argmax=[ARGMAX])


def test_finalized_steps_and_flips_equal_the_hand_computed_ones():
    t = block_trajectory(_trace(), 0)
    # position 0: final from step 0; 1: from 1; 2: from 2 (22 at step 1); 3: from 3 (23 at step 2); EOS: 0; pad: 1
    assert t.finalized_step.tolist() == [0, 1, 2, 3, 0, 1]
    assert t.argmax_flips.tolist() == [0, 1, 2, 3, 0, 1]  # position 2: 12 -> 22 -> 12; position 3: 21 -> 13 -> 23 -> 13
    assert t.commit_after_finalized_steps.tolist() == [1, 0, 1, -3, 0, -1]
    # content 0..3 finalized within ceil(f * 4) steps: f=0.1..0.25 -> 1 step: {0}; 0.5 -> 2 steps: {0, 1}; 1.0: all
    assert t.finalized_by_fraction[0.2] == 0.25 and t.finalized_by_fraction[0.5] == 0.5 and t.finalized_by_fraction[1.0] == 1.0
    run = run_trajectory(_trace())
    assert run.mean_finalized_step == pytest.approx(1.5) and run.finalized_at_half == 0.5
    assert isinstance(run.mean_commit_confidence, Undefined)  # no candidates recorded: said, not 0


def test_a_final_token_that_is_not_the_last_argmax_is_never_finalized():
    tokens = TOKENS.copy()
    tokens[0] = 30  # a sampler that commits a sample, not the argmax
    masks = masks_from_commit_steps(COMMITS, 4)
    t = block_trajectory(trace_from_masks([masks], tokens=[tokens], argmax=[ARGMAX]), 0)
    assert t.finalized_step[0] == 4


def test_top2_margin_from_the_candidates():
    probs = np.array([[[0.7, 0.2, 0.1], [0.5, 0.5, 0.0]]], dtype=np.float16)  # (steps, canvas, k)
    np.testing.assert_allclose(top2_margin(probs), [[0.5, 0.0]], atol=1e-3)
    assert isinstance(top2_margin(probs[..., :1]), Undefined) and isinstance(top2_margin(None), Undefined)


def test_found_then_lost_on_a_scripted_answer_that_appears_and_vanishes():
    trace = _trace()
    texts = step_texts(trace)
    assert texts[-1] == "t10t11t12t13" and texts[1] == "t10t11t22t13"  # cut at the EOS; the pieces are t<id>
    right = "t10t11t22t13"  # the right answer is on the canvas at step 1 only
    lost = answer_trajectory(trace, lambda text: text == right, correct_at_end=False)
    assert lost.verdicts == [False, True, False, False]
    assert lost.correct_at_any_step and lost.found_then_lost and lost.first_correct_step == 1
    assert lost.first_correct_fraction == pytest.approx(2 / 4)
    kept = answer_trajectory(trace, lambda text: text.endswith("t13"), correct_at_end=True)
    assert kept.correct_at_any_step and not kept.found_then_lost and kept.first_correct_step == 1
    never = answer_trajectory(trace, lambda text: False, correct_at_end=False)
    assert never.correct_at_any_step is False and not never.found_then_lost
    assert isinstance(never.first_correct_step, Undefined)
    unscored = answer_trajectory(trace, lambda text: True, correct_at_end=None)
    assert unscored.correct_at_any_step is None and unscored.found_then_lost is None


def test_a_checker_that_breaks_on_a_half_written_answer_leaves_that_step_unscored():
    def check(text):
        if "t22" in text:
            raise ValueError("half an answer")
        return text == "t10t11t12t13"

    answers = answer_trajectory(_trace(), check, correct_at_end=True)
    assert answers.verdicts == [False, None, False, True] and answers.first_correct_step == 3


def test_ece_brier_and_auprc_equal_a_direct_computation():
    confidence = np.array([0.95, 0.92, 0.85, 0.6, 0.55, 0.3, 1.0, 0.05])
    correct = np.array([1, 1, 0, 1, 0, 0, 1, 0], bool)
    # bins of 0.1: [0.9,1.0] holds 0.95, 0.92, 1.0 (all right); [0.8,0.9): 0.85 wrong; [0.6,0.7): 0.6 right;
    # [0.5,0.6): 0.55 wrong; [0.3,0.4): 0.3 wrong; [0,0.1): 0.05 wrong
    expected = (3 * abs(1 - (0.95 + 0.92 + 1.0) / 3) + abs(0 - 0.85) + abs(1 - 0.6) + abs(0 - 0.55)
                + abs(0 - 0.3) + abs(0 - 0.05)) / 8
    assert ece(confidence, correct) == pytest.approx(expected)
    assert brier(confidence, correct) == pytest.approx(np.mean((confidence - correct) ** 2))
    # ranked: 1.0 R, 0.95 R, 0.92 R, 0.85 W, 0.6 R, ...: precision at each right one 1, 1, 1, 4/5
    assert auprc(confidence, correct) == pytest.approx((1 + 1 + 1 + 4 / 5) / 4)
    bins = reliability_bins(confidence, correct)
    assert [b["count"] for b in bins] == [1, 0, 0, 1, 0, 1, 1, 0, 1, 3] and isinstance(bins[1]["accuracy"], Undefined)


def test_auprc_takes_tied_scores_together():
    # two tied at the top, one right and one wrong: precision 1/2 at recall 1/2, then 2/3 at recall 1
    assert auprc([0.9, 0.9, 0.5], [True, False, True]) == pytest.approx(0.5 * 0.5 + 0.5 * (2 / 3))


def test_nothing_pools_across_regimes_silently():
    confidence, correct = [0.9, 0.8, 0.7, 0.6], [True, False, True, False]
    prompts, regimes = ["a", "b", "c", "d"], ["math", "math", "json", "json"]
    with pytest.raises(ValueError, match="pools 2 regimes"):
        calibration(confidence, correct, prompts, regimes, n_resamples=20)
    pooled = calibration(confidence, correct, prompts, regimes, pooled=True, n_resamples=20)
    assert pooled["warning"] == POOLED_WARNING and pooled["regimes"] == ["json", "math"]
    alone = calibration(confidence[:2], correct[:2], prompts[:2], regimes[:2], n_resamples=20)
    assert "warning" not in alone and alone["auroc"] == 1.0 and alone["ece_bins"].startswith("10 equal-width")


@pytest.mark.model
@pytest.mark.processes
def test_the_probe_on_the_builtin_model_writes_the_new_columns(tmp_path):
    from cli import main

    out = tmp_path / "probe"
    assert main(["probe", "--per-regime", "2", "--seeds", "1", "--regimes", "math", "json", "--bootstrap", "50",
                 "--out", str(out)]) == 0
    generations = pd.read_parquet(out / "results" / "generations.parquet")
    for column in ("mean_finalized_step", "mean_argmax_flips", "finalized_at_half", "commit_confidence",
                   "commit_confidence_early", "correct_at_any_step", "found_then_lost", "first_correct_step"):
        assert column in generations.columns, column
    assert generations["correct_at_any_step"].notna().all()  # math and json have checkers
    assert (generations["correct_at_any_step"] >= generations["correct"]).all()  # the end counts as a step
    positions = pd.read_parquet(out / "results" / "positions.parquet")
    assert {"finalized_step", "argmax_flips", "commit_after_finalized_steps", "commit_confidence",
            "top2_margin_at_commit"} <= set(positions.columns)
    assert (positions["commit_confidence"].dropna().between(0, 1)).all()
    table = (out / "table.md").read_text()
    assert "Found then lost" in table and "ECE (10 bins)" in table
    for figure in ("found_then_lost.svg", "calibration.svg"):
        assert (out / figure).exists()
    import json
    assert json.loads((out / "table.json").read_text())["pooled_calibration"]["warning"] == POOLED_WARNING


def test_the_inspectors_line_reads_the_position_against_its_end():
    from visualizer.readout import trajectory_line

    # position 3: final from step 3 (0-based), three flips, first accepted at step 0
    assert trajectory_line(_trace(), 0, 2, 3) == ("finalized at step 4 · 3 argmax flip(s) · "
                                                 "accepted 3 step(s) before it was decided")
    assert trajectory_line(_trace(), 0, 0, 0).startswith("finalized at step 1 · 0 argmax flip(s) · accepted 1 step(s) after")


def test_a_regimes_found_then_lost_share_counts_only_scored_generations():
    from types import SimpleNamespace

    from visualizer.probe_trajectory import regime_trajectory

    def row(prompt, correct, any_step, first):
        return SimpleNamespace(regime="math", prompt_id=prompt, correct=correct, correct_at_any_step=any_step,
                               found_then_lost=any_step and not correct, first_correct_fraction=first,
                               commit_confidence=0.9, commit_confidence_early=0.9, commit_confidence_middle=0.8,
                               commit_confidence_late=Undefined("none late"))

    rows = [row("a", True, True, 0.5), row("a", False, True, 0.25), row("b", False, False, Undefined("never")),
            row("c", True, True, 1.0), SimpleNamespace(regime="math", prompt_id="d", correct=None, correct_at_any_step=None)]
    t = regime_trajectory(rows, n_resamples=50)
    assert t["accuracy_at_end"] == 0.5 and t["correct_at_any_step"] == 0.75 and t["found_then_lost"] == 0.25
    assert t["first_correct_fraction"] == pytest.approx((0.5 + 0.25 + 1.0) / 3)
    low, high = t["found_then_lost_ci"]
    assert 0 <= low <= 0.25 <= high <= 1
    assert t["calibration"]["all"]["generations"] == 4 and t["calibration"]["late"]["without_confidence"] == 4
