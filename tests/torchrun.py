"""What the torchrun tests share: the launcher on a port nobody else holds, and the environment.

    done = subprocess.run([*single_host(2), "-m", "visualizer", "probe", ...], env=worker_env(), ...)
    done = subprocess.run([*single_host(2), *worker_module("sharded_worker"), ...], cwd=ROOT, env=worker_env(), ...)

`single_host` uses torchrun's `--standalone`: its rendezvous store binds port 0, so the kernel picks a
free port at bind time and two tests (or a leftover of an earlier one) never meet on one port. Only a
test of several "hosts" needs a port named in advance (`free_port`, its own rendezvous id).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def single_host(processes: int = 2, *more: str) -> list[str]:
    """torchrun for `processes` workers on this host, on a rendezvous port the kernel picks."""
    return [*TORCHRUN, "--standalone", "--nproc-per-node", str(processes), *more]


def worker_module(name: str) -> list[str]:
    """torchrun's arguments that run tests/NAME.py as the module `tests.NAME` (torchrun's `-m`): started
    from the repository root (cwd=ROOT), a worker imports the project like any module, without a sys.path edit."""
    return ["-m", f"tests.{name}"]


def free_port() -> int:
    """A port free right now (for a URL or a multi-host rendezvous that must be named in advance)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_env(**extra: str) -> dict:
    """The test's environment for torchrun's workers: one thread each (two cores run two ranks), no GPU."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT), **extra)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def rank_pid(launcher_pid: int, rank: int) -> int | None:
    """The worker process that torchrun (`launcher_pid`) started as `rank`, None when there is none (yet)."""
    import psutil

    try:
        children = psutil.Process(launcher_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for child in children:
        try:
            if child.environ().get("RANK") == str(rank) and "TORCHELASTIC_RUN_ID" in child.environ():
                return child.pid
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None
