"""One torchrun story: under `torchrun --nproc-per-node 2` without `--parallel`, `record` shards one model
(rank 0 alone writes), `probe` deals its work (tests/test_probe_distributed.py), the app serves one sharded
model (tests/test_sharded_app.py), and every other command refuses in one line before loading anything."""

from __future__ import annotations

import subprocess

import pytest

from tests.torchrun import ROOT, single_host, worker_env
from visualizer.trace import Trace

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def _visualizer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*single_host(2), "-m", "visualizer", *args], cwd=ROOT, env=worker_env(),
                          capture_output=True, text=True, timeout=300)


def test_record_without_parallel_shards_one_model_and_rank_0_alone_writes(tmp_path):
    out = tmp_path / "t.json"
    done = _visualizer("record", "--prompt", "What is 18 plus 24?", "--max-new-tokens", "64", "--steps", "8",
                       "--quiet", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("wrote ") == 1  # one writer, not one per rank
    assert "record under torchrun: --parallel expert (the default there" in done.stderr
    assert Trace.load(out).model.device.startswith("expert parallel over 2 cpu processes")


@pytest.mark.parametrize("command", [["metrics", "run.json"], ["export", "run.json", "--gif", "x.gif"]])
def test_a_one_process_command_under_torchrun_is_one_line_before_it_loads_anything(tmp_path, command):
    done = _visualizer(*command)
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert ours == [f"error: {command[0]} runs in one process: start it with python -m visualizer, not torchrun "
                    "(under torchrun, record shards one model over the processes (--parallel, default expert); "
                    "probe deals its generations over the processes)"]
    assert "cli/" not in done.stderr  # no traceback of ours
