"""What a batch costs against what its rows need, on the built-in model: the decoder passes each row
needed and each batch ran (visualizer.batch_cost), in generations.parquet, probe.json and the bar."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_batch_waste import refill
from cli.probe_runner import run_probe
from prompts.probes import check_answer, probe_suite
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

BUILTIN = Path(__file__).resolve().parent.parent / "assets" / "models" / "diffusiongemma-tiny-demo"
# open and json are the regimes whose rows need the most different step counts (a short budget keeps it quick)
SETTINGS = GenerationSettings(max_denoising_steps=12)


@pytest.fixture(scope="module")
def backend():
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(str(BUILTIN), device="cpu")


def _probes():
    return [p for p in probe_suite(per_regime=6) if p.regime in ("open", "json") and p.split == "confirmatory"]


@pytest.fixture(scope="module")
def length_ordered(backend, tmp_path_factory):
    """A probe run in the "length" batch order of open and json prompts, batches of 3."""
    out = tmp_path_factory.mktemp("length")
    run_probe(backend, _probes(), seeds=1, out=out, check=check_answer, batch_size=3, settings=SETTINGS,
              batch_order="length")
    return out


@pytest.mark.model
@pytest.mark.processes
def test_the_useful_fraction_is_the_count_from_the_traces(length_ordered):
    """Counted from the step records alone: a row needed one pass per step record it has, and its batch
    ran one pass per (block, step) that any of its rows recorded (the slowest row is there at each)."""
    tmp_path = length_ordered
    rows = pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist()
    manifest = json.loads((tmp_path / "probe.json").read_text())
    needed = ran = 0
    for batch in manifest["plan"]["batches"]:
        traces = [Trace.load(tmp_path / r["trace_file"]) for r in rows if r["batch"] == batch["batch"]]
        passes = len({(s.block, s.step) for t in traces for s in t.steps})
        for trace, row in zip(traces, (r for r in rows if r["batch"] == batch["batch"])):
            assert row["decoder_passes"] == len(trace.steps) and row["batch_decoder_passes"] == passes
        needed += sum(len(t.steps) for t in traces)
        ran += passes * len(traces)
        entry = manifest["decoder_passes"]["batches"][batch["batch"]]
        assert entry["needed"] == sum(len(t.steps) for t in traces) and entry["ran"] == passes * len(traces)
    cost = manifest["decoder_passes"]
    assert (cost["needed"], cost["ran"]) == (needed, ran)
    assert cost["useful_fraction"] == pytest.approx(needed / ran)
    assert needed < ran  # this suite's rows do not all need the same steps: the count sees the waste


def test_the_length_order_groups_each_seeds_prompts_by_regime_then_length_and_round_trips():
    from visualizer.plan import Plan, make_plan

    items = [(r, f"{r}-{i}", seed) for seed in range(2) for i in range(3) for r in ("open", "math")]  # regimes interleaved
    lengths = {(r, f"{r}-{i}"): 10 * (3 - i) for r in ("open", "math") for i in range(3)}
    plan = make_plan(items, batch_size=3, order="length", lengths=lengths)
    assert [b.items for b in plan.batches[:2]] == [("open/open-2/seed0", "open/open-1/seed0", "open/open-0/seed0"),
                                                  ("math/math-2/seed0", "math/math-1/seed0", "math/math-0/seed0")]
    assert all(all(i.endswith(f"seed{b.seed}") for i in b.items) for b in plan.batches)
    assert sorted(i for b in plan.batches for i in b.items) == sorted(f"{r}/{p}/seed{s}" for r, p, s in items)
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert make_plan(items, batch_size=3).batches[0].items == ("open/open-0/seed0", "math/math-0/seed0", "open/open-1/seed0")
    assert Plan.from_dict({"batch_size": 1, "batches": []}).order == "suite"  # a plan written before orders existed


@pytest.mark.model
@pytest.mark.processes
def test_length_ordered_batches_are_stock_generate_on_each_batch(backend, length_ordered):
    """The stock reference is the one the suite order has: transformers' batched `generate` on each planned
    batch (its prompts in row order, its seed), every row's tokens and steps equal to the trace's."""
    from tests.test_batch_capture import assert_rows_match_stock

    manifest = json.loads((length_ordered / "probe.json").read_text())
    assert manifest["plan"]["order"] == "length"
    by_id = {f"{p.regime}/{p.prompt_id}/seed0": p for p in _probes()}
    for batch in manifest["plan"]["batches"]:
        probes = [by_id[item] for item in batch["items"]]
        traces = [Trace.load(length_ordered / "traces" / p.regime / f"{p.prompt_id}-seed0.json") for p in probes]
        assert [t.prompt for t in traces] == [p.prompt for p in probes]
        assert_rows_match_stock(backend, traces, [p.prompt for p in probes], SETTINGS.replace(seed=batch["seed"]))


def test_the_progress_bar_shows_the_useful_fraction_of_the_batches_it_saw_finish(tmp_path, capsys):
    from cli.probe_runner import progress_bar
    from visualizer.plan import make_plan
    from visualizer.results import write_part

    plan = make_plan([("math", f"m{i}", 0) for i in range(4)], batch_size=2)
    cost = {"decoder_passes": 0, "batch_decoder_passes": 10, "batch_rows_run": 2}
    with progress_bar(tmp_path, plan, plan.batches, every_s=0.01):
        write_part(tmp_path, 0, [cost | {"batch": 0, "decoder_passes": 10}, cost | {"batch": 0, "decoder_passes": 2}], [])
        write_part(tmp_path, 1, [cost | {"batch": 1, "decoder_passes": 4}, cost | {"batch": 1, "decoder_passes": 4}], [])
    assert "useful fraction 0.50: the rows needed 20 decoder passes, their batches ran 40" in capsys.readouterr().err


@given(st.lists(st.integers(1, 48), min_size=1, max_size=40), st.integers(1, 16))
def test_the_refill_bound_runs_no_less_than_needed_and_no_later_than_list_scheduling_allows(passes, rows):
    """benchmarks.bench_batch_waste.refill: every row computes until the last generation ends, and a row that
    takes the next generation as soon as it falls free ends by sum/rows + the longest (Graham's bound)."""
    needed, ran = refill(passes, rows)
    assert needed == sum(passes) and ran % rows == 0
    assert max(passes) * rows <= ran <= rows * (sum(passes) / rows + max(passes))
    if len(passes) <= rows:  # one generation a row: the batch lasts as long as its longest
        assert ran == rows * max(passes)
