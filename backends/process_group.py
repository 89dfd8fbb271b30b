"""How a torchrun process ends: its process group destroyed in order, so a finished run exits 0.

    status = run_the_command()
    return end_process(status)          # every rank, every path out (cli.main, the app, the workers)

Why this is needed (issue 46; reproduced on torch 2.13 with gloo): `destroy_process_group()` drops
torch's own references to the group, but the group (a `ProcessGroupGloo` and its C++ worker threads)
also sits in reference cycles, about ten references after a probe run. It is freed whenever the cyclic
collector next runs. When that happens during interpreter shutdown, its C++ destructor runs in a
half-finalized interpreter and the process aborts with "terminate called without an active exception"
(exit code -6), after a run that had written everything: torchrun then reports the job failed. A
process that never destroys its group (a sharded model's, opened by transformers) meets the same
abort more often. So the group is destroyed, the collector run and the group checked gone through a
weak reference, while the interpreter is whole.

Where the group cannot be ended that way, the process ends with `os._exit` after flushing its output,
so no destructor of it runs at all: a run left its generation thread inside a collective a dead rank
never joins (`abandon_process`; destroying the group or joining that thread would wait for ever), the
group is NCCL after compiled runs (CUDA graphs hold NCCL work: `destroy_process_group` never returns,
BENCHMARKS.md), or something still holds the group after the collection.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from datetime import timedelta

# Test hook: a folder where each rank that ends in order writes what it left running (tests/test_torchrun_exit.py).
EXIT_REPORT_ENV = "VISUALIZER_TEST_EXIT_REPORT"

# Why the process cannot end in order (a run's worker left inside a collective); None while it can.
_stuck_reason: str | None = None
_compiled_runs = False  # see note_compiled_run


def note_compiled_run() -> None:
    """A compiled run happened in this process: its CUDA graphs hold NCCL work, so an NCCL group is
    not destroyed at the end (destroy_process_group does not return after them)."""
    global _compiled_runs
    _compiled_runs = True


def abandon_process(reason: str) -> None:
    """A run gave up on its worker thread, which sits in a collective that never returns: this process
    ends with `os._exit` (`end_process`), since joining that thread or destroying its group would hang."""
    global _stuck_reason
    _stuck_reason = _stuck_reason or reason


def stuck_reason() -> str | None:
    return _stuck_reason


def join_group(backend: str, *, timeout: timedelta, device_id=None) -> None:
    """Open this torchrun worker's default group (RANK, WORLD_SIZE from torchrun) on torchrun's store,
    with keys of this attempt only; nothing when one is open already.

    torchrun keeps one store (its agent's) across --max-restarts attempts; a group built on it as is
    finds the keys of the killed attempt: init_process_group hangs (seen on torch 2.13 with the static
    and the c10d rendezvous), or gloo connects to the dead attempt's addresses and fails ("Connection
    refused": what transformers' own init met when a sharded `record` was restarted). A prefix per
    attempt gives each its own keys."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    world = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    agent_hosts_it = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          is_master=not agent_hosts_it and rank == 0, timeout=timedelta(minutes=10))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(backend, store=dist.PrefixStore(f"visualizer-attempt-{attempt}", store), rank=rank,
                            world_size=world, timeout=timeout, device_id=device_id)


def group_initialized() -> bool:
    dist = sys.modules.get("torch.distributed")  # never imported (a command that renders a trace): no group
    return dist is not None and dist.is_available() and dist.is_initialized()


def end_group(*, destroy: bool = True) -> bool:
    """Destroy this process's default group now, collect the cycles that hold it, and return whether it
    is gone (True when there was none). `destroy=False` (NCCL after compiled runs) only says False."""
    if not group_initialized():
        return True
    import torch.distributed as dist

    if not destroy:
        return False
    group = weakref.ref(dist.group.WORLD)
    dist.destroy_process_group()
    gc.collect()  # the group's last references are in cycles: free it here, not during shutdown
    return group() is None


def end_process(status: int, *, backend=None) -> int:
    """End a torchrun worker: close `backend` (its generation thread ends, its model lets go of the
    group), destroy the group and check it is gone. Returns `status` when all that worked, for the
    caller's normal exit; otherwise flushes stdout and stderr and leaves at once with `os._exit(status)`.
    Outside torchrun (no group) it only returns `status`."""
    if _stuck_reason is None:
        nccl = group_initialized() and sys.modules["torch.distributed"].get_backend() == "nccl"
        destroy = not (nccl and _compiled_runs)
        if backend is not None:
            backend.close()
        del backend
        if end_group(destroy=destroy):
            _report_exit("in order")
            return status
        why = ("NCCL after compiled runs: destroy_process_group would not return" if not destroy else
               "the group is still held after destroy_process_group and a collection (a sharded model's, from C++)")
    else:
        why = f"a run was abandoned inside a collective: {_stuck_reason}"
    _report_exit(f"os._exit: {why}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def live_threads() -> list[str]:
    """The names of this process's threads other than the main one (a test's check at exit)."""
    return sorted(t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive())


def _report_exit(how: str) -> None:
    folder = os.environ.get(EXIT_REPORT_ENV)
    if not folder:
        return
    import json

    name = f"rank{os.environ.get('RANK', '0')}-attempt{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}.json"
    report = {"ended": how, "threads": live_threads(), "group": group_initialized()}
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump(report, f)
