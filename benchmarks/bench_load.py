"""Load on the app: N gradio_client clients x M runs each on the built-in model, at once.

Starts `python app.py --hosted` as its own process (so its memory is measured alone), records a
solo run of every distinct request first (the reference), then lets N clients each send M runs
at the same moment.  Reports, all from this one run:

- mismatches: runs whose final text differs from the solo run of the same request (cross-talk);
- queue positions seen by the clients while they waited (the model runs one request at a time);
- p50 / p95 latency from submit to the last frame;
- the server's RSS before the load, after it, and after a minute idle with every client gone
  (sessions are released on unload; see sessions.py), and the session folders left on disk;
- while the load runs, how long the app takes to refuse requests for a folder path or an unknown
  model id (they are checked before the model queue, so they never wait behind the runs).

    python -m benchmarks.bench_load                          # 16 clients x 3 runs
    python -m benchmarks.bench_load --clients 4 --runs 2 --idle 10
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from gradio_client import Client
from gradio_client.utils import Status

ROOT = Path(__file__).resolve().parent.parent
from prompts.demos import DEMOS

BUILTIN_LABEL = "Built-in small model (trained here, not the 26B one)"


@dataclass
class LoadResult:
    runs: int = 0
    mismatches: int = 0
    failures: list[str] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    queue_ranks: set[int] = field(default_factory=set)
    refusals_s: list[float] = field(default_factory=list)  # hostile requests, each refused (never run)
    rss_mb: dict[str, float] = field(default_factory=dict)
    session_folders: dict[str, int] = field(default_factory=dict)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")

    def report(self) -> str:
        return "\n".join([
            f"runs {self.runs}, mismatches {self.mismatches}, failures {len(self.failures)}",
            f"queue positions seen: {sorted(self.queue_ranks) or 'none'}",
            f"latency p50 {self.percentile(0.5):.2f} s, p95 {self.percentile(0.95):.2f} s, max {max(self.latencies_s, default=0):.2f} s",
            f"hostile requests during the load: {len(self.refusals_s)} refused, slowest in {max(self.refusals_s, default=0):.2f} s",
            "server RSS (MB): " + ", ".join(f"{k} {v:.0f}" for k, v in self.rss_mb.items()),
            "session folders on disk: " + ", ".join(f"{k} {v}" for k, v in self.session_folders.items()),
        ])


def requests(count: int, model: str, steps: int) -> list[tuple]:
    """`count` distinct generate requests: demo prompts x seeds, the app's default knobs."""
    out = []
    for i in range(count):
        prompt = DEMOS[i % len(DEMOS)].prompt
        out.append((prompt, model, 256, steps, 0.1, 0.4, 0.8, i // len(DEMOS), "entropy-bound", 1.0))
    return out


def final_text(client, job) -> str:
    """The committed text of a run once its stream ended, from the chained `/run_message` event."""
    job.result()
    text, message = client.predict(api_name="/run_message")
    if message:
        raise RuntimeError(message)
    return text


def run_load(url: str, clients: int, runs: int, *, model: str = BUILTIN_LABEL, steps: int = 48,
             distinct: int = 8, server_pid: int | None = None, idle_s: float = 60.0, tmp: Path | None = None) -> LoadResult:
    """The benchmark against an app already serving at `url` (the CI test calls this)."""
    result = LoadResult()
    process = psutil.Process(server_pid) if server_pid else None

    def rss(label):
        if process is not None:
            result.rss_mb[label] = process.memory_info().rss / 1e6
        if tmp is not None:
            result.session_folders[label] = len(list(tmp.glob("dv-session-*")))

    batch = requests(distinct, model, steps)
    solo = Client(url, verbose=False)
    reference = [final_text(solo, solo.submit(*request, api_name="/generate")) for request in batch]
    solo.close()
    rss("before")

    lock = threading.Lock()

    def visitor(k: int):
        client = Client(url, verbose=False)
        start.wait()
        for r in range(runs):
            index = (k * runs + r) % len(batch)
            began = time.perf_counter()
            job = client.submit(*batch[index], api_name="/generate")
            while not job.done():
                status = job.status()
                if status.code == Status.IN_QUEUE and status.rank is not None:
                    with lock:
                        result.queue_ranks.add(status.rank)
                time.sleep(0.05)
            try:
                text = final_text(client, job)
            except Exception as exc:  # counted and reported, never hidden
                with lock:
                    result.failures.append(f"client {k} run {r}: {exc}")
                continue
            with lock:
                result.runs += 1
                result.latencies_s.append(time.perf_counter() - began)
                result.mismatches += text != reference[index]
        client.close()  # ends the session: the server releases its run and files

    def hostile():
        client = Client(url, verbose=False)
        start.wait()
        time.sleep(1.0)  # the queue is full by now
        for model in ("/etc", "../../secrets", "someone/no-such-model", str(ROOT)):
            began = time.perf_counter()
            try:
                client.submit("hi", model, *batch[0][2:], api_name="/generate").result()
            except Exception:  # refused: by the validator (422) or by the picker's own check (400)
                with lock:
                    result.refusals_s.append(time.perf_counter() - began)
            else:
                with lock:
                    result.failures.append(f"hostile model {model!r} was run")
        client.close()

    start = threading.Barrier(clients + 1)
    threads = [threading.Thread(target=visitor, args=(k,)) for k in range(clients)] + [threading.Thread(target=hostile)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rss("after load")
    time.sleep(idle_s)
    rss(f"after {idle_s:.0f} s idle")
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=48, help="max denoising steps per block")
    parser.add_argument("--distinct", type=int, default=8, help="distinct requests (demo prompt x seed)")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds idle before the last RSS reading")
    args = parser.parse_args(argv)

    port, tmp = free_port(), Path(tempfile.mkdtemp(prefix="bench-load-"))
    env = {**os.environ, "TMPDIR": str(tmp), "GRADIO_TEMP_DIR": str(tmp / "gradio")}
    server = subprocess.Popen([sys.executable, "app.py", "--hosted", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(300):
            try:
                Client(url, verbose=False).close()
                break
            except Exception:
                time.sleep(0.5)
        began = time.perf_counter()
        result = run_load(url, args.clients, args.runs, steps=args.steps, distinct=args.distinct, server_pid=server.pid, idle_s=args.idle, tmp=tmp)
        print(f"{args.clients} clients x {args.runs} runs on the built-in model ({time.perf_counter() - began:.0f} s in all)")
        print(result.report())
        for failure in result.failures[:5]:
            print("  failure:", failure)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
