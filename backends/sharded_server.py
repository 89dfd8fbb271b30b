"""A sharded model serving many requests under torchrun: rank 0's `Leader`, the other ranks'
`follow_requests`, and the vote that keeps every rank's `generate` in step, with the errors it raises.

    leader = Leader(backend)                        # rank 0, after load_backend(..., parallel=KIND)
    for batch in leader.run_records(prompt, settings, trace=trace, stop=stop): ...
    leader.problem()                                # None, or why no request can run any more
    leader.own_exits(close_server, grace_s=10)      # torchrun's SIGTERM, a restart: the server closes
    leader.close()                                  # at exit: announce(None), the followers leave

    sys.exit(follow_requests(backend))              # every other rank, until rank 0 says goodbye

The app runs it (`torchrun --nproc-per-node 2 app.py --parallel expert`). Where a process stands under
torchrun and how the model is split are `backends/sharded.py`'s; the vote (`agreed`) runs inside every
rank's capture, also for a single sharded `record`.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from visualizer.records import FINISH_ERROR, RunEnd

from . import run
from .base import BackendError, model_error, start_thread
from .bridge import GenerationCancelled, Stop
from .known import first_line
from .process_group import abandon_process
from .sharded import local_rank, rank
from .vote_errors import RANKS_DISAGREE, FailedInStep, RanksDisagree

KEEP_ALIVE = "keep-alive"  # announced by an idle leader, so that a follower's wait never meets the group's timeout
# transformers opens the process group with a 2-hour timeout: a follower waiting longer for the next
# request would fail its broadcast and end the server; a keep-alive a minute costs one tiny broadcast.
KEEP_ALIVE_S = 60.0
LOST_WAIT_S = 2.0  # after a failed collective, how long a dying rank's process is given to be gone
_SERVED = object()  # the serving thread has ended its request (its error, if any, is in its Future)


# ---- the vote: one request at a time, stopped on every rank at once ----------------------------
def agreed(flag: bool, canvas=None) -> bool:
    """True on every rank when any rank's `flag` is true: one tiny all-reduce, called by all ranks alike.

    The capture's vote (`capture_steps(agree=agreed)`): it asks at each block's start and before each
    step, on every rank (followers run it too, recording nothing), so a stop, a closed browser or a
    recording error on rank 0 ends the run on all ranks between the same two steps, and every rank is
    ready for the next request.

    Before a step it also gets the canvas that step denoises, which every rank must hold alike (each
    samples it from the same all-reduced logits with the same seed). The same all-reduce carries its
    fingerprint; where the ranks' fingerprints differ, every rank raises RanksDisagree at this vote."""
    import torch
    import torch.distributed as dist

    # this rank's GPU, named: the current device is per thread, and the vote runs on the generation thread
    device = torch.device("cuda", local_rank()) if dist.get_backend() == "nccl" else torch.device("cpu")
    fingerprint = torch.zeros((), dtype=torch.int64, device=device) if canvas is None else canvas_fingerprint(canvas).to(device)
    # MAX of (flag, f, -f): any rank's stop, and the largest and (negated) smallest fingerprint
    vote = torch.stack([torch.tensor(int(bool(flag)), device=device), fingerprint, -fingerprint])
    dist.all_reduce(vote, op=dist.ReduceOp.MAX)
    stop, highest, minus_lowest = vote.tolist()
    if highest != -minus_lowest:
        raise RanksDisagree(RANKS_DISAGREE)
    return bool(stop)


def canvas_fingerprint(canvas):
    """One int64, on the canvas's device (no copy to the host): every token id times its 1-based
    position, summed. One changed token always changes it; several could cancel out only by an exact
    coincidence, and a divergence that did would show at a later step."""
    import torch

    ids = canvas.reshape(-1).to(torch.int64)
    return (ids * torch.arange(1, ids.numel() + 1, device=ids.device)).sum()


def announce(request) -> None:
    """Rank 0: send the next request (prompt, settings) to the followers; None tells them to leave,
    KEEP_ALIVE only that rank 0 is still there."""
    import torch.distributed as dist

    dist.broadcast_object_list([request], src=0)


def serve(backend) -> int:
    """A follower's life: wait for each request rank 0 announces and run it in lockstep, until None.

    Returns how many requests it ran. A request rank 0 refuses (bad prompt, bad knobs) is refused here
    too, before any collective, by the same `check`."""
    import torch.distributed as dist

    served = 0
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0)
        if box[0] is None:
            return served
        if box[0] == KEEP_ALIVE:
            continue
        prompt, settings = box[0]
        try:
            backend.follow(prompt, settings)
        except (BackendError, GenerationCancelled):  # refused or stopped like rank 0; the next request decides
            pass
        served += 1


# ---- a sharded server: rank 0 leads, the followers follow, and a rank that stops is named ---------
def meet() -> list[tuple[str, int]]:
    """Every rank's (host name, process id), in rank order: one all-gather at start-up, by the leader
    and every follower."""
    import torch.distributed as dist

    ranks = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, (socket.gethostname(), os.getpid()))
    return ranks


def process_gone(pid: int) -> bool:
    """True once the process has ended (a zombie that torchrun has not reaped yet counts as ended).
    For processes of this host only: rank 0 looks at the followers that share its host."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except (OSError, IndexError):  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class Leader:
    """Rank 0 of a sharded server (the app under torchrun): runs one request at a time in lockstep
    with the followers (`follow_requests`), names a follower whose process has ended, and tells the
    followers to leave at the end.

    Every collective of rank 0 (announce, the run's all-reduces, the stop votes, keep-alives) happens
    under one lock, so the ranks always meet in the same sequence whoever asks. A request runs on a
    serving thread of the Leader's own, which holds that lock from the request's check to its RunEnd;
    `run_records` only reads the batches it sends, so any thread may read each next batch (Gradio
    reads a stream on one worker thread after another) and a request that comes while another runs
    waits for it to end. A stop (or a closed stream) ends a run on every rank between the same two
    steps; a refused request fails before anything is announced; an error of the capture's own (rank 0
    records, the others do not) is held until the next vote and ends the run on every rank at the same
    step (`capture_steps(agree=...)`), so the server goes on; so do ranks whose canvases differ
    (RanksDisagree, raised at a vote). Any other error inside rank 0's `generate` (one the followers do
    not meet, e.g. running out of GPU memory on rank 0 alone) leaves the followers inside theirs, so it
    ends the server's runs too, with the error and "restart torchrun".
    A dead follower: with gloo the run's next collective fails at once (its socket closes), and the
    run ends with "rank 1 of 2 stopped ..." instead of gloo's error; with NCCL it would wait for the
    group's timeout. torchrun notices a dead worker within its monitor interval (0.1 s) and sends
    SIGTERM to the others: `own_exits` turns that into `end(problem)` and closes the server."""

    def __init__(self, backend, *, keep_alive_s: float | None = None):
        self.backend = backend
        here = socket.gethostname()  # a follower on another host (torchrun --nnodes) cannot be looked at: None
        self.pids = [pid if host == here else None for host, pid in meet()]
        self.keep_alives = 0  # sent so far (the tests read it)
        keep_alive_s = KEEP_ALIVE_S if keep_alive_s is None else keep_alive_s  # 0: none
        self._lock = threading.Lock()  # one request, keep-alive or goodbye at a time on the process group
        self._ended: str | None = None  # why no request runs any more (a lost rank, a failed run, a shutdown)
        self._out_of_step = False  # a run failed on rank 0 alone: the followers cannot hear a goodbye
        self._stop: Stop | None = None  # the run in flight's stop
        self._idle_since = time.monotonic()
        self._closed = threading.Event()
        # set when a run failed on rank 0 alone and torchrun has restarts left: the server should end now,
        # so that torchrun restarts the whole group (the app waits on it)
        self.restarting = threading.Event()
        if keep_alive_s:
            threading.Thread(target=self._keep_alive, args=(keep_alive_s,), name="sharded-keep-alive", daemon=True).start()

    @property
    def closing(self) -> bool:
        """`close` was called: the server is on its way out."""
        return self._closed.is_set()

    # ---- what went wrong ----
    def stopped_ranks(self) -> list[int]:
        return [r for r, pid in enumerate(self.pids) if r and pid is not None and process_gone(pid)]

    def lost(self, wait: float = 0.0) -> str | None:
        """One line naming the followers whose process has ended, None while all run. `wait`: seconds
        given to a dying rank to be gone (a failed collective can come a moment before its exit)."""
        deadline = time.monotonic() + wait
        gone = self.stopped_ranks()
        while not gone and time.monotonic() < deadline:
            time.sleep(0.05)
            gone = self.stopped_ranks()
        if not gone:
            return None
        ranks = f"rank {gone[0]}" if len(gone) == 1 else "ranks " + ", ".join(map(str, gone))
        return (f"{ranks} of {len(self.pids)} stopped (its process ended; torchrun's log says why): the sharded "
                "model can't run any more. Restart torchrun.")

    def problem(self) -> str | None:
        """Why no request can run (a follower stopped, the server is shutting down); None when they can."""
        return self.lost() or self._ended

    def end(self, reason: str) -> None:
        """No request runs after this: the run in flight stops at its next step (on every rank, while
        they all live) and later requests are refused with `reason`. With NCCL a rank that died leaves
        the others inside its collective for ever, so the run is also abandoned: it ends with `reason`
        `ABANDON_GRACE_S` later whether or not the model gets there (`base.Stop`)."""
        self._ended = self._ended or reason
        stop = self._stop
        if stop is not None:
            stop.abandon(self._ended)

    # ---- the server's way out: torchrun's SIGTERM, a restart ----
    def own_exits(self, close_server: Callable[[], None], *, grace_s: float) -> None:
        """Call once on the main thread before serving: torchrun's SIGTERM ends every run with its reason
        (`end_on_sigterm`), and a run that failed on rank 0 alone with restarts left (`restarting`) ends the
        server; either way `close_server` closes it `grace_s` later (open pages read why meanwhile), and
        the server's owner then calls `close` and exits (1 when out of step: torchrun restarts every rank)."""
        signal.signal(signal.SIGTERM, lambda signum, frame: self.end_on_sigterm(close_server, grace_s=grace_s))
        threading.Thread(target=self._close_when_restarting, args=(close_server, grace_s), name="sharded-restart",
                         daemon=True).start()

    def end_on_sigterm(self, close_server: Callable[[], None] | None = None, *, grace_s: float = 0.0) -> str:
        """torchrun's SIGTERM: a rank stopped (torchrun ends the others within its 0.1 s monitor interval),
        or the job is being shut down. Runs and later requests end with the reason, said on stderr and
        returned; then, `grace_s` later, `close_server` (if given) closes the server."""
        lost = self.lost(wait=0.5)  # the followers still there linger in their collective: they are not the lost one
        problem = lost or "This server is shutting down (torchrun sent SIGTERM)."
        self.end(problem)
        print(f"error: {problem}" if lost else problem, file=sys.stderr, flush=True)
        if close_server is not None:
            time.sleep(grace_s)
            close_server()
        return problem

    def _close_when_restarting(self, close_server: Callable[[], None], grace_s: float) -> None:
        while not self.restarting.wait(0.5):
            if self.closing:
                return
        print(f"error: {self.problem()}", file=sys.stderr, flush=True)
        time.sleep(grace_s)
        close_server()

    # ---- running requests ----
    def run_records(self, prompt: str, settings, *, trace, stop: threading.Event) -> Iterator[list]:
        """`backends.run_records` in lockstep: the request is checked, announced to the followers and
        run on rank 0 by a serving thread (`generate_batches`). Raises BackendError (a bad request, or
        `problem()`) at the first batch, before anything is announced."""
        return run.run_records(self, prompt, settings, trace=trace, stop=stop)

    def generate_batches(self, prompt: str, settings, stop: threading.Event) -> Iterator[list]:
        """The run's batches, as `run_records` reads them: every record the serving thread has sent since
        the last batch (waiting for the first). Closing this generator stops the run at its next step
        and waits until the serving thread has let go of the lock."""
        run_stop = Stop(linked=stop)  # the caller's stop, and `end`'s abandon
        # Unbounded: the serving thread never waits for a reader, so it always gets to its RunEnd and
        # lets go of the lock; a run's records are small, and the trace keeps them all anyway.
        sent: queue.Queue = queue.Queue()
        job = start_thread(lambda: self._serve(prompt, settings, run_stop, sent), name="sharded-request")
        try:
            over = False
            while not over:
                batch, item = [], _next(sent, run_stop)
                while True:  # everything sent meanwhile goes in one batch: a slow reader gets fewer, larger ones
                    if item is _SERVED:
                        over = True
                        break
                    batch += item
                    try:
                        item = sent.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    yield batch
            job.result()  # the serving thread's error: a refused request, a follower that did not answer
        finally:
            run_stop.set()  # a reader that left early (a closed stream): the run ends at its next step
            job.exception()  # returns once the serving thread has ended the run and let go of the lock

    def _serve(self, prompt: str, settings, stop: Stop, sent: queue.Queue) -> None:
        """The serving thread: one request under the lock, from its check to its RunEnd, each batch into
        `sent`, then `_SERVED`."""
        try:
            with self._lock:
                self._stop = stop
                try:
                    problem = self.problem()
                    if problem:
                        raise BackendError(problem)
                    self.backend.check(prompt, settings)  # refused here: the followers never hear of it
                    self._announce((prompt, settings))
                    for batch in self._lockstep_batches(prompt, settings, stop):
                        sent.put(batch)
                finally:
                    self._stop = None
                    self._idle_since = time.monotonic()
        finally:
            sent.put(_SERVED)

    def _lockstep_batches(self, prompt: str, settings, stop: Stop) -> Iterator[list]:
        """The backend's batches; a failed run's RunEnd says what the failure means for the server (`_after_failure`)."""
        batches = self.backend.generate_batches(prompt, settings, stop)
        for batch in batches:
            end = batch[-1]
            if isinstance(end, RunEnd) and end.finish_reason == FINISH_ERROR:
                error = self._after_failure(end.error, model_error(batches), stop)
                batch = [*batch[:-1], replace(end, error=error)]
            yield batch

    def _after_failure(self, error: str | None, failure: BaseException | None, stop: Stop) -> str | None:
        """A failed run's message, given what the model's run raised (`failure`, the run's return value):
        a rank whose process ended ends the server's runs; a run that every rank left at the same vote
        leaves it serving; rank 0 leaving its `generate` alone ends it (and restarts it, where torchrun can)."""
        lost = self.lost(wait=LOST_WAIT_S)
        if lost:
            self.end(lost)
            return lost
        if isinstance(failure, FailedInStep):
            return error  # raised at a vote (a held recording error, ranks that disagree): every rank stopped there
        if failure is None and not stop.given_up():
            return error  # a record rank 0 could not make: the model stopped at its next vote, as for a stop
        # rank 0 left `generate` mid-way, or never came back from it: the others may wait in its next collective for ever
        self._out_of_step = True
        self.end(out_of_step_message(error))
        # the followers sit in a collective for good: destroying the group would wait for them
        abandon_process("a run failed on rank 0 alone: the other ranks wait in a collective it never joins")
        if restarts_left() > 0:
            self.restarting.set()  # the app closes, rank 0 exits 1, torchrun restarts every rank
        return self._ended

    def _announce(self, request) -> None:
        try:
            announce(request)
        except Exception as exc:  # noqa: BLE001  a follower's socket closed (gloo): say which one
            lost = self.lost(wait=LOST_WAIT_S) or f"The other ranks did not answer ({_first_line(exc)}): restart torchrun."
            self.end(lost)
            raise BackendError(lost) from None

    def _keep_alive(self, every: float) -> None:
        while not self._closed.wait(min(every, 5.0)):
            if self.problem() or time.monotonic() - self._idle_since < every or not self._lock.acquire(blocking=False):
                continue
            try:
                if not self._closed.is_set():
                    self._announce(KEEP_ALIVE)
                    self.keep_alives += 1
            except Exception:  # noqa: BLE001  said by problem() from now on
                pass
            finally:
                self._idle_since = time.monotonic()
                self._lock.release()

    def close(self, timeout: float = 60.0) -> bool:
        """At exit: stop a run in flight, then tell the followers to leave (announce None). Returns
        whether they were told (not when one has stopped: nobody listens then)."""
        self._closed.set()
        self.end("This server is shutting down.")
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            if self._out_of_step or self.lost():
                return False
            announce(None)
            return True
        except Exception:  # noqa: BLE001  a follower went meanwhile
            return False
        finally:
            self._lock.release()


def _next(sent: queue.Queue, stop: Stop):
    """The serving thread's next item, waiting for it; Ctrl-C while waiting (a reader on the main
    thread) stops the run, as it does in `bridge.stream`, and the reading goes on to its RunEnd."""
    while True:
        try:
            return sent.get()
        except KeyboardInterrupt:
            stop.set()


def restarts_left() -> int:
    """How many more times torchrun restarts this job when a worker fails (its --max-restarts)."""
    return int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) - int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def out_of_step_message(error: str | None) -> str:
    """What a visitor reads when a run failed on rank 0 alone (e.g. out of GPU memory there): the other
    ranks wait in a collective rank 0 never joins, so only a new group can run again."""
    said = f"{(error or 'The run failed').rstrip('.')}. Rank 0 failed alone, so the other ranks are out of step"
    if restarts_left() > 0:
        return f"{said}: the server restarts the sharded model now (torchrun --max-restarts); try again in a minute."
    return f"{said}: restart torchrun (started with --max-restarts N, it restarts by itself)."


def follow_requests(backend) -> int:
    """A follower's life in a sharded server: meet the leader, run every request it announces in
    lockstep (`serve`), leave when it says so. Returns the exit status: 0 when told to leave, 1 when
    the leader went first (its collective failed).

    Ctrl-C reaches every rank of a terminal's torchrun: a follower ignores it and leaves when rank 0,
    which shuts down on it, says so. SIGTERM (torchrun ending the job) takes effect when the collective
    it waits in returns (rank 0's goodbye, or the error of its end), so a follower that is still
    there when rank 0 looks was not the one that stopped. With NCCL a collective that never completes
    holds the thread in a host sync without letting go of the interpreter lock (on 2 H100s, with the wait
    moved to a second thread, the main thread's SIGTERM handler never ran), so torchrun's SIGKILL, 30 s
    after its SIGTERM, ends such a follower."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _leave)
    meet()
    try:
        serve(backend)
    except Exception as exc:  # noqa: BLE001  the leader's process ended: its sockets closed
        print(f"rank {rank()}: rank 0 is gone ({_first_line(exc)}); leaving.", file=sys.stderr)
        return 1
    return 0


def _leave(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _first_line(exc: BaseException) -> str:
    """The exception's type and its first line (`known.first_line`), for a rank's one-line farewell."""
    text = first_line(exc)[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
