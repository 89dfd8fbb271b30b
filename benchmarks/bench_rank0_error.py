"""An error on rank 0 alone in a sharded server, then a good run: how long until the server serves again.

    torchrun --standalone --nproc-per-node 2 --max-restarts 1 -m benchmarks.bench_rank0_error --out DIR
    torchrun --standalone --nproc-per-node 2 --max-restarts 1 -m benchmarks.bench_rank0_error --out DIR --device cpu

What the app does under torchrun, without the page. Attempt 0: rank 0's `Leader` runs a request whose third step
raises on rank 0 alone (as running out of GPU memory there would), so the followers wait in a collective rank 0
never joins. The run ends with the error and, torchrun having a restart left, `Leader.restarting` is set; rank 0
then exits 1, as the app does (`Leader.own_exits`, without its 10 s for the open tabs). torchrun
restarts every rank. Attempt 1: rank 0 leads a good request. Rank 0 writes DIR/attempt0.json, then prints one JSON
line: the error, the steps it kept, and the seconds from the error to the restarted server's start and to the end
of its good run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from backends import default_model, load_backend
from backends.process_group import end_process
from backends.sharded import is_follower
from backends.sharded_server import Leader, follow_requests
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

SETTINGS = GenerationSettings(seed=0, max_new_tokens=64, max_denoising_steps=48)


def lead(leader: Leader, prompt: str) -> Trace:
    trace = Trace(model=leader.backend.info, prompt=prompt)
    for _ in leader.run_records(prompt, SETTINGS, trace=trace, stop=threading.Event()):
        pass
    return trace


def fail_on_rank_0_at_the_third_step() -> None:
    from transformers import DiffusionGemmaForBlockDiffusion as Model

    real, calls = Model._denoising_step, []

    def step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("out of memory on rank 0 alone (injected)")
        return real(self, *args, **kwargs)

    Model._denoising_step = step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="a folder every attempt sees")
    parser.add_argument("--device", default=None, help="default: cuda when available")
    args = parser.parse_args(argv)
    out, attempt = Path(args.out), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    backend = load_backend(default_model(), device=args.device, parallel="expert")
    if is_follower():
        return end_process(follow_requests(backend), backend=backend)
    leader = Leader(backend, keep_alive_s=0)
    if attempt == 0:
        fail_on_rank_0_at_the_third_step()
        failed = lead(leader, "Why is the sky blue?")
        (out / "attempt0.json").write_text(json.dumps({
            "error": failed.end.error, "steps_kept": len(failed.steps), "failed_at": time.time(),
            "restarting": leader.restarting.is_set()}))
        leader.close()
        return end_process(1, backend=backend)  # as the app: rank 0 exits 1 and torchrun restarts every rank
    good = lead(leader, "Why is the sky blue?")
    first = json.loads((out / "attempt0.json").read_text())
    print(json.dumps({
        "device": backend.info.device, "error": first["error"], "steps_kept": first["steps_kept"],
        "restarting": first["restarting"], "restarted_after_error_s": round(started - first["failed_at"], 2),
        "good_run": good.end.finish_reason, "good_run_steps": len(good.steps),
        "served_after_error_s": round(time.time() - first["failed_at"], 2)}), flush=True)
    leader.close()
    return end_process(0, backend=backend)


if __name__ == "__main__":
    sys.exit(main())
