"""The runner-cost benchmark end to end on the built-in model (CPU): its timeline accounts for the runner's whole
time, and its runs are the runner's own (real traces and Parquet rows on disk). Speed itself is only measured on the
GPU machine (BENCHMARKS.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.processes, pytest.mark.model]

ROOT = Path(__file__).resolve().parent.parent


def test_the_timeline_splits_the_runners_time_into_start_generate_gaps_and_tail(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_runner_cost", "timeline", "--device", "cpu", "--model",
         "assets/models/diffusiongemma-tiny-demo", "--batch", "2", "--items", "4", "--reps", "1", "--steps", "2",
         "--seeds", "1", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "bench-runner-cost.json").read_text())
    runner = report["runner"]
    parts = runner["start_s"] + runner["generate_s"] + runner["gaps_s"] + runner["tail_s"]
    assert abs(parts - runner["wall_s"]) < 0.05 * runner["wall_s"] + 0.05  # nothing of the runner's time unaccounted
    assert all(run["generate_calls"] == 2 for run in report["runs"]["runner"])  # 4 generations in batches of 2
    assert report["runner_over_stock"] == runner["work_s"] / report["stock_s"]
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "rep0" / "results" / "generations.parquet")) == 4
    assert "| runner: gaps |" in done.stdout
