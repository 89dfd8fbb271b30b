"""The probe runner and its statistics: clustered bootstrap, AUROC, tables, resume, CLI."""

import json

import numpy as np
import pytest
from tests.scripted_probe import PROBES, ScriptedBackend, check

from cli import main
from visualizer.metrics import Undefined, run_metrics
from visualizer.metrics.stats import auroc, clustered_ci
from cli.probe_runner import progress_bar, run_probe
from visualizer.probe_tables import ProbeError, markdown_table, regime_tables, write_tables
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace


@pytest.fixture
def backend():
    return ScriptedBackend()


# ---- statistics ------------------------------------------------------------------------------------
def test_auroc_by_hand():
    assert auroc([3, 2, 1, 0], [1, 1, 0, 0]) == 1.0
    assert auroc([0, 1, 2, 3], [1, 1, 0, 0]) == 0.0
    assert auroc([1, 1, 1, 1], [1, 0, 1, 0]) == 0.5  # ties count half
    assert auroc([2, 0, 1], [1, 0, 1]) == 1.0
    assert auroc([0, 2, 1, 3], [1, 0, 1, 0]) == pytest.approx(0.0)
    assert isinstance(auroc([1, 2], [1, 1]), Undefined)


def test_clustered_bootstrap_resamples_whole_prompts():
    values = np.array([0.0] * 5 + [1.0] * 5)  # two prompts, five seeds each
    prompts = ["a"] * 5 + ["b"] * 5
    seen = []

    def mean(rows):
        seen.append(rows)
        return float(values[rows].mean())

    low, high = clustered_ci(prompts, mean, n_resamples=200)
    assert all(len(rows) == 10 for rows in seen)
    for rows in seen:  # each prompt's rows come together, all five of them
        assert sorted(rows.tolist()) in (sorted([0, 1, 2, 3, 4] * 2), sorted([5, 6, 7, 8, 9] * 2), list(range(10)))
    assert (low, high) == (0.0, 1.0)  # only 0, 0.5 and 1 are possible means
    assert clustered_ci(prompts, mean, n_resamples=200) == (low, high)  # seeded: reproducible
    assert isinstance(clustered_ci(["a"] * 3, mean), Undefined)


def test_clustered_bootstrap_drops_resamples_where_auroc_is_undefined():
    labels = np.array([1, 1, 0, 0, 1, 0])
    scores = np.array([0.9, 0.8, 0.1, 0.2, 0.7, 0.3])
    ci = clustered_ci(["a", "a", "b", "b", "c", "c"], lambda rows: auroc(scores[rows], labels[rows]), n_resamples=300)
    assert ci == (1.0, 1.0)


# ---- running and tables -------------------------------------------------------------------------------
@pytest.mark.processes
def test_run_probe_saves_traces_and_tables_match_the_traces(tmp_path, backend):
    results = run_probe(backend, PROBES, seeds=3, out=tmp_path, check=check)
    assert len(results) == 24 and backend.calls == 24
    first = results[0]
    trace = Trace.load(tmp_path / first.trace_file)
    assert run_metrics(trace).tau_b_mean == pytest.approx(first.tau_b)
    assert first.correct in (True, False)

    tables = {t["regime"]: t for t in regime_tables(results, n_resamples=300)}
    math_rows = [r for r in results if r.regime == "math" and r.split == "confirmatory"]
    assert tables["math"]["prompts"] == 3 and tables["math"]["generations"] == 9
    assert tables["math"]["tau_b"] == pytest.approx(np.mean([r.tau_b for r in math_rows]))
    assert tables["math"]["accuracy"] == pytest.approx(np.mean([r.correct for r in math_rows]))
    low, high = tables["math"]["tau_b_ci"]
    assert low <= tables["math"]["tau_b"] <= high
    if 0 < tables["math"]["accuracy"] < 1:
        assert tables["math"]["auroc_low_entropy_correct"] == 1.0
    assert isinstance(tables["open"]["accuracy"], Undefined)
    assert isinstance(tables["open"]["auroc_low_entropy_correct"], Undefined)
    assert tables["open"]["auroc_ci"].reason == "no generation was scored (the row has no answer)"

    everything = {t["regime"]: t for t in regime_tables(results, include_exploratory=True, n_resamples=100)}
    assert everything["math"]["prompts"] == 4


@pytest.mark.processes
def test_rerun_resumes_from_saved_traces_and_redoes_a_missing_one(tmp_path, backend):
    first = run_probe(backend, PROBES[:2], seeds=2, out=tmp_path, check=check)
    (tmp_path / first[0].trace_file).unlink()
    again = ScriptedBackend()
    second = run_probe(again, PROBES[:2], seeds=2, out=tmp_path, check=check)
    assert again.calls == 1  # only the missing trace's batch (one prompt) ran again
    assert [r.tau_b for r in second] == [r.tau_b for r in first]
    assert not list(tmp_path.rglob("*.partial"))


@pytest.mark.processes
def test_an_out_folder_of_other_settings_is_refused(tmp_path, backend):
    run_probe(backend, PROBES[:1], seeds=1, out=tmp_path, check=check)
    with pytest.raises(ProbeError, match="another model or other settings"):
        run_probe(backend, PROBES[:1], seeds=1, out=tmp_path, check=check, settings=GenerationSettings(max_denoising_steps=4))




def test_progress_bar_counts_the_batches_on_disk_whoever_wrote_them(tmp_path, backend, capsys):
    import time

    from visualizer.plan import make_plan
    from visualizer.results import write_part

    plan = make_plan([("math", f"m{i}", 0) for i in range(5)], batch_size=2)  # batches of 2, 2, 1
    write_part(tmp_path, 0, [{"regime": "math"}], [])  # finished before this run: counted from the start
    with progress_bar(tmp_path, plan, plan.batches[1:], every_s=0.01) as bar:
        assert bar.n == 2
        write_part(tmp_path, 2, [{"regime": "math"}], [])  # as another rank would
        for _ in range(200):
            if bar.n == 3:
                break
            time.sleep(0.01)
        assert bar.n == 3
    assert "3/5" in capsys.readouterr().err


@pytest.mark.processes
def test_tables_are_written_as_markdown_and_strict_json(tmp_path, backend):
    results = run_probe(backend, PROBES, seeds=2, out=tmp_path, check=check)
    tables = regime_tables(results, n_resamples=100)
    md, js = write_tables(tmp_path, tables, {"model": "scripted", "split": "confirmatory", "seeds": 2}, results)
    text = md.read_text()
    # the study's 4 tables, found then lost and the finalized steps (1 row each), calibration (4 step buckets)
    assert text.count("\n| math |") == 4 + 2 + 4 and "| open |" in text and "Simpson" in text
    assert "Structure first" in text and "Accuracy, low commit entropy" in text
    assert "| – [–] |" in text  # open: no checker, no AUROC
    data = json.loads(js.read_text())
    json.dumps(data, allow_nan=False)
    open_row = next(r for r in data["regimes"] if r["regime"] == "open")
    assert open_row["accuracy"] is None and "no answer" in open_row["accuracy_undefined"]
    assert len(data["generations"]) == 16
    math_row = next(r for r in data["regimes"] if r["regime"] == "math")
    assert [t["tertile"] for t in math_row["reliability"]] == ["low", "middle", "high"]
    assert sum(t["generations"] for t in math_row["reliability"]) == math_row["generations"]
    assert open_row["reliability"] is None and "no answer" in open_row["reliability_undefined"]
    chart = (tmp_path / "reliability.svg").read_text()  # the curve beside the table: math drawn, open (no checker) not
    assert chart.startswith("<svg") and "math" in chart and ">open<" not in chart
    assert "structure_first_difference" in math_row and "structure_first_auroc" in math_row
    row = data["generations"][0]
    assert isinstance(row["tau_b"], float) and row["regime"] == "math" and row["bin_tau_b_64"] is None
    assert "bin size 64" in row["bin_tau_b_64_undefined"]
    assert markdown_table(tables).splitlines()[0].startswith("| Regime | Prompts × seeds | Token tau_b [95% CI] | tau_b defined")
    assert "| 6/6 |" in text


# ---- command line ------------------------------------------------------------------------------------
def test_probe_command_rejects_bad_input_in_one_line(tmp_path, capsys):
    assert main(["probe", "--out", str(tmp_path), "--regimes", "math,poetry"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown regime(s): poetry") and len(err.strip().splitlines()) == 1
    assert main(["probe", "--out", str(tmp_path), "--seeds", "0"]) == 2
    assert "--seeds must be at least 1" in capsys.readouterr().err
    assert main(["probe", "--out", str(tmp_path), "--steps", "-3"]) == 2
    assert "max denoising steps" in capsys.readouterr().err
    assert main(["probe", "--out", str(tmp_path), "--per-regime", "1"]) == 2
    assert "no confirmatory prompts" in capsys.readouterr().err
    assert main(["probe", "--out", str(tmp_path), "--model", str(tmp_path / "nothing")]) == 2
    assert "No model folder" in capsys.readouterr().err


def test_probe_command_runs_the_real_suite_on_a_small_model_end_to_end(tmp_path, capsys, random_model_dir):
    out = tmp_path / "probe"
    args = ["probe", "--out", str(out), "--regimes", "factual", "json", "--seeds", "1", "--per-regime", "4",
            "--model", str(random_model_dir), "--steps", "4", "--bootstrap", "50"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "| factual |" in captured.out and "| json |" in captured.out and "4/4" in captured.err
    traces = sorted(out.rglob("*-seed0.json"))
    assert [t.name for t in traces] == ["factual-001-seed0.json", "factual-003-seed0.json", "json-001-seed0.json", "json-003-seed0.json"][: len(traces)]
    assert len(traces) == 4  # the confirmatory half of four prompts per regime
    assert Trace.load(traces[0]).steps[0].steps_remaining == 4
    data = json.loads((out / "table.json").read_text())
    assert [r["regime"] for r in data["regimes"]] == ["factual", "json"]
    assert all(g["correct"] in (True, False) for g in data["generations"])  # both regimes have checkers
    assert all((out / name).exists() for name in ("reliability.svg", "tau_b.svg", "tau_b.png", "tokens_per_step.svg"))
    assert main(args) == 0  # resumes: nothing left to generate
    assert "probe: 100%" in capsys.readouterr().err
