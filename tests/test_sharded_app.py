"""The app on a sharded model: `torchrun --nproc-per-node 2 app.py --parallel expert` (gloo, CPU, the
built-in model), driven through gradio_client as a browser would drive it.

Each test launches torchrun as a user does (tests/sharded_app_worker.py runs the stock sharded
generate first, then the app's own `main` on every rank), on a port rank 0 chooses, and ends every process it
started. Timeouts are hang guards only.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import ValidationError

import app as app_module
from webapp.hosting import Hosting
from tests.app_api import finished_run, submit_generate
from tests.torchrun import single_host, worker_module
from visualizer.trace import Trace

pytestmark = pytest.mark.app


ROOT = Path(__file__).resolve().parent.parent
KNOBS = dict(max_new_tokens=64, max_denoising_steps=6, entropy_bound=0.1, t_min=0.4, t_max=0.8, seed=3)
REQUEST = {"prompt": "Write a haiku about rain", "settings": KNOBS}
LONG = dict(max_new_tokens=1024, steps=64, entropy_bound=0.0001, seed=1)  # many steps: time to stop it or kill a rank
HANG_GUARD_S = 240


@contextmanager
def sharded_app(out: Path, kind: str = "expert", restarts: int = 0):
    """torchrun with 2 ranks serving the app (restarted up to `restarts` times when a rank fails);
    yields (process, url, pids by rank). Everything it started is ended afterwards, also on failure."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env.pop("SPACE_ID", None), env.pop("DV_HOSTED", None)
    log = open(out / "torchrun.log", "w")
    proc = subprocess.Popen(
        [*single_host(2, "--max-restarts", str(restarts)),
         *worker_module("sharded_app_worker"), kind, str(out), json.dumps(REQUEST), "--",
         "--parallel", kind, "--port", "auto"],  # rank 0 chooses the port just before it serves (OUT/port)
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            assert proc.poll() is None, (out / "torchrun.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the app did not start"
            try:
                url = f"http://127.0.0.1:{int((out / 'port').read_text())}/"
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        pids = [int((out / f"pid_{r}").read_text()) for r in range(2)]
        yield proc, url, pids
    finally:
        if proc.poll() is None:  # a failed test: end the ranks by their ids (torchrun starts each in its own session)
            for pid_file in out.glob("pid_*"):
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text()), signal.SIGKILL)
            proc.terminate()  # torchrun's agent ends any rank not written down yet, then leaves
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def model_label(client) -> str:
    """The picker's one entry."""
    picker = next(c for c in client.config["components"] if c.get("props", {}).get("label") == "Model")
    (label, _), = picker["props"]["choices"]
    return label


def saved_trace(client) -> Trace:
    files, _ = client.predict(api_name="/save_trace")
    return Trace.load(files[0])


def wait_for_frames(job, count=3):
    deadline = time.monotonic() + HANG_GUARD_S
    while len(job.outputs()) < count:
        assert time.monotonic() < deadline and not job.done()
        time.sleep(0.05)


@pytest.mark.usefixtures("no_leftover_processes")
def test_the_app_runs_each_request_in_lockstep_and_the_followers_leave_with_it(tmp_path):
    with sharded_app(tmp_path) as (proc, url, pids):
        client, other = (Client(url, verbose=False, download_files=str(tmp_path)) for _ in range(2))
        label = model_label(client)
        assert label.startswith("diffusiongemma-tiny-demo · expert parallel over 2 cpu processes")
        info = client.predict(label, "", api_name="/load_model")[1]
        assert "`expert parallel over 2 cpu processes" in info

        stock = json.loads((tmp_path / "stock.json").read_text())
        assert stock[0] == stock[1]
        settings = dict(max_new_tokens=KNOBS["max_new_tokens"], steps=KNOBS["max_denoising_steps"], seed=KNOBS["seed"])
        assert finished_run(client, submit_generate(client, REQUEST["prompt"], label, **settings))[1] == ""
        first = saved_trace(client)
        assert first.end.sequence.tolist() == stock[0]  # the captured run is the stock sharded generate's

        job = submit_generate(client, REQUEST["prompt"], label, **LONG)
        wait_for_frames(job)
        client.predict(api_name="/stop")
        assert finished_run(client, job, timeout=HANG_GUARD_S)[1].startswith("Stopped after")

        # two visitors at once: the second waits in the queue, and both runs are the stock one
        jobs = [submit_generate(c, REQUEST["prompt"], label, **settings) for c in (client, other)]
        for c, j in zip((client, other), jobs):
            assert finished_run(c, j, timeout=HANG_GUARD_S)[1] == ""
            assert saved_trace(c).end.sequence.tolist() == stock[0]

        # any other model is refused before the queue, whatever a client sends (the served model's own folder is
        # taken as its label is: `Hosting.choice_for`)
        refused = submit_generate(client, REQUEST["prompt"], "google/gemma-2b")
        with pytest.raises(ValidationError) as refusal:  # the app's validator, in one line (hosting.py)
            refused.result(timeout=HANG_GUARD_S)
        assert "This server runs only the models in its list" in str(refusal.value)

        os.kill(pids[0], signal.SIGINT)  # rank 0 shuts down: the follower is told to leave
        assert proc.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / "torchrun.log").read_text()[-3000:]
    assert "Traceback" not in (tmp_path / "torchrun.log").read_text()
    assert int((tmp_path / "keep_alives").read_text()) > 0  # idle between requests: they ran in lockstep all the same


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_run_that_fails_on_rank_0_alone_restarts_the_group_and_a_follower_that_dies_then_is_named(tmp_path):
    """Out of memory on rank 0 alone, say: the followers wait in a collective rank 0 never joins. The visitor
    reads what happened, the app closes, torchrun (--max-restarts 1) starts every rank again, and the next
    request is served, equal to the stock run. Then a follower dies mid-run (one launch for both: torchrun has
    no restart left, as when started without any): it is named, the run keeps its steps and no rank hangs."""
    with sharded_app(tmp_path, restarts=1) as (proc, url, pids):
        client = Client(url, verbose=False, download_files=str(tmp_path))
        label = model_label(client)
        _, message = finished_run(client, submit_generate(client, "Fail on rank 0 alone", label, **LONG),
                                  timeout=HANG_GUARD_S)
        assert message.startswith("Generation failed: RuntimeError: out of memory on rank 0 alone (injected)")
        assert "the server restarts the sharded model now" in message
        assert saved_trace(client).steps  # what was recorded is kept
        deadline = time.monotonic() + HANG_GUARD_S
        while int((tmp_path / "pid_0").read_text() or 0) == pids[0]:  # the new attempt's rank 0 writes its pid
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "torchrun.log").read_text()[-3000:]
            time.sleep(0.2)
        while True:  # and serves again, on the same port
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "torchrun.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        client = Client(url, verbose=False, download_files=str(tmp_path))
        settings = dict(max_new_tokens=KNOBS["max_new_tokens"], steps=KNOBS["max_denoising_steps"], seed=KNOBS["seed"])
        assert finished_run(client, submit_generate(client, REQUEST["prompt"], model_label(client), **settings),
                            timeout=HANG_GUARD_S)[1] == ""
        assert saved_trace(client).end.sequence.tolist() == json.loads((tmp_path / "stock.json").read_text())[0]

        job = submit_generate(client, REQUEST["prompt"], model_label(client), **LONG)
        wait_for_frames(job)
        os.kill(int((tmp_path / "pid_1").read_text()), signal.SIGKILL)
        _, died = finished_run(client, job, timeout=HANG_GUARD_S)
        assert died.startswith("rank 1 of 2 stopped") and "Restart torchrun" in died
        recorded = saved_trace(client)  # what was recorded is kept, and the trace says why it ended
        assert recorded.steps and recorded.end.finish_reason == "error" and recorded.end.error == died
        assert client.predict(api_name="/sharded_health") == died  # what every open tab is shown
        assert proc.wait(timeout=HANG_GUARD_S) != 0  # torchrun ends rank 0 too, which says why before it goes
    log = (tmp_path / "torchrun.log").read_text()
    assert f"error: {message}" in log and f"error: {died}" in log
    assert "app.py\", line" not in log and "backends/" not in log  # no traceback of ours (torchrun prints its own)


@pytest.mark.parametrize("env, argv, says", [
    ({"WORLD_SIZE": "2", "RANK": "0"}, [], "add --parallel expert, tensor or tensor+expert"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, ["--parallel", "layers"], "start it with python, not torchrun"),
    ({"WORLD_SIZE": "3", "RANK": "0"}, ["--parallel", "tensor"], "cannot split this model 3 ways"),
    ({}, ["--parallel", "expert"], "start it with torchrun --nproc-per-node N"),
    ({"DV_HOSTED": "1"}, ["--parallel", "expert", "--model", "someone/elses-model"], "not in the hosted allowlist"),
])
def test_bad_flags_are_one_line_before_anything_loads(monkeypatch, capsys, env, argv, says):
    for name in ("WORLD_SIZE", "RANK", "DV_HOSTED", "SPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exit_:
        app_module.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    error = err.strip().splitlines()[-1]  # argparse's usage line, then this one
    assert ": error: " in error and says in error


def test_a_follower_refuses_bad_flags_without_a_word(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as exit_:
        app_module.main(["--parallel", "layers"])
    assert exit_.value.code == 2 and capsys.readouterr().err == ""  # rank 0 says it once


def test_a_server_of_one_model_takes_nothing_else():
    mode = Hosting(False, choices=())
    assert mode.choice_for("someone/model") is not None  # a desktop takes any hub id
    (only,) = Hosting.from_environment().choices[:1]
    one = mode.serving_only(only)
    assert one.closed and one.choices == (only,)
    assert one.choice_for(only.label) == only == one.choice_for(only.source)
    assert one.choice_for("someone/model") is None
    assert "only the models in its list" in one.model_problem("someone/model")


# ---- the Leader's rules, without torchrun: a stand-in backend, the collectives recorded ------------
class _Backend:
    """Yields RunStart-less runs: one step-like record, then a RunEnd (`fail`: its error), and returns
    `model_error` as `Backend.generate_batches` does (the exception that ended the model's run)."""

    def __init__(self):
        self.fail = None
        self.model_error = None
        self.mid_run = lambda: None  # what happens between the step and the end (a follower dies)
        self.stops = []  # each run's stop
        self.threads = []  # the thread each batch was made on
        self.finishes = []  # each run's finish reason, also when nobody read its RunEnd

    def check(self, prompt, settings):
        from backends import BackendError

        if not prompt.strip():
            raise BackendError("The prompt is empty.")

    def generate_batches(self, prompt, settings, stop):
        import numpy as np

        from visualizer.records import RunEnd

        self.stops.append(stop)
        self.threads.append(threading.current_thread())
        yield ["step"]
        self.mid_run()
        finish = "error" if self.fail else "cancelled" if stop.is_set() else "length"
        self.finishes.append(finish)
        self.threads.append(threading.current_thread())
        yield [RunEnd(finish_reason=finish, sequence=np.zeros(0, np.int32), text="", wall_time_s=0.0, error=self.fail)]
        return self.model_error


@pytest.fixture
def leader(monkeypatch):
    """A Leader of 2 ranks whose follower is this test's own process (alive), announcing into a list."""
    from backends import sharded_server

    said = []
    monkeypatch.setattr(sharded_server, "meet", lambda: [(socket.gethostname(), os.getpid())] * 2)
    monkeypatch.setattr(sharded_server, "announce", said.append)
    lead = sharded_server.Leader(_Backend(), keep_alive_s=0)
    lead.said = said
    return lead


def _run(leader, prompt="hi"):
    trace = []
    for _ in leader.run_records(prompt, "settings", trace=trace, stop=threading.Event()):
        pass
    return trace[-1]


def test_the_leader_announces_each_checked_request_and_says_goodbye(leader):
    from backends import BackendError

    assert _run(leader).finish_reason == "length"
    with pytest.raises(BackendError, match="empty"):
        _run(leader, "  ")  # refused on rank 0: never announced
    assert leader.problem() is None and leader.close() is True
    assert leader.said == [("hi", "settings"), None]
    with pytest.raises(BackendError, match="shutting down"):
        _run(leader)


def test_a_run_that_fails_on_rank_0_ends_the_servers_runs_without_a_goodbye(leader):
    from backends import BackendError

    leader.backend.fail = "Generation failed: RuntimeError: boom"
    leader.backend.model_error = RuntimeError("boom")  # raised inside rank 0's generate: the followers are still in theirs
    end = _run(leader)
    assert end.error.startswith("Generation failed: RuntimeError: boom") and "restart torchrun" in end.error
    assert leader.problem() == end.error
    with pytest.raises(BackendError, match="restart torchrun"):
        _run(leader)
    assert leader.close() is False and leader.said == [("hi", "settings")]  # the follower is inside its generate


@pytest.mark.parametrize("model_error", ["held until a vote", "none: the record was made on the reading side"])
def test_a_recording_error_that_every_rank_stopped_at_leaves_the_server_running(leader, model_error):
    from backends.sharded_server import FailedInStep

    leader.backend.fail = "Generation failed: RuntimeError: recording failed"
    # the capture raised it at a vote, or the model was stopped at its next vote as by a Stop: every rank left generate there
    leader.backend.model_error = FailedInStep() if model_error == "held until a vote" else None
    end = _run(leader)
    assert end.error == "Generation failed: RuntimeError: recording failed"  # no "restart torchrun"
    assert leader.problem() is None
    leader.backend.fail = None
    assert _run(leader, "again").finish_reason == "length"
    assert leader.close() is True and leader.said == [("hi", "settings"), ("again", "settings"), None]


def test_a_follower_whose_process_ended_is_named(leader):
    from backends import BackendError

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leader.pids = [os.getpid(), None, os.getpid()]  # rank 1 on another host: never looked at
    leader.backend.mid_run = lambda: leader.pids.__setitem__(2, int(gone.stdout))  # rank 2's process ends mid-run
    leader.backend.fail = "Generation failed: RuntimeError: Connection closed by peer"  # gloo's words for it
    leader.backend.model_error = RuntimeError("Connection closed by peer")
    end = _run(leader)
    assert end.error.startswith("rank 2 of 3 stopped") and "Restart torchrun" in end.error
    with pytest.raises(BackendError, match="rank 2 of 3 stopped"):
        _run(leader)
    assert leader.close() is False and leader.said == [("hi", "settings")]  # nobody would hear the goodbye


def test_a_run_read_one_batch_per_thread_is_made_on_the_leaders_own_serving_thread(leader):
    """Gradio reads a stream one `next()` at a time, each on whichever worker thread is free. The run (and
    the lock it holds) stays on one serving thread of the Leader's, none of the readers', and the lock is
    free again after the run."""
    from visualizer.records import RunEnd

    step_read = threading.Event()
    leader.backend.mid_run = step_read.wait  # the run goes on once the first batch was read
    trace = []
    records = leader.run_records("hi", "settings", trace=trace, stop=threading.Event())
    got, readers = [], []

    def read_one_batch():
        got.append(next(records, None))
        readers.append(threading.current_thread())
        step_read.set()

    for _ in range(3):  # the step, the RunEnd, the stream's end: each read on a thread of its own
        reader = threading.Thread(target=read_one_batch)
        reader.start()
        reader.join(timeout=30)
    assert got[0] == ["step"] and isinstance(got[1][-1], RunEnd) and got[2] is None
    assert trace[-1].finish_reason == "length"
    (serving,) = set(leader.backend.threads)
    assert serving not in readers and serving is not threading.current_thread()
    assert leader.close(timeout=5) is True and leader.said == [("hi", "settings"), None]


def test_a_request_that_comes_while_another_runs_waits_for_its_end(leader):
    go_on = threading.Event()
    leader.backend.mid_run = go_on.wait
    first = leader.run_records("first", "settings", trace=[], stop=threading.Event())
    assert next(first) == ["step"]  # the first run is mid-way
    second_trace = []
    second = threading.Thread(target=lambda: _drain(leader.run_records("second", "settings", trace=second_trace,
                                                                       stop=threading.Event())))
    second.start()
    second.join(timeout=0.5)  # time enough to start, were it not waiting
    assert leader.said == [("first", "settings")] and second_trace == []
    go_on.set()
    assert list(first)[-1][-1].finish_reason == "length"
    second.join(timeout=30)
    assert not second.is_alive() and second_trace[-1].finish_reason == "length"
    assert leader.said == [("first", "settings"), ("second", "settings")]


def test_a_closed_stream_stops_the_run_at_its_next_step_and_frees_the_lock(leader):
    """Gradio closes the stream of a tab that went away (or of Stop's cancel): the run ends at its next
    step on the serving thread, and the next request can run."""
    leader.backend.mid_run = lambda: leader.backend.stops[-1].wait(30)  # mid-run until stopped
    records = leader.run_records("hi", "settings", trace=[], stop=threading.Event())
    assert next(records) == ["step"]
    records.close()
    assert leader.backend.finishes == ["cancelled"]  # ended before close() returned
    leader.backend.mid_run = lambda: None
    assert _run(leader, "again").finish_reason == "length"
    assert leader.close(timeout=5) is True


def _drain(batches):
    for _ in batches:
        pass


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_sharded_app_that_cannot_serve_says_why_and_fails(tmp_path):
    """The app's port taken by another process: rank 0's launch fails, which torchrun's log says in one line and
    its status tells (before, the group's orderly end replaced the error: status 0, nothing in the log)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env.pop("SPACE_ID", None), env.pop("DV_HOSTED", None)
    with socket.socket() as taken, open(tmp_path / "torchrun.log", "w") as log:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        ended = subprocess.run(
            [*single_host(2), *worker_module("sharded_app_worker"), "expert", str(tmp_path), json.dumps(REQUEST), "--",
             "--parallel", "expert", "--port", str(taken.getsockname()[1])],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=HANG_GUARD_S,
        )
    text = (tmp_path / "torchrun.log").read_text()
    assert ended.returncode != 0, text[-3000:]
    assert "error: the app could not serve:" in text
