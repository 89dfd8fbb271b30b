"""The study's figures (tau_b and tokens per accept step per regime) and `probe-report`, drawn from the
Parquet results alone: a finished run, a partial one, a --samplers run."""

import re

import pytest
from PIL import Image
from tests.scripted_probe import PROBES, ScriptedBackend, check

from cli import main
from cli.probe_runner import run_probe
from visualizer.probe_tables import regime_tables
from visualizer.study_figures import tau_b_figure, tokens_per_step_figure

FILES = ("tau_b.svg", "tau_b.png", "tokens_per_step.svg", "tokens_per_step.png", "found_then_lost.svg",
         "found_then_lost.png", "calibration.svg", "calibration.png")


def tips(svg: str) -> list[str]:
    return re.findall(r"<title>([^<]*)</title>", svg)


@pytest.mark.processes
def test_probe_report_draws_the_tables_numbers_as_svg_and_png(tmp_path, capsys):
    results = run_probe(ScriptedBackend(), PROBES, seeds=2, out=tmp_path, check=check, batch_size=3)
    assert main(["probe-report", str(tmp_path), "--bootstrap", "50"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / name) for name in FILES]
    tables = {t["regime"]: t for t in regime_tables(results, n_resamples=50)}
    svg = (tmp_path / "tau_b.svg").read_text()
    for regime, t in tables.items():  # each regime's dot says the table's mean and CI
        low, high = t["tau_b_ci"]
        assert f"{regime}: {t['tau_b']:.3f} [{low:.3f}, {high:.3f}], 3×2 prompts × seeds" in tips(svg)
        assert f"{regime}: block-sequential control {t['control_tau_b']:.2f}" in tips(svg)
    steps = (tmp_path / "tokens_per_step.svg").read_text()
    assert any(t.startswith(f"math: {tables['math']['tokens_per_accept_step']:.1f} [") for t in tips(steps))
    png = Image.open(tmp_path / "tau_b.png")
    width, height = map(int, re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).groups())
    assert png.size == (2 * width, 2 * height)
    assert len(set(png.convert("RGB").getdata())) > 10  # drawn, not blank

    # the same results give the same figure, byte for byte
    again = {"": regime_tables(results, n_resamples=50)}
    assert tau_b_figure(again).svg(label="x") == tau_b_figure(again).svg(label="x")
    assert tokens_per_step_figure(again).png().tobytes() == tokens_per_step_figure(again).png().tobytes()


@pytest.mark.processes
def test_probe_report_draws_a_partial_run_from_its_finished_batches(tmp_path, capsys):
    run_probe(ScriptedBackend(), PROBES, seeds=1, out=tmp_path, check=check, batch_size=3)
    (tmp_path / "results" / "generations.parquet").unlink()  # as if the run were still going
    (tmp_path / "results" / "parts" / "batch-000002-generations.parquet").unlink()
    assert main(["probe-report", str(tmp_path), "--bootstrap", "20"]) == 0
    assert f"{tmp_path}: 6 generations" in capsys.readouterr().err  # batches 0 and 1 of 3, 3 rows each
    assert all((tmp_path / name).exists() for name in FILES)


@pytest.mark.processes
def test_probe_report_draws_samplers_side_by_side(tmp_path, capsys):
    for sampler in ("entropy-bound", "discrete-ddim"):
        run_probe(ScriptedBackend(), PROBES, seeds=1, out=tmp_path / sampler, check=check, batch_size=4)
    assert main(["probe-report", str(tmp_path), "--bootstrap", "20"]) == 0
    side = (tmp_path / "samplers-tau_b.svg").read_text()
    assert ">entropy-bound<" in side and ">discrete-ddim<" in side
    assert sum(t.startswith("math entropy-bound: ") for t in tips(side)) == 1
    assert sum(t.startswith("math discrete-ddim: ") for t in tips(side)) == 1
    assert all((tmp_path / "discrete-ddim" / name).exists() for name in FILES)
    assert (tmp_path / "samplers-tokens_per_step.png").exists()


def test_probe_report_without_results_is_one_line(tmp_path, capsys):
    assert main(["probe-report", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "holds no probe results" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "empty").mkdir()
    assert main(["probe-report", str(tmp_path / "empty"), "--bootstrap", "0"]) == 2
    assert "--bootstrap must be at least 1" in capsys.readouterr().err


def test_a_figure_with_no_generations_says_so():
    assert "no generations yet" in tau_b_figure({"": []}).svg(label="x")
