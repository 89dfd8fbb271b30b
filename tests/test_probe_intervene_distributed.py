"""`probe --intervene` under torchrun on CPU (gloo, 2 processes, the built-in model): each process forks its share
of the generations, and the paired tables equal the one-process tables."""

import json
import sys

import pytest

from tests.torchrun import ROOT, single_host, worker_env

FLAGS = ["--regimes", "open", "--per-regime", "2", "--include-exploratory", "--seeds", "1", "--steps", "2",
         "--bootstrap", "20", "--intervene", "remask 0-63", "--at", "1:2"]
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def _probe(out, *launcher):
    import subprocess

    return subprocess.run([*launcher, "-m", "visualizer", "probe", "--out", str(out), *FLAGS], cwd=ROOT,
                          env=worker_env(), capture_output=True, text=True, timeout=600)


def test_two_processes_table_the_pairs_one_process_tables(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    single = _probe(one, sys.executable)
    assert single.returncode == 0, single.stderr
    done = _probe(two, *single_host(2))
    assert done.returncode == 0, done.stderr
    paired = [json.loads((out / "table.json").read_text())["intervention"] for out in (one, two)]
    assert len(paired[0]["pairs"]) == 2 and paired[1] == paired[0]
    section = lambda out: (out / "table.md").read_text().split("## Intervention")[1]  # noqa: E731
    assert section(two) == section(one)
    assert sorted(p.name for p in (two / "branches").rglob("*.json")) == sorted(p.name for p in (one / "branches").rglob("*.json"))
