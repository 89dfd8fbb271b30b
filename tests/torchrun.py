"""What the torchrun tests share: the launcher on a port nobody else holds, and the environment.

    done = subprocess.run([*single_host(2), "-m", "visualizer", "probe", ...], env=worker_env(), ...)
    done = subprocess.run([*single_host(2), *worker_module("sharded_worker"), ...], cwd=ROOT, env=worker_env(), ...)

`single_host` uses torchrun's `--standalone`: its rendezvous store binds port 0, so the kernel picks a
free port at bind time and two tests (or a leftover of an earlier one) never meet on one port. Only a
test of several "hosts" needs a port named in advance (`free_port`, its own rendezvous id).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
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


# ---- a command's terminal: its progress is then the per-step bar (piped, it is a line per block) ----
# The bar of a 48-step block at step 3 to 47 ("3/48"): a run is under way and its block not yet over.
MID_RUN_BAR = re.compile(r"\b([3-9]|[1-3]\d|4[0-7])/48\b")


def terminal_pair() -> tuple[int, int]:
    """A pseudo-terminal 160 columns wide: (the side the test reads, the side the command writes to)."""
    import fcntl
    import pty
    import struct
    import termios

    screen, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    return screen, terminal


class Screen:
    """What a command wrote to its terminal, read on a thread so the command never blocks on a full pty."""

    def __init__(self, fd: int):
        self.fd, self.chunks = fd, []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the command's side closed (EIO)
                return
            if not chunk:
                return
            self.chunks.append(chunk)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")

    def close(self) -> None:
        self.thread.join(timeout=10)
        os.close(self.fd)
