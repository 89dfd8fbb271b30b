"""The "why" views: alternatives, the accept budget, the thinking channel, structure first, reliability."""

from __future__ import annotations

import re

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image
from scipy.stats import kendalltau

from tests.trace_factory import trace_from_masks, trace_from_text
from visualizer.accept_budget import BudgetError, ConfidenceBudget, EntropyBudget, accept_budget, budget_sentence
from visualizer.alternatives import AlternativesError, alternatives_html, alternatives_text, position_alternatives
from visualizer.insight_charts import accept_budget_svg, reliability_svg, structure_first_svg
from visualizer.layout import grid_layout, paint
from visualizer.metrics import Undefined, live_readout, live_readouts, metrics_json, run_metrics, tau_series
from visualizer.metrics.stats import reliability_tertiles
from visualizer.metrics.structure import classify_pieces, difference_ci, guess_family, structure_first
from visualizer.palette import COLORBLIND, STANDARD
from visualizer.render_html import render_frame_html
from visualizer.render_image import render_frame_image
from visualizer.settings import CONFIDENCE_THRESHOLD
from visualizer.states import frame_refs, frame_state
from visualizer.readout import readout_rows
from visualizer.thinking import (CHANNEL_CLOSE, CHANNEL_OPEN, block_thought_row, committed_text, run_thought_mask, thought_mask,
                                 thoughts_and_answer)
from visualizer.trace import Trace

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def titles(svg: str) -> list[str]:
    return [t.text for t in parse(svg).iter(f"{SVG}title")]


# ---- alternatives --------------------------------------------------------------------------------
ACROSTIC = ["O", "cean", "\n", "C", "alm", "\n", "E", "bb"]
ACROSTIC_STEPS = [0, 2, 1, 0, 3, 1, 0, None]  # the line-start letters and newlines first


def test_alternatives_at_a_step_and_at_the_commit_step():
    trace = trace_from_text([ACROSTIC], [ACROSTIC_STEPS], topk=3)
    alt = position_alternatives(trace, 0, position=1, step=0)
    assert alt.commit_step == 2 and not alt.accepted_now
    assert [c.piece for c in alt.now][0] == "cean" and len(alt.now) == 3
    assert alt.taken.piece == "cean" and alt.almost.token_id == alt.at_commit[1].token_id
    assert alt.margin == pytest.approx(0.6 - 0.2, abs=1e-3)
    text = alternatives_text(alt)
    assert "commit step 3" in text and "almost chose" in text and "<- taken" in text
    # never accepted: committed from the last argmax at the block's end
    last = position_alternatives(trace, 0, position=7)
    assert last.committed_at_finalize and last.commit_step == 3 and last.taken.piece == "bb"


def test_the_almost_chosen_token_is_the_favourite_when_the_sample_was_an_outsider():
    trace = trace_from_text([["a", "b"]], [[0, 0]], topk=3)
    data = json.loads(trace.to_json())
    data["steps"][0]["canvas"][0] = data["steps"][0]["topk_ids"][0][2]  # it accepted the third candidate
    alt = position_alternatives(Trace.from_dict(data), 0, position=0, step=0)
    assert alt.taken.token_id == alt.at_commit[2].token_id and alt.almost == alt.at_commit[0]
    assert alt.margin < 0


def test_alternatives_html_is_a_one_line_message_for_a_trace_without_candidates():
    old = trace_from_text([ACROSTIC], [ACROSTIC_STEPS], topk=0)
    assert "recorded no candidates" in alternatives_html(old, 0, 1)
    with pytest.raises(AlternativesError, match="no candidates"):
        position_alternatives(old, 0, 1)
    trace = trace_from_text([ACROSTIC], [ACROSTIC_STEPS], topk=3)
    html = alternatives_html(trace, 1, 4)
    assert "position 4 of block 1" in html and "commit step 4" in html and "almost chose" in html
    assert "outside the canvas" in alternatives_html(trace, 0, 99)
    assert "frame 50 is outside" in alternatives_html(trace, 50, 0)


# ---- accept budget -------------------------------------------------------------------------------
def test_entropy_budget_replays_the_samplers_rule():
    entropy = np.array([0.30, 0.01, 0.05, 2.0, 0.02, 0.2], np.float32)
    # sorted: 0.01 0.02 0.05 0.2 0.3 2.0 ; spent before: 0 .01 .03 .08 .28 .58 -> bound 0.1 fits 4
    order = np.argsort(entropy, kind="stable")
    accepted = np.zeros(6, bool)
    accepted[order[:4]] = True
    trace = trace_from_masks([[accepted]], entropy=[[entropy]], tokens=[np.arange(10, 16)])
    trace.start.settings["entropy_bound"] = 0.1
    budget = accept_budget(trace, 0, 0)
    assert isinstance(budget, EntropyBudget) and budget.fits == 4 and budget.agrees
    assert budget.missed_by == pytest.approx(0.28 - 0.1, abs=1e-6)
    assert budget.slack == pytest.approx(0.1 - 0.08, abs=1e-6)
    assert "4 position(s) fit" in budget_sentence(budget) and "missed by 0.18" in budget_sentence(budget)
    svg = accept_budget_svg(trace, 0)
    tips = titles(svg)
    assert len(tips) == 6 and sum("fits" in t for t in tips) == 4 and sum("missed:" in t for t in tips) == 2
    assert any("position 3" in t and "entropy 2 nats" in t for t in tips)
    del trace.start.settings["entropy_bound"]  # a trace that did not record its bound: a reason, not a crash
    with pytest.raises(BudgetError, match="did not record its entropy bound"):
        accept_budget(trace, 0, 0)
    assert "did not record its entropy bound" in accept_budget_svg(trace, 0)


def test_entropy_budget_chart_shows_the_boundary_when_many_fit():
    entropy = np.concatenate([np.full(80, 1e-4), [0.5], np.full(19, 0.9)]).astype(np.float32)
    budget_trace = trace_from_masks([[np.arange(100) < 81]], entropy=[[entropy]], tokens=[np.arange(10, 110) % 80])
    budget_trace.start.settings["entropy_bound"] = 0.1
    assert accept_budget(budget_trace, 0, 0).fits == 81
    tips = titles(accept_budget_svg(budget_trace, 0))
    assert tips[0].startswith("#42 lowest") and tips[-1].startswith("#89 lowest")  # the 48 around the boundary
    assert sum("missed:" in t for t in tips) == 8 and any(t.startswith("#82 lowest") and "missed" in t for t in tips)


def test_entropy_budget_agrees_with_a_real_run(random_backend):
    """On a real run, replaying the rule on the recorded entropies gives the accepted set."""
    from visualizer.settings import GenerationSettings

    trace = Trace(model=random_backend.info, prompt="x")
    for record in random_backend.generate("Count to ten.", GenerationSettings(seed=1, max_new_tokens=256, entropy_bound=30.0, max_denoising_steps=4)):
        trace.append(record)
    for step in range(4):
        budget = accept_budget(trace, 0, step)
        assert budget.agrees and budget.fits == trace.steps[step].accepted.sum() > 1


def test_confidence_budget_compares_the_sample_probabilities_with_the_threshold():
    trace = trace_from_text([["a", "b", "c", "d"]], [[0, 1, 1, 2]], settings={"sampler": "confidence-threshold"}, backend="mlx",
                            n_steps=4)
    data = json.loads(trace.to_json())
    data["steps"][1]["sample_probability"] = [0.99, 0.95, 0.91, 0.5]  # b, c reach 0.9; d does not
    data["steps"][2]["sample_probability"] = [1.0, 1.0, 1.0, 0.4]  # none of the hidden reach: forced
    trace = Trace.from_dict(data)
    budget = accept_budget(trace, 0, 1)
    assert isinstance(budget, ConfidenceBudget) and budget.threshold == CONFIDENCE_THRESHOLD
    assert list(budget.positions) == [1, 2, 3] and list(budget.revealed) == [True, True, False]
    assert budget.passed == 2 and budget.missed_by == pytest.approx(0.4) and not budget.forced
    forced = accept_budget(trace, 0, 2)
    assert forced.forced and "revealed anyway" in budget_sentence(forced)
    with pytest.raises(BudgetError, match="did not record"):
        accept_budget(trace, 0, 0)
    assert "did not record" in accept_budget_svg(trace, 0)
    assert any("stays hidden" in t for t in titles(accept_budget_svg(trace, 1)))


# ---- thinking channel ----------------------------------------------------------------------------
THINKING = [CHANNEL_OPEN, "thought", "\n", "plan", " it", CHANNEL_CLOSE, "O", "cean", "\n", "C", "alm"]


def test_thought_tokens_are_found_from_the_channel_markers():
    trace = trace_from_text([THINKING[:4], THINKING[4:]], [[0, 0, 0, 0], [1, 0, 0, 0, 1, 0, 1]])
    mask = run_thought_mask(trace)
    assert mask[0, :4].all() and mask[1, :2].all() and not mask[1, 2:].any()  # spans the block boundary
    other = trace_from_text([[CHANNEL_OPEN, "final", CHANNEL_CLOSE, "hi"]], [[0, 0, 0, 0]])
    assert not run_thought_mask(other).any()  # another channel is not a thought
    open_only = trace_from_text([[CHANNEL_OPEN, "thought", "\n", "hmm"]], [[0, 0, 0, 0]])
    assert run_thought_mask(open_only)[0, :4].all()  # still thinking when the text ends
    ids = np.stack([b.tokens for b in trace.blocks]).copy()
    ids[0, 1] = -1  # a noise cell hides the channel's name: the channel is not known to be a thought yet
    assert not thought_mask(trace, ids)[0, 0]


def test_the_committed_text_is_split_into_thoughts_and_answer():
    trace = trace_from_text([THINKING[:7], THINKING[7:]], [[0, 0, 0, 0, 1, 0, 1], [0, 0, 1, 1]])  # answer across blocks
    assert thoughts_and_answer(trace) == ("plan it", "Ocean\nCalm")
    assert committed_text(trace) == "[thinking channel]\nplan it\n\n[answer]\nOcean\nCalm"
    plain = trace_from_text([["O", "cean"]], [[0, 1]])
    assert thoughts_and_answer(plain) is None and committed_text(plain) == plain.end.text


@pytest.mark.parametrize("palette", [STANDARD, COLORBLIND], ids=["standard", "colorblind"])
def test_thought_tokens_get_their_own_tint_band_and_legend_in_both_renderers(palette):
    trace = trace_from_text([THINKING], [[0] * len(THINKING)])
    refs = frame_refs(trace)
    frame = frame_state(trace, len(refs) - 1, refs)  # committed
    layout = grid_layout(1, trace.canvas_length, per_row=8)
    cells = paint(frame, layout, trace, palette)
    assert [c.thought for c in cells[: len(THINKING)]] == [True] * 6 + [False] * 5
    assert cells[3].fg == palette.thought[0] and cells[7].fg != palette.thought[0]
    html = render_frame_html(trace, frame, layout, palette)
    assert html.count(f"inset 0 -4px 0 0 {palette.thought[1]}") == 6 + 1  # six cells and the legend
    assert "> thought</span>" in html
    image = render_frame_image(trace, frame, layout, palette)
    band = Image.new("RGB", (1, 1), palette.thought[1]).getpixel((0, 0))
    assert band in set(image.getdata())
    plain = trace_from_text([["O", "cean"]], [[0, 0]])
    plain_frame = frame_state(plain, -1)
    assert "thought" not in render_frame_html(plain, plain_frame, grid_layout(1, 2), palette)
    assert band not in set(render_frame_image(plain, plain_frame, grid_layout(1, 2), palette).getdata())


def test_render_cache_matches_the_reference_renderer_with_thoughts():
    from visualizer.render_cache import FrameRenderer

    trace = trace_from_text([THINKING], [[0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4]])
    layout = grid_layout(1, trace.canvas_length, per_row=8)
    renderer = FrameRenderer(trace, layout, STANDARD, caption_lines=1)
    for i in range(len(frame_refs(trace))):
        frame = frame_state(trace, i)
        expected = render_frame_image(trace, frame, layout, STANDARD, caption=["c"])
        assert list(renderer.render(frame, ["c"]).getdata()) == list(expected.getdata())


# ---- structure first -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "family, pieces, expected",
    [
        ("lines", ["O", "cean", " waves", "\n", "C", "alm", "\n", "  ", "E", "bb"], [1, 0, 0, 1, 1, 0, 1, -1, 1, 0]),
        ("lines", ["1.", " Mercury", "\n", "-", " Venus"], [1, 0, 1, 1, 0]),
        ("sentences", ["The", " sky", " is", " blue", ".", " It", " scatters", "!", "\n"], [0, 0, 0, 0, 1, 0, 0, 1, 1]),
        ("code", ["def", " is", "_pal", "(s", "):", "\n", "    ", '"""', "Check", '"""', "\n", ">>>", " is"],
         [1, 0, 0, 0, 0, 1, -1, 1, 0, 1, 1, 1, 0]),
        ("generic", ["Hi", ".", "\n", "-", " x"], [1, 1, 1, 1, 0]),
    ],
)
def test_structure_rules_per_family(family, pieces, expected):
    assert classify_pieces(pieces, family).tolist() == expected


def test_family_is_guessed_from_the_prompt():
    assert guess_family("Write a Python function is_palindrome(s) with a docstring") == "code"
    assert guess_family("Write a six-line poem about the ocean") == "lines"
    assert guess_family("Why is the sky blue? Answer in exactly three sentences.") == "sentences"
    assert guess_family("What is 17 times 3?") == "generic"
    with pytest.raises(ValueError, match="unknown family"):
        classify_pieces(["a"], "poetry")


def test_structure_first_measures_the_acrostic_scaffolding():
    trace = trace_from_text([ACROSTIC], [ACROSTIC_STEPS], prompt="Write a six-line poem")
    result = structure_first(trace)
    # structural: O(0) \n(1) C(0) \n(1) E(0) -> mean 0.4 ; free: cean(2) alm(3) bb(never: 4) -> mean 3
    assert result.family == "lines" and result.measured == "answer tokens only"
    assert result.mean_step_structural == pytest.approx(0.4) and result.mean_step_free == pytest.approx(3.0)
    assert result.difference == pytest.approx(2.6) and result.auroc == 1.0
    svg = structure_first_svg(trace)
    assert "free − structural = 2.60 steps" in svg and any("structural 5, free 3" in t for t in titles(svg))


def test_structure_first_excludes_thought_tokens_unless_asked():
    steps = [5, 5, 5, 0, 0, 5, 1, 2, 1, 1, 2]  # thoughts commit early: they would blur the answer's order
    trace = trace_from_text([THINKING], [steps], prompt="Write a poem of two lines")
    answer = structure_first(trace)
    both = structure_first(trace, include_thought=True)
    assert answer.blocks[0].structural + answer.blocks[0].free == 5
    assert both.blocks[0].structural + both.blocks[0].free == 11
    assert answer.difference != both.difference and "thought" in both.measured


def test_commit_order_figures_measure_the_answer_unless_thoughts_are_asked_for():
    # the thoughts commit last, right to left: included, they would drag the answer's tau_b down
    steps = [9, 8, 7, 6, 5, 4, 0, 1, 2, 3, 3]
    trace = trace_from_text([THINKING], [steps])
    answer, both = run_metrics(trace), run_metrics(trace, include_thought=True)
    assert (answer.thought_tokens, answer.measured_tokens, answer.content_tokens) == (6, 5, 11)
    assert answer.measured == "answer tokens only (6 thought tokens excluded)"
    assert both.measured_tokens == 11 and both.measured.startswith("answer and thought tokens")
    assert answer.tau_b_mean == pytest.approx(kendalltau(range(5), steps[6:], variant="b").statistic)
    assert both.tau_b_mean == pytest.approx(kendalltau(range(11), steps, variant="b").statistic)
    assert answer.tau_b_mean > 0.9 > 0 > both.tau_b_mean
    assert answer.blocks[0].measured_positions == [6, 7, 8, 9, 10]
    assert answer.same_step_fraction == pytest.approx(1 / 10)  # positions 9 and 10 share step 3
    # the live readout at the last frame says the same, and says what it measured
    for include in (False, True):
        final = live_readout(trace, -1, include_thought=include)
        expected = run_metrics(trace, include_thought=include)
        assert final.tau_b == pytest.approx(expected.tau_b_mean) and final.measured == expected.measured
        assert final.committed + final.pending == expected.measured_tokens
        assert tau_series(trace, 0, include_thought=include)[-1].tau_b == pytest.approx(expected.tau_b_mean)
    assert "6 thought" in dict((name, value) for name, value, _ in readout_rows(live_readout(trace, -1)))["content positions"]
    for frame in range(len(frame_refs(trace))):  # the pair the live stream sends: one block's commits, both readouts
        assert live_readouts(trace, frame) == (live_readout(trace, frame), live_readout(trace, frame, include_thought=True))
    plain = trace_from_text([THINKING[6:]], [[0, 1, 2, 3, 4]])
    assert live_readouts(plain, -1) == (live_readout(plain, -1), None)
    # as JSON, both measure the same thing and say so
    data = metrics_json(trace)
    assert data["measured"] == data["blocks"][0]["measured"] and data["structure_first"]["measured"] == "answer tokens only"


def test_a_thought_channel_open_across_a_block_boundary_is_excluded_in_the_next_block():
    trace = trace_from_text([THINKING[:4], THINKING[4:]], [[3, 2, 1, 0], [0, 0, 1, 2, 3, 4, 5]])
    second = run_metrics(trace).blocks[1]
    assert second.thought_tokens == 2 and second.measured_positions == [2, 3, 4, 5, 6]
    assert second.tau_b == pytest.approx(1.0)
    assert run_metrics(trace).blocks[0].tau_b == Undefined("no content positions")  # all of block 1 is thought
    assert block_thought_row(trace, 1, trace.blocks[1].tokens)[:2].all()


def test_a_run_without_a_channel_is_measured_whole():
    trace = trace_from_text([["a", "b", "c", "d"]], [[0, 2, 1, 3]])
    m = run_metrics(trace)
    assert (m.thought_tokens, m.measured_tokens, m.measured) == (0, 4, "answer tokens only")
    assert m.tau_b_mean == pytest.approx(kendalltau(range(4), [0, 2, 1, 3], variant="b").statistic)


def test_structure_first_is_undefined_with_a_reason_when_a_class_is_empty():
    trace = trace_from_text([["alpha", " beta", " gamma"]], [[0, 1, 2]], prompt="Name three letters in sentences")
    result = structure_first(trace, family="sentences")
    assert isinstance(result.difference, Undefined) and "no structural token" in result.difference.reason
    svg = structure_first_svg(trace, family="sentences")
    shown = re.sub(r"<title>.*?</title>", "", svg)  # on the chart itself, not only in a tooltip
    assert "free − structural = undefined: no structural token" in shown.replace("&#x27;", "'")


def test_difference_ci_resamples_prompts_with_scipy_bootstrap():
    mean, ci, unit = difference_ci(["a", "a", "b", "b", "c"], [1.0, 3.0, 2.0, 2.0, 5.0], n_resamples=500)
    assert unit == "prompts" and mean == pytest.approx((2 + 2 + 5) / 3)  # each prompt's seeds averaged first
    assert ci[0] <= mean <= ci[1] and ci[0] >= 2.0 and ci[1] <= 5.0
    mean, ci, unit = difference_ci(["a", "a", "a"], [1.0, 2.0, 3.0], n_resamples=500)
    assert unit == "seeds" and 1.0 <= ci[0] <= 2.0 <= ci[1] <= 3.0
    _, ci, _ = difference_ci(["a"], [1.0])
    assert isinstance(ci, Undefined) and "at least 2" in ci.reason
    mean, _, _ = difference_ci(["a", "b"], [Undefined("x"), Undefined("y")])
    assert isinstance(mean, Undefined)


# ---- reliability ---------------------------------------------------------------------------------
def test_reliability_tertiles_show_accuracy_falling_with_entropy():
    entropy = np.linspace(0.01, 0.9, 30)
    correct = entropy < 0.45
    prompts = [f"p{i % 10}" for i in range(30)]
    rows = reliability_tertiles(entropy, correct, prompts, n_resamples=300)
    assert [r["tertile"] for r in rows] == ["low", "middle", "high"]
    assert [r["generations"] for r in rows] == [10, 10, 10]
    assert rows[0]["accuracy"] == 1.0 and rows[2]["accuracy"] == 0.0 and 0 < rows[1]["accuracy"] < 1
    low, high = rows[1]["accuracy_ci"]
    assert low <= rows[1]["accuracy"] <= high
    assert isinstance(reliability_tertiles([0.1, 0.2], [True, False], ["a", "b"]), Undefined)
    svg = reliability_svg([{"regime": "math", "reliability": rows}, {"regime": "open", "reliability": Undefined("no checker")}])
    tips = titles(svg)
    assert len(tips) == 3 and "math, low entropy: accuracy 1.00" in tips[0]
    assert "no regime" in reliability_svg([{"regime": "open", "reliability": Undefined("no checker")}])
