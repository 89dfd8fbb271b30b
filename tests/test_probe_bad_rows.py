"""One bad row never stops a study: a row without an answer is measured and not scored, in every
regime; a checker that raises leaves its generation unscored with the reason in generations.parquet
and the run goes on.  Also the result columns, declared once (visualizer/probe_schema.py)."""

import dataclasses
import json

import pyarrow.parquet as pq
import pytest
from tests.scripted_probe import ScriptedBackend

from cli import main
from cli.probe_runner import run_probe
from prompts.probes import REGIMES, ProbePrompt, check_answer
from visualizer.metrics import is_defined
from visualizer.probe_tables import regime_tables, result_from_trace
from visualizer.probe_schema import COLUMNS, ProbeResult
from visualizer.results import GENERATION_SCHEMA, read_results
from visualizer.trace import Trace

ANSWERS = {"math": 7, "code_function": ("assert f(1) == 2",), "code_task": ("assert g() == 3",), "factual": "Paris",
           "open": "a sunny day", "json": {"type": "object", "required": ["name"]}}


def probes_of(regime):
    """Two confirmatory rows of the regime: one with an answer (where the regime has them), one without."""
    return [ProbePrompt(regime, f"{regime}-a", "What is 3 + 4?", "confirmatory", ANSWERS[regime]),
            ProbePrompt(regime, f"{regime}-b", "Say something about 5 and 6.", "confirmatory", None)]


@pytest.mark.parametrize("regime", REGIMES)
def test_the_checker_of_every_regime_leaves_a_row_without_an_answer_unscored(regime):
    assert check_answer(ProbePrompt(regime, "x", "p", "confirmatory", None), '{"name": 1} 72 def f(): pass') is None


@pytest.mark.processes
@pytest.mark.parametrize("regime", REGIMES)
def test_a_row_without_an_answer_is_measured_and_not_scored_in_every_regime(tmp_path, regime):
    results = run_probe(ScriptedBackend(), probes_of(regime), seeds=1, out=tmp_path, check=check_answer, batch_size=2)
    answered, bare = results
    assert bare.correct is None and bare.unscored == "the row has no answer"
    assert is_defined(bare.tau_b) and bare.content_tokens == 20 and (tmp_path / bare.trace_file).exists()
    if regime == "open":  # no checker at all: unscored with that reason
        assert answered.correct is None and answered.unscored == "the open regime has no answer checker"
    else:
        assert answered.correct in (True, False) and answered.unscored is None
    table, = regime_tables(results, n_resamples=20)
    assert table["generations"] == 2 and table["unscored_generations"] == (2 if regime == "open" else 1)


def crash_on_b(probe, response):  # module level: it pickles, so the runner checks in its writer process
    if probe.prompt_id.endswith("-b"):
        raise AttributeError("'NoneType' object has no attribute 'get'")
    return "7" in response


@pytest.mark.processes
@pytest.mark.parametrize("where", ["writer process", "runner"])
def test_a_checker_that_raises_marks_its_generation_unscored_and_the_run_goes_on(tmp_path, where):
    probes = [dataclasses.replace(p, answer="x") for p in probes_of("math") + probes_of("json")]
    check = crash_on_b if where == "writer process" else (lambda probe, response: crash_on_b(probe, response))
    results = run_probe(ScriptedBackend(), probes, seeds=2, out=tmp_path, check=check, batch_size=3)
    assert len(results) == 8  # every batch ran
    rows = pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist()
    failed = [r for r in rows if r["prompt_id"].endswith("-b")]
    assert len(failed) == 4 and all(r["correct"] is None for r in failed)
    assert {r["unscored"] for r in failed} == {
        "the answer checker failed: AttributeError: 'NoneType' object has no attribute 'get'"}
    assert all(r["correct"] in (True, False) and r["unscored"] is None for r in rows if r["prompt_id"].endswith("-a"))


@pytest.mark.processes
def test_the_issues_prompt_file_runs_to_the_end_on_a_small_model(tmp_path, capsys, random_model_dir):
    rows = [{"prompt": "Sam has 70 apples and buys 2. How many?", "regime": "math", "answer": "70 + 2 = 72\n#### 72"},
            {"prompt": "Write add(a, b).", "regime": "code_task", "answer": "assert add(1, 2) == 3\nassert add(0, 0) == 0"},
            {"prompt": "Capital of France?", "regime": "factual", "answer": "Paris"},
            {"prompt": "Describe rain.", "regime": "open"},
            {"prompt": "Give a JSON object with a name.", "regime": "json", "answer": {"type": "object"}},
            {"prompt": "Another JSON object, please.", "regime": "json"}]  # json-00006: the row in the issue
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out"
    assert main(["probe", "--prompts", str(path), "--seeds", "1", "--batch-size", "3", "--out", str(out),
                 "--model", str(random_model_dir), "--steps", "2", "--bootstrap", "20"]) == 0
    generations = {r["regime"] + "/" + r["prompt_id"]: r
                   for r in pq.read_table(out / "results" / "generations.parquet").to_pylist()}
    assert len(generations) == 6
    assert generations["json/json-00006"]["correct"] is None
    assert generations["json/json-00006"]["unscored"] == "the row has no answer"
    assert generations["open/open-00004"]["unscored"] == "the row has no answer"
    scored = ("math/math-00001", "code_task/code_task-00002", "factual/factual-00003", "json/json-00005")
    assert all(generations[k]["correct"] in (True, False) and generations[k]["unscored"] is None for k in scored)
    assert "| json |" in capsys.readouterr().out


# ---- the result columns, declared once ------------------------------------------------------------
def test_every_declared_column_is_a_result_field_and_a_typed_parquet_column():
    names = [c.name for c in COLUMNS]
    assert [f.name for f in dataclasses.fields(ProbeResult)] == names
    assert GENERATION_SCHEMA.names[: len(names)] == names and "undefined" in GENERATION_SCHEMA.names


@pytest.mark.processes
def test_parquet_rows_read_back_equal_the_results_of_the_traces(tmp_path):
    probes = probes_of("math") + probes_of("open")
    results = run_probe(ScriptedBackend(), probes, seeds=2, out=tmp_path, check=check_answer, batch_size=3)
    by_id = {p.prompt_id: p for p in probes}
    # what a batch cost is no one trace's: it is counted from the traces of the row's batch (visualizer.batch_cost)
    from visualizer.batch_cost import batch_cost

    rows = pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist()
    batch_of = {r["trace_file"]: r["batch"] for r in rows}
    cost = {b: batch_cost([Trace.load(tmp_path / f) for f, of in batch_of.items() if of == b]) for b in set(batch_of.values())}
    from_traces = [result_from_trace(by_id[r.prompt_id], r.seed, Trace.load(tmp_path / r.trace_file), r.trace_file,
                                     check_answer, cost=cost[batch_of[r.trace_file]]) for r in results]
    assert read_results(tmp_path) == results == from_traces  # every column, undefined reasons included
    assert any(not is_defined(v) for r in results for v in r.bin_tau_b.values())  # the reasons were exercised
