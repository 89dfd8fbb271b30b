"""The probe under torchrun on CPU (gloo), with the built-in model: the same traces and tables from 1
process as from 2 (two local "nodes" meeting through the rendezvous), resuming after a killed worker
(one host, `--standalone`), bad flags in one line.

torchrun starts the processes, as a user would; the runs are kept small (8 generations, 2 steps a
block) because every process loads torch and the model.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.torchrun import ROOT, TORCHRUN, free_port, single_host, worker_env
from visualizer.trace import Trace

FLAGS = ["--regimes", "math", "factual", "--per-regime", "4", "--seeds", "2", "--steps", "2", "--batch-size", "2",
         "--batch-order", "length",  # the plan order of visualizer.plan that is not the suite's: resumed like it
         "--bootstrap", "20"]
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def _run(command, **extra):
    return subprocess.run(command, cwd=ROOT, env=worker_env(**extra), capture_output=True, text=True, timeout=600)


def _probe(out, *launcher, flags=FLAGS, **extra):
    return _run([*launcher, "-m", "visualizer", "probe", "--out", str(out), *flags], **extra)


def _traces(out: Path) -> dict:
    """Every trace of a run without its wall-clock fields (the only thing that may differ)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if "wall_time" not in k and k != "created"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return {str(p.relative_to(out)): strip(json.loads(p.read_text())) for p in sorted((out / "traces").rglob("*.json"))}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "probe"
    done = _probe(out, sys.executable)
    assert done.returncode == 0, done.stderr
    traces = sorted((out / "traces").rglob("*.json"))
    assert len(traces) == 8 and all(Trace.load(t).finished for t in traces)
    return out, done


def test_two_processes_on_two_local_nodes_give_the_traces_and_tables_of_one(one_process, tmp_path):
    """Two "nodes" of one process each meet through torchrun's c10d rendezvous (one launch stands for both the
    multi-node and the two-process case: a single host's `--standalone` run is the killed-worker test's)."""
    reference, single = one_process
    out = tmp_path / "probe"
    node = [*TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", f"probe-test-{tmp_path.name}"]
    command = [*node, "-m", "visualizer", "probe", "--out", str(out), *FLAGS]
    nodes = [subprocess.Popen(command, cwd=ROOT, env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outputs = [n.communicate(timeout=600) for n in nodes]
    assert [n.returncode for n in nodes] == [0, 0], outputs
    (stdout,) = [stdout for stdout, _ in outputs if "| math |" in stdout]  # one rank 0 over both nodes prints the tables
    assert _traces(out) == _traces(reference)
    assert stdout.count("| math |") == single.stdout.count("| math |") >= 1
    assert stdout.split("\n\n")[0] == single.stdout.split("\n\n")[0]  # computed from both ranks' results
    manifest = json.loads((out / "probe.json").read_text())
    assert manifest["dealt"]["world_size"] == 2 and set(manifest["dealt"]["rank_of_batch"].values()) == {0, 1}
    assert manifest["plan"] == json.loads((reference / "probe.json").read_text())["plan"]
    import pandas as pd

    assert len(pd.read_parquet(out / "results" / "generations.parquet")) == 8


def test_a_killed_worker_is_restarted_and_redoes_only_unfinished_batches(one_process, tmp_path):
    reference, _ = one_process
    out = tmp_path / "probe"
    # rank 1 kills itself (SIGKILL) once it generated its second batch (not saved: it is redone); torchrun restarts
    # both workers once
    reports = tmp_path / "exit"
    reports.mkdir()
    done = _probe(out, *single_host(2, "--max-restarts", "1"), VISUALIZER_TEST_KILL_AFTER="1:2",
                  VISUALIZER_TEST_EXIT_REPORT=str(reports))
    assert done.returncode == 0, done.stderr
    assert "failed (exitcode: -9) local_rank: 1" in done.stderr  # torchrun saw rank 1 killed
    # the second attempt's ranks ended their group in order and left no thread behind (backends/process_group.py)
    ended = {p.name: json.loads(p.read_text()) for p in reports.iterdir()}
    assert ended == {f"rank{r}-attempt1.json": {"ended": "in order", "threads": [], "group": False} for r in (0, 1)}
    assert "terminate called" not in done.stderr
    redone = json.loads((out / "probe.json").read_text())["dealt"]["rank_of_batch"]
    assert 0 < len(redone) < 4  # the second attempt dealt only what the first left unfinished
    assert _traces(out) == _traces(reference)
    assert not list(out.rglob("*.partial"))


def test_bad_flags_under_torchrun_are_one_line_from_one_process(tmp_path):
    done = _probe(tmp_path / "probe", *single_host(2), flags=["--batch-size", "lots"])
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert ours == ["error: --batch-size must be a whole number of at least 1 or 'auto' (got 'lots')"]
    assert "cli/probe.py" not in done.stderr  # no traceback of ours (torchrun reports the exit code its own way)
