"""`record --parallel expert` under torchrun with rank 1 killed mid-run: how soon rank 0 has its trace
on disk, and what the trace keeps.

    python -m benchmarks.bench_dead_rank_record                   # NCCL, 2 GPUs (cuda when available)
    python -m benchmarks.bench_dead_rank_record --device cpu      # gloo, 2 CPU processes

Starts torchrun itself (2 workers, the built-in model, a long run), waits for rank 0's progress line of
step `--kill-at`, SIGKILLs rank 1 and prints one JSON line: seconds from the kill to the trace on disk
and to torchrun's exit, the trace's steps and finish, and torchrun's exit status. With NCCL, rank 0
waits inside rank 1's collective for ever; torchrun's SIGTERM abandons the run (`backends.bridge.Stop`),
which then ends `ABANDON_GRACE_S` later with its steps. Before that, torchrun's SIGKILL 30 s after its
SIGTERM lost the trace (docs/sharded.md).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rank_pid(launcher: int, rank: int) -> int | None:
    """torchrun's worker of `rank` (read from /proc: no psutil needed on the GPU machine)."""
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            env = dict(v.split(b"=", 1) for v in (entry / "environ").read_bytes().split(b"\0") if b"=" in v)
            if env.get(b"RANK") == str(rank).encode() and env.get(b"TORCHELASTIC_RUN_ID") and _descends(int(entry.name), launcher):
                return int(entry.name)
        except OSError:
            continue
    return None


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            pid = int(f.read().rpartition(")")[2].split()[1])
    return False


def _read_all(fd: int, chunks: list) -> None:
    """Everything written to the pty's other side, until it closes."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the command's side closed (EIO)
            return
        if not chunk:
            return
        chunks.append(chunk)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--kill-at", type=int, default=5, help="rank 0's step after which rank 1 is killed")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="dead-rank-record-"))
    out, log_path = folder / "run.json", folder / "torchrun.log"
    device = ["--device", args.device] if args.device else []
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    # The command writes to a terminal (a pty), so its progress is the per-step bar ("5/64"); piped, it says only
    # each block's end. What it writes is read on a thread and kept in the log file.
    screen, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a width for the bar
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "visualizer",
         "record", "--parallel", "expert", "--demo", "story", "--seed", "1", "--max-new-tokens", "1024",
         "--steps", "64", "--entropy-bound", "0.0001", *device, "--out", str(out)],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
    os.close(terminal)
    chunks: list[bytes] = []
    reader = threading.Thread(target=_read_all, args=(screen, chunks), daemon=True)
    reader.start()
    try:
        while not any(int(n) >= args.kill_at for n in re.findall(rb"\b(\d+)/64\b", b"".join(chunks))):
            if proc.poll() is not None:
                print(b"".join(chunks).decode(errors="replace")[-3000:], file=sys.stderr)
                return 1
            time.sleep(0.02)
        killed = time.monotonic()
        os.kill(rank_pid(proc.pid, 1), signal.SIGKILL)
        written = None
        while proc.poll() is None:
            if written is None and out.exists():
                written = time.monotonic()
            time.sleep(0.02)
        ended = time.monotonic()
        if written is None and out.exists():
            written = ended
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(timeout=10)
        os.close(screen)
        log_path.write_bytes(b"".join(chunks))
    said = log_path.read_text(errors="replace")
    row = {"device": args.device or "default", "kill_after_step": args.kill_at, "torchrun_status": proc.returncode,
           "trace_written_after_kill_s": None if written is None else round(written - killed, 2),
           "torchrun_ended_after_kill_s": round(ended - killed, 2), "terminate_called": "terminate called" in said}
    if out.exists():
        from visualizer.trace import Trace

        trace = Trace.load(out)
        row |= {"steps_kept": len(trace.steps), "finish": trace.end.finish_reason if trace.end else None,
                "error": trace.end.error if trace.end else None}
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
