"""A follower killed mid-run on a sharded server: how soon rank 0's run ends, and with what message.

    torchrun --nproc-per-node 2 -m benchmarks.bench_dead_rank                 # NCCL on 2 GPUs
    torchrun --nproc-per-node 2 -m benchmarks.bench_dead_rank --device cpu    # gloo

What the app does under torchrun (app.py `--parallel`), without the web page: rank 0 holds a `Leader`
and runs requests on the backend's generation thread while its main thread consumes the records; the
other rank follows (`follow_requests`). Rank 0 runs one whole request, then a second one, and after
`--kill-after` records it `kill -9`s rank 1. rank 0's SIGTERM handler is the app's (`Leader.end_on_sigterm`,
minus the page): torchrun sends SIGTERM once it sees rank 1 gone.

Prints a timeline on rank 0's stderr (SIGTERM, the lost rank named, and every thread's stack each 8 s
while the run has not ended), then one JSON line if the run ends: how many seconds after the kill
SIGTERM came and the run ended, its finish and error, the steps it kept.

Measured (BENCHMARKS.md, "A rank killed mid-run"): with gloo the run ends 0.03-0.05 s after the kill,
with the dead rank's name (its socket closes, the all-reduce fails). With NCCL on 2 H200s nothing fails:
SIGTERM came 0.23-0.33 s after the kill and named rank 1 at once, but the run stayed inside a host sync
waiting for a collective that never completes, and torch's `_abort_process_group`, called from the
main thread, hung as well (with TORCH_NCCL_ASYNC_ERROR_HANDLING 3 and 0), until torchrun's SIGKILL
30 s later. So under NCCL the app names the dead rank through its health tick, not the run's end.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time

from backends import default_model, load_backend
from visualizer.settings import GenerationSettings
from backends.sharded import is_follower
from backends.sharded_server import Leader, follow_requests
from visualizer.trace import Trace


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default=None, help="default: cuda when available")
    parser.add_argument("--parallel", default="expert")
    parser.add_argument("--kill-after", type=int, default=5, help="records of the second run before the kill")
    args = parser.parse_args(argv)
    backend = load_backend(default_model(), device=args.device, parallel=args.parallel)
    if is_follower():
        return follow_requests(backend)
    leader = Leader(backend, keep_alive_s=0)
    settings = GenerationSettings(seed=0, max_new_tokens=64, max_denoising_steps=48)
    timeline: dict[str, float] = {}

    def say(line: str) -> None:  # a timeline on stderr: where a run that never ends got stuck
        print(f"[rank 0 {time.monotonic() - timeline.get('kill', 0):.2f} s after the kill] {line}", file=sys.stderr, flush=True)

    def on_sigterm(signum, frame):  # the app's (`Leader.end_on_sigterm`), timed, without a page to close
        timeline["sigterm"] = time.monotonic()
        say("SIGTERM")
        say(f"ended the runs: {leader.end_on_sigterm()}")

    signal.signal(signal.SIGTERM, on_sigterm)
    first = Trace(model=backend.info, prompt="Why is the sky blue?")
    for _ in leader.run_records(first.prompt, settings, trace=first, stop=threading.Event()):
        pass
    second = Trace(model=backend.info, prompt="Write a haiku about rain.")
    seen = 0
    for batch in leader.run_records(second.prompt, settings, trace=second, stop=threading.Event()):
        seen += len(batch)
        if seen >= args.kill_after and "kill" not in timeline:
            timeline["kill"] = time.monotonic()
            os.kill(leader.pids[1], signal.SIGKILL)
            faulthandler.dump_traceback_later(8, repeat=True)  # every thread's stack while the run has not ended
    timeline["ended"] = time.monotonic()
    faulthandler.cancel_dump_traceback_later()
    end = second.end

    def after_kill(event: str) -> float | None:
        return round(timeline[event] - timeline["kill"], 2) if event in timeline else None

    row = {
        "device": backend.info.device, "parallel": args.parallel,
        "first_run": first.end.finish_reason,
        "sigterm_after_kill_s": after_kill("sigterm"), "run_ended_after_kill_s": after_kill("ended"),
        "finish": end.finish_reason, "error": end.error,
        "steps_kept": len(second.steps),
        "threads_left": [t.name for t in threading.enumerate() if t is not threading.main_thread()],
    }
    print(json.dumps(row), flush=True)
    os._exit(0)  # the process group is aborted or broken: nothing more to say goodbye to


if __name__ == "__main__":
    sys.exit(main())
