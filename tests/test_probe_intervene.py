"""`probe --intervene SPEC --at B:S` (issue 55): every generation forked through fork's code, paired with its own
run, and the paired change per regime tabled; bad flags refused in one line before a model loads."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from cli.probe_intervene import branch_file
from tests.command_line import cli
from visualizer.interventions import content_hash
from visualizer.metrics import run_metrics
from visualizer.trace import Trace


@pytest.mark.model
def test_probe_intervene_pairs_every_generation_on_the_built_in_model(tmp_path):
    out = tmp_path / "probe"
    flags = ["probe", "--out", out, "--regimes", "open", "--per-regime", "1", "--include-exploratory", "--seeds", "2",
             "--steps", "8", "--bootstrap", "50"]
    done = cli(*flags, "--intervene", "remask 0-63", "--at", "1:2")
    assert done.returncode == 0, done.stderr
    assert "## Intervention: remask 0-63 at 1:2" in done.stdout
    assert "## Intervention: remask 0-63 at 1:2" in (out / "table.md").read_text()
    data = json.loads((out / "table.json").read_text())["intervention"]
    assert data["at"] == [1, 2] and data["interventions"] == ["remask 0-63"] and data["unpaired"] == []
    assert len(data["pairs"]) == 2
    changes = []
    for pair in data["pairs"]:
        parent_file, branch_path = out / pair["trace_file"], out / branch_file(pair["trace_file"])
        parent, branch = Trace.load(parent_file), Trace.load(branch_path)
        assert branch.branch.parent == content_hash(parent_file.read_bytes()) and branch.branch.interventions == ("remask 0-63",)
        assert all(np.array_equal(a.canvas, b.canvas) for a, b in zip(parent.steps[:1], branch.steps[:1]))
        assert pair["parent"]["tau_b"] == run_metrics(parent).tau_b_mean and pair["branch"]["tau_b"] == run_metrics(branch).tau_b_mean
        assert pair["answer_changed"] == (parent.end.text != branch.end.text)
        changes.append(pair["branch"]["tau_b"] - pair["parent"]["tau_b"])
    (row,) = data["regimes"]
    assert row["regime"] == "open" and row["pairs"] == 2 and row["tau_b_change"] == pytest.approx(np.mean(changes))
    assert row["tau_b_resampled"] == "seeds"  # one prompt: its two seeds are resampled
    low, high = row["tau_b_change_ci"]
    assert low <= row["tau_b_change"] <= high

    kept = {p: p.stat().st_mtime_ns for p in (out / "branches").rglob("*.json")}
    again = cli(*flags, "--intervene", "remask 0-63", "--at", "1:2")  # a rerun keeps its branches
    assert again.returncode == 0 and "probe --intervene: 1/2" not in again.stderr
    assert {p: p.stat().st_mtime_ns for p in (out / "branches").rglob("*.json")} == kept

    outside = cli(*flags, "--intervene", "remask 0-63", "--at", "1:99")  # no generation has that step
    assert outside.returncode == 0, outside.stderr
    data = json.loads((out / "table.json").read_text())["intervention"]
    assert data["pairs"] == [] and len(data["unpaired"]) == 2
    assert "outside this run: block 1 has steps 1 to" in data["unpaired"][0]["reason"]
    assert (out / "table.md").read_text().count("## Intervention") == 1  # the table is written afresh each run


def _pairs_and_branches(out):
    """table.json's pairs and every branch's steps and end, by trace file (what batch 1 and a batched probe share)."""
    pairs = json.loads((out / "table.json").read_text())["intervention"]["pairs"]
    branches = {}
    for pair in pairs:
        branch = Trace.load(out / branch_file(pair["trace_file"]))
        mark = branch.branch  # its parent's hash is left out: a file's hash covers its creation time
        branches[pair["trace_file"]] = ([s.canvas.tolist() for s in branch.steps], branch.end.text,
                                        dataclasses.replace(mark, parent=""))
    return pairs, branches


@pytest.mark.model
def test_a_batched_probe_forks_each_generation_as_batch_1_does(tmp_path):
    """Under --batch-size 2 the probe's own runs are batched, and each generation's pair is the batch-1 pair: the
    same branch, step for step, and the same paired figures; the pairs are rows of results/pairs.parquet too."""
    import pandas as pd

    flags = ["--regimes", "open", "--per-regime", "2", "--include-exploratory", "--seeds", "1", "--steps", "4",
             "--bootstrap", "20", "--intervene", "forbid 0=O", "--at", "1:1"]
    single, batched = tmp_path / "single", tmp_path / "batched"
    for out, size in ((single, "1"), (batched, "2")):
        done = cli("probe", "--out", out, *flags, "--batch-size", size)
        assert done.returncode == 0, done.stderr
    assert Trace.load(next((batched / "traces").rglob("*.json"))).start.batch  # the probe's runs were batched
    assert _pairs_and_branches(batched) == _pairs_and_branches(single)
    assert len(list((batched / "solo").rglob("*.json"))) == 2 and not (single / "solo").exists()
    rows = pd.read_parquet(batched / "results" / "pairs.parquet")
    assert list(rows["trace_file"]) == [p["trace_file"] for p in _pairs_and_branches(batched)[0]]
    assert {"parent_tau_b", "branch_tau_b", "answer_changed", "correct_branch"} <= set(rows.columns)

    kept = {p: p.stat().st_mtime_ns for p in (batched / "solo").rglob("*.json")} | {
        p: p.stat().st_mtime_ns for p in (batched / "branches").rglob("*.json")}
    lost = batched / branch_file(rows["trace_file"][0])
    lost.unlink()  # a run killed before this branch was written
    again = cli("probe", "--out", batched, *flags, "--batch-size", "2")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("probe --intervene: ") == 1  # only the lost branch is forked again
    assert _pairs_and_branches(batched) == _pairs_and_branches(single)
    assert [p for p in kept if p.stat().st_mtime_ns != kept[p]] == [lost]  # nothing else written again


@pytest.mark.parametrize("argv, message", [
    (["--intervene", "remask 3"], "--intervene needs --at BLOCK:STEP"),
    (["--at", "1:2"], "--at is the fork step of --intervene"),
    (["--intervene", "explode 3", "--at", "1:2"], "unknown intervention 'explode'"),
    (["--intervene", "forbid 3", "--at", "1:2"], "--forbid takes POS=TEXT"),
    (["--intervene", "topk 3", "--at", "0:2"], "a block counts from 1"),
    (["--intervene", "topk 3", "--at", "1:2", "--samplers", "all"], "leave out --samplers"),
])
def test_bad_intervene_flags_are_refused_in_one_line(tmp_path, argv, message):
    done = cli("probe", "--out", tmp_path / "probe", "--regimes", "math", *argv)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "probe").exists()
