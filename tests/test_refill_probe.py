"""The probe's `--batch-order refill` (visualizer.plan, cli.probe_runner, backends.refill): the plan records it,
every trace is its generation run alone, the useful fraction is the count from the traces, and a run whose
process was killed mid-run resumes with nothing lost or repeated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from backends.run import record_trace
from cli.distributed import KILL_AFTER_ENV
from cli.probe_runner import run_probe
from prompts.probes import check_answer, probe_suite
from tests.test_batch_capture import builtin_backend  # noqa: F401 -- the fixture
from tests.test_refill import records
from visualizer.plan import REFILL_CHUNK, make_plan
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = GenerationSettings(max_denoising_steps=12)


def test_a_refill_plan_cuts_each_seed_into_chunks_of_its_rows_and_round_trips():
    items = [("math", f"m{i}", seed) for seed in range(2) for i in range(2 * REFILL_CHUNK + 1)]
    plan = make_plan(items, batch_size=2, order="refill")
    assert [len(b.items) for b in plan.batches] == [2 * REFILL_CHUNK, 1, 2 * REFILL_CHUNK, 1]
    assert [b.seed for b in plan.batches] == [0, 0, 1, 1] and plan.batch_size == 2
    assert type(plan).from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


@pytest.mark.model
@pytest.mark.processes
def test_refilled_probe_traces_are_each_run_alone_and_waste_nothing(builtin_backend, tmp_path):  # noqa: F811
    probes = [p for p in probe_suite(per_regime=6) if p.regime in ("open", "json") and p.split == "confirmatory"]
    run_probe(builtin_backend, probes, seeds=1, out=tmp_path, check=check_answer, batch_size=3, settings=SETTINGS,
              batch_order="refill")
    manifest = json.loads((tmp_path / "probe.json").read_text())
    assert manifest["plan"]["order"] == "refill" and manifest["plan"]["batch_size"] == 3
    rows = pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist()
    traces = [Trace.load(tmp_path / r["trace_file"]) for r in rows]
    steps = [len(t.steps) for t in traces]
    assert len(set(steps)) > 1  # rows of different lengths: refilled inside a block
    assert [r["decoder_passes"] for r in rows] == steps
    cost = manifest["decoder_passes"]
    assert cost["needed"] == sum(steps) == cost["ran"] and cost["useful_fraction"] == 1.0  # the batch shrinks at the end
    by_id = {p.prompt_id: p for p in probes}
    for row, trace in zip(rows, traces):
        alone = record_trace(builtin_backend, by_id[row["prompt_id"]].prompt, SETTINGS.replace(seed=0))
        assert records(trace) == records(alone)


@pytest.mark.model
def test_a_refill_batched_plan_runs_the_whole_pass_batched_each_batch_reproducible(builtin_backend, tmp_path,  # noqa: F811
                                                                                  monkeypatch):
    from backends import refill as refill_module

    exact_seen = []
    loop = refill_module.refill_generate
    monkeypatch.setattr(refill_module, "refill_generate", lambda *a, **kw: exact_seen.append(kw["exact"]) or loop(*a, **kw))
    probes = [p for p in probe_suite(per_regime=6) if p.regime in ("open", "json") and p.split == "confirmatory"]
    run_probe(builtin_backend, probes, seeds=1, out=tmp_path, check=check_answer, batch_size=3, settings=SETTINGS,
              batch_order="refill-batched")
    manifest = json.loads((tmp_path / "probe.json").read_text())
    assert manifest["plan"]["order"] == "refill-batched" and exact_seen and not any(exact_seen)
    (batch,) = manifest["plan"]["batches"]  # cut as "refill" cuts: up to REFILL_CHUNK x 3 generations
    assert len(batch["items"]) == len(probes)
    rows = {r["prompt_id"]: r for r in pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist()}
    traces = {pid: Trace.load(tmp_path / r["trace_file"]) for pid, r in rows.items()}
    cost = manifest["decoder_passes"]
    assert cost["ran"] == sum(len(t.steps) for t in traces.values()) and cost["useful_fraction"] == 1.0
    by_id = {p.prompt_id: p for p in probes}
    order = [item.split("/")[1] for item in batch["items"]]
    again, _ = builtin_backend.record_refilled([by_id[pid].prompt for pid in order], [0] * len(order), SETTINGS, rows=3,
                                               exact=False)
    for pid, trace in zip(order, again):  # the same batch through the same loop: the same traces, record for record
        assert records(traces[pid]) == records(trace)


def _probe(out, **env):
    flags = ["--regimes", "math", "factual", "--per-regime", "4", "--seeds", "2", "--steps", "4", "--batch-size", "2",
             "--batch-order", "refill", "--bootstrap", "20"]
    return subprocess.run([sys.executable, "-m", "visualizer", "probe", "--out", str(out), *flags], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


@pytest.mark.model
@pytest.mark.processes
def test_a_killed_refill_run_resumes_with_nothing_lost_or_repeated(builtin_backend, tmp_path):  # noqa: F811
    out = tmp_path / "probe"
    killed = _probe(out, **{KILL_AFTER_ENV: "0:2"})  # killed (SIGKILL) once its second batch (seed 1) is generated
    assert killed.returncode == -9, killed.stderr
    manifest = json.loads((out / "probe.json").read_text())
    assert [len(b["items"]) for b in manifest["plan"]["batches"]] == [4, 4]
    assert len(list((out / "traces").rglob("*.json"))) == 4  # the first batch saved, the second lost with the process
    resumed = _probe(out)
    assert resumed.returncode == 0, resumed.stderr
    redone = json.loads((out / "probe.json").read_text())["dealt"]["rank_of_batch"]
    assert list(redone) == ["1"]  # only the batch the kill lost
    rows = pq.read_table(out / "results" / "generations.parquet").to_pylist()
    assert sorted((r["prompt_id"], r["seed"]) for r in rows) == sorted({(r["prompt_id"], r["seed"]) for r in rows})
    assert len(rows) == 8
    for trace_file in sorted((out / "traces").rglob("*.json")):  # the resumed run's traces too: each its run alone
        trace = Trace.load(trace_file)
        alone = record_trace(builtin_backend, trace.prompt, GenerationSettings.from_dict(trace.start.settings))
        assert records(trace) == records(alone)
