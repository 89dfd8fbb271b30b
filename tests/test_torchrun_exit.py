"""How a torchrun process ends (backends/process_group.py): a finished run exits 0 with its group
ended in order and no thread left, and a run stuck in a collective that never completes ends within
seconds of torchrun's SIGTERM, keeping its steps.

Each torchrun test runs on CPU (gloo) with the built-in model, as a user would, on ports the kernel
picks (tests/torchrun.py), and leaves no process behind (the `no_leftover_processes` fixture).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from backends import BUILTIN_MODEL_DIR, Stop, process_group
from backends.bridge import ABANDON_GRACE_S
from tests.torchrun import MID_RUN_BAR, rank_pid, ROOT, Screen, single_host, terminal_pair, worker_env, worker_module
from visualizer.trace import Trace

GROUP_IN_A_CYCLE = """
import gc, sys, weakref
import torch.distributed as dist
from backends.process_group import end_group
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
group = weakref.ref(dist.group.WORLD)
holder = {"group": dist.group.WORLD}
holder["self"] = holder  # a cycle holds the group, as torch's own objects do after a run
del holder
gc.disable()  # the cycle is freed by end_group's collection, not by a collection that happens to come
print(end_group(), group() is None, end_group())
"""


@pytest.mark.processes
def test_end_group_frees_a_group_that_cycles_hold_while_the_interpreter_is_whole():
    """destroy_process_group alone leaves such a group to interpreter shutdown, where its C++ destructor
    aborted finished runs ("terminate called without an active exception", exit -6)."""
    done = subprocess.run([sys.executable, "-c", GROUP_IN_A_CYCLE], cwd=ROOT, env=worker_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]  # gone; a second call finds no group


def test_an_abandoned_run_ends_after_the_grace_with_its_records_and_leaves_its_worker(monkeypatch, random_model_dir):
    """A model stuck inside a step (as inside a dead rank's NCCL collective) never reads its stop:
    `Stop.abandon` ends the run anyway, with the reason, the steps so far and no wait for the worker,
    and marks the process as one that can only end with os._exit."""
    from backends.transformers_backend import TransformersBackend
    from visualizer.records import StepRecord
    from visualizer.settings import GenerationSettings

    monkeypatch.setattr(process_group, "_stuck_reason", None)
    backend = TransformersBackend(str(random_model_dir), device="cpu")
    release, calls = threading.Event(), []

    def stuck_at_the_third_step(module, args):
        calls.append(1)
        if len(calls) == 3:
            release.wait(120)

    hook = backend.model.get_output_embeddings().register_forward_pre_hook(stuck_at_the_third_step)
    try:
        stop = Stop()
        batches = backend.generate_batches("hi", GenerationSettings(max_new_tokens=64, max_denoising_steps=8), stop)
        records = []
        while sum(isinstance(r, StepRecord) for r in records) < 2:
            records += next(batches)
        deadline = time.monotonic() + 60
        while len(calls) < 3:  # the worker is inside the third step, where it stays
            assert time.monotonic() < deadline
            time.sleep(0.01)
        abandoned = time.monotonic()
        stop.abandon("rank 1 of 2 stopped")
        for batch in batches:
            records += batch
        took = time.monotonic() - abandoned
        assert process_group.stuck_reason() == "rank 1 of 2 stopped"
    finally:
        release.set()
        hook.remove()
    end = records[-1]
    assert end.finish_reason == "error" and end.error == "rank 1 of 2 stopped"
    assert sum(isinstance(r, StepRecord) for r in records) == 2  # the steps recorded before are kept
    assert ABANDON_GRACE_S <= took < ABANDON_GRACE_S + 5
    backend.close()


def test_a_stop_that_is_not_abandoned_waits_for_the_model(monkeypatch):
    monkeypatch.setattr(process_group, "_stuck_reason", None)
    stop = Stop(linked=threading.Event())
    assert not stop.is_set()
    stop.linked.set()  # the caller's own stop flag (a Leader links the app's)
    assert stop.is_set() and stop.given_up() is None and process_group.stuck_reason() is None


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_finished_record_exits_0_after_a_restart_with_no_thread_left(tmp_path):
    """rank 1 killed mid-run: torchrun restarts both workers, the second attempt records the whole run,
    and both ranks end with nothing running but their main thread."""
    out, reports = tmp_path / "run.json", tmp_path / "exit"
    reports.mkdir()
    screen, terminal = terminal_pair()  # a terminal: the record's progress is the per-step bar
    proc = subprocess.Popen(
        [*single_host(2, "--max-restarts", "1"), "-m", "visualizer", "record", "--parallel", "expert",
         "--model", str(BUILTIN_MODEL_DIR), "--demo", "story", "--seed", "3", "--max-new-tokens", "256",
         "--steps", "48", "--out", str(out)],
        cwd=ROOT, env=worker_env(VISUALIZER_TEST_EXIT_REPORT=str(reports)), stdin=subprocess.DEVNULL,
        stdout=terminal, stderr=terminal)
    os.close(terminal)
    log = Screen(screen)
    try:
        deadline = time.monotonic() + 180
        while not MID_RUN_BAR.search(log.text()):
            assert proc.poll() is None and time.monotonic() < deadline, log.text()[-3000:]
            time.sleep(0.05)
        os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
        assert proc.wait(timeout=300) == 0, log.text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    said = log.text()
    assert "terminate called" not in said and "local_rank: 1" in said  # torchrun saw rank 1 killed, and restarted
    recorded = Trace.load(out)
    assert recorded.end.finish_reason in ("eos", "length") and len(recorded.steps) > 3
    ended = {p.name: json.loads(p.read_text()) for p in reports.iterdir() if "attempt1" in p.name}
    assert sorted(ended) == ["rank0-attempt1.json", "rank1-attempt1.json"]
    for report in ended.values():
        # a sharded model's group stays held from C++ after destroy: the process ends with os._exit, nothing to join
        assert report["threads"] == [] and report["ended"].startswith(("in order", "os._exit: the group is still held"))


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_rank_stuck_in_a_collective_ends_the_run_within_seconds_of_sigterm_and_keeps_its_steps(tmp_path):
    """rank 1 stops answering before its fourth step (tests/hang_worker.py): rank 0 waits in the model's
    all-reduce, as it does with NCCL when a rank dies. torchrun's SIGTERM to rank 0 abandons the run:
    the trace is written with the three steps recorded, and rank 0 ends, within seconds."""
    out, log_path = tmp_path / "run.json", tmp_path / "torchrun.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([*single_host(2), *worker_module("hang_worker"), str(out)],
                                cwd=ROOT, env=worker_env(), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while "step 3:" not in log_path.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(0.05)
            time.sleep(1.0)  # rank 0 is inside the fourth step's collective now
            rank0 = rank_pid(proc.pid, 0)
            sent = time.monotonic()
            os.kill(rank0, signal.SIGTERM)
            while out.exists() is False or _alive(rank0):
                assert time.monotonic() - sent < 20, log_path.read_text()[-3000:]
                time.sleep(0.05)
            took = time.monotonic() - sent
            proc.wait(timeout=60)  # torchrun ends rank 1 once rank 0 is gone
        finally:
            if proc.poll() is None:
                proc.kill()
    recorded = Trace.load(out)
    assert len(recorded.steps) == 3 and recorded.end.finish_reason == "error"
    assert recorded.end.error.startswith("torchrun ended the job")
    assert took < ABANDON_GRACE_S + 10
    assert "terminate called" not in log_path.read_text()


def _alive(pid: int) -> bool:
    from backends.sharded_server import process_gone

    return not process_gone(pid)
