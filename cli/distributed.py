"""The one place that knows about several processes: rank, world size, who deals the work, who writes.

    torchrun --nproc-per-node 4 -m visualizer probe --out runs/big ...     # one model replica per GPU
    python -m visualizer probe --out runs/big ...                          # the same run, one process

    cluster = join_cluster()          # before the model loads: it picks this process's GPU
    results = run_plan(cluster, prepare=..., work=..., finish=..., watch=...)   # None on ranks other than 0

torchrun starts the processes (and restarts them with --max-restarts); this module never spawns
any.  It reads torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK), gives each process its own
GPU (CUDA_VISIBLE_DEVICES narrowed to LOCAL_RANK's device, before anything touches CUDA), and
joins a gloo process group used only for small control messages (the plan, the failures): the
traces go to the shared output folder, never through the group, so the GPUs' work never waits on it.

The protocol, the same for 1 process or many:
1. rank 0 runs `prepare()`: it writes or checks the manifest with the plan (which items, in which
   batches) and lists the batches not finished yet; every rank receives both;
2. the unfinished batches are dealt round robin over the ranks (batch k of the list to rank
   k % world size), recorded in the manifest by rank 0; a rank sees a plain list of batches
   (`work(plan, batches, kill_hook)`), rank 0 with a progress bar around it (`watch(plan, todo)`);
3. a rank whose work fails says which batches it held and why (its own line on stderr), then
   every rank reports to rank 0, and rank 0 alone runs `finish(plan)` (the tables from every
   rank's results) when all succeeded.
The plan never depends on the number of processes, so 1, 2 or 4 give the same traces; a rerun,
or torchrun restarting a killed worker, finds the finished batches on disk and redoes the rest.
Several hosts: torchrun's own rendezvous (`--nnodes 2 --rdzv-backend c10d --rdzv-endpoint
HOST:PORT`), with OUT on a filesystem every host sees.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta

# Where a process stands among torchrun's is read in one place, beside the sharded model's lockstep,
# which needs the same answers: backends/sharded.py.
from backends import sharded

# A batch can take minutes at the real shape and ranks wait for the slowest at the end.
_GROUP_TIMEOUT = timedelta(hours=12)
# Test hook: "RANK:N" makes that rank kill itself (SIGKILL, no cleanup) once it generated N batches, on
# torchrun's first attempt only, to test resuming after a killed worker.
KILL_AFTER_ENV = "VISUALIZER_TEST_KILL_AFTER"


class RunFailed(RuntimeError):
    """Some rank could not finish its batches; each failing rank has said why."""


@dataclass(frozen=True)
class Cluster:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def deal(self, todo: list) -> list:
        """This rank's share of the unfinished batches: every world_size-th, starting at its rank."""
        return todo[self.rank::self.world_size]

    def share(self, value):
        """Rank 0's `value`, on every rank."""
        if self.world_size == 1:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value) -> list:
        """Every rank's `value`, in rank order, on every rank."""
        if self.world_size == 1:
            return [value]
        import torch.distributed as dist

        out = [None] * self.world_size
        dist.all_gather_object(out, value)
        return out


def is_first_process() -> bool:
    """Rank 0, or no torchrun at all (readable before joining the group)."""
    return sharded.rank() == 0


def join_cluster() -> Cluster:
    """This process's place among torchrun's processes (rank 0 of 1 without torchrun)."""
    world = sharded.world_size()
    cluster = Cluster(sharded.rank(), world, sharded.local_rank())
    if world > 1:
        _own_gpu(cluster.local_rank)
        import torch.distributed as dist

        if not dist.is_initialized():  # control messages only: gloo on any host
            from backends.process_group import join_group

            join_group("gloo", timeout=_GROUP_TIMEOUT)
    return cluster


def leave_cluster(cluster: Cluster) -> None:
    """End the control group while the interpreter is whole (`backends.process_group` says why a group
    left to interpreter shutdown aborts a finished run); `cli.main` ends the process after that."""
    if cluster.world_size > 1:
        from backends.process_group import end_group

        end_group()


def _own_gpu(local_rank: int) -> None:
    """One GPU per process: narrow CUDA_VISIBLE_DEVICES to this local rank's device (before CUDA starts)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = visible.split(",") if visible else None
    if devices is None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    elif local_rank < len(devices):
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[local_rank]


def run_plan(
    cluster: Cluster,
    *,
    prepare: Callable[[int], tuple[object, list]],
    work: Callable[[object, list, Callable[[], None]], None],
    finish: Callable[[object], object],
    watch: Callable[[object, list], object] | None = None,
    describe: Callable[[list], str] = str,
):
    """Run a plan over every rank (module docstring); rank 0 returns `finish(plan)`, the others None.

    `prepare(world_size) -> (plan, todo)` runs on rank 0 only; a ProbeError-like exception there is
    raised on every rank (rank 0 shows it).  `work(plan, my_batches, kill_hook)` calls `kill_hook(settle)`
    after each batch it generates (a test's hook: KILL_AFTER_ENV).  `describe(batches)` names
    batches in a failure message.
    """
    problem = None
    plan = todo = None
    if cluster.is_writer:
        try:
            plan, todo = prepare(cluster.world_size)
        except Exception as exc:  # shared with the other ranks, then raised again on rank 0
            problem = exc
    plan, todo, shared_problem = cluster.share((plan, todo, None if problem is None else str(problem)))
    if problem is not None:
        raise problem
    if shared_problem is not None:
        raise RunFailed(shared_problem)

    mine = cluster.deal(todo)
    failure = None
    with (watch(plan, todo) if watch and cluster.is_writer else nullcontext()):
        try:
            work(plan, mine, _kill_hook(cluster.rank))
        except Exception as exc:  # any failure of this rank's work: say what it held and why, then report to rank 0
            failure = str(exc) if type(exc).__name__ in ("ProbeError", "BackendError") else f"{type(exc).__name__}: {exc}"
            print(f"error: rank {cluster.rank} of {cluster.world_size}, holding {describe(mine)}, failed: {failure}",
                  file=sys.stderr)
    failures = [f for f in cluster.gather(failure) if f is not None]
    if failures:
        raise RunFailed(f"{len(failures)} of {cluster.world_size} ranks failed (above); run the same command again to "
                        "redo their unfinished batches: the finished ones are kept")
    return finish(plan) if cluster.is_writer else None


def _kill_hook(rank: int) -> Callable[..., None]:
    """After each batch generated (before it is saved, so it and the batches after it are not on
    disk): nothing, unless KILL_AFTER_ENV names this rank (a test of resuming).  Then, at its Nth
    batch, the rank first lets its writer finish the batches before it (`settle`): otherwise, with
    the writer's start slow on a loaded machine, nothing of the first attempt could be on disk yet,
    and the test of "only the unfinished batches are redone" would see every batch redone."""
    spec = os.environ.get(KILL_AFTER_ENV, "")
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return lambda settle=None: None
    target, count = (int(x) for x in spec.split(":"))
    done = [0]

    def on_generated(settle: Callable[[], None] = lambda: None) -> None:
        done[0] += 1
        if rank == target and done[0] >= count:
            settle()
            os.kill(os.getpid(), signal.SIGKILL)

    return on_generated
