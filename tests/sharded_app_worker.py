"""Run under torchrun by tests/test_sharded_app.py: the stock sharded generate, then the app's own `main`.

    torchrun --nproc-per-node 2 -m tests.sharded_app_worker KIND OUT_DIR REQUEST_JSON -- APP_ARGS...

Every rank writes its process id to OUT_DIR/pid_RANK, runs the stock `model.generate` of the request
(`backend.follow(..., lockstep=False)`: no capture, no app), and rank 0 writes every rank's ids to
OUT_DIR/stock.json. Then every rank runs `app.main(APP_ARGS)`, as `torchrun ... app.py APP_ARGS` would:
rank 0 serves the UI, the others follow its requests; idle, rank 0 sends a keep-alive every 0.5 s
(instead of every minute), and writes how many it sent to OUT_DIR/keep_alives as the process ends.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch.distributed as dist

import app
from webapp import serve as web_serve
from webapp import app_run
from backends import sharded_server
from backends import BUILTIN_MODEL_DIR, load_backend
from backends.sharded import rank
from visualizer.settings import GenerationSettings

KIND, OUT, REQUEST = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
APP_ARGS = sys.argv[sys.argv.index("--") + 1:]

(OUT / f"pid_{rank()}").write_text(str(os.getpid()))
stock = load_backend(str(BUILTIN_MODEL_DIR), parallel=KIND).follow(
    REQUEST["prompt"], GenerationSettings(**REQUEST["settings"]), lockstep=False
)
every_rank = [None] * dist.get_world_size()
dist.all_gather_object(every_rank, stock.tolist())
if rank() == 0:
    (OUT / "stock.json").write_text(json.dumps(every_rank))
sharded_server.KEEP_ALIVE_S = 0.5  # keep-alives between the test's requests, not only after a minute idle
end_process = web_serve.end_process


def counted_end(status, *, backend=None):
    """Rank 0, once its app closed and said goodbye: how many keep-alives it sent, then the product's end."""
    (OUT / "keep_alives").write_text(str(app_run.LEADER.keep_alives))
    return end_process(status, backend=backend)


if rank() == 0:
    web_serve.end_process = counted_end

FAIL_ALONE = "Fail on rank 0 alone"  # a request whose third step raises on rank 0 only, in torchrun's first attempt
if rank() == 0 and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
    from transformers import DiffusionGemmaForBlockDiffusion

    from backends.sharded_server import Leader

    real_step, real_run, armed = DiffusionGemmaForBlockDiffusion._denoising_step, Leader.run_records, []

    def step(self, *args, **kwargs):
        if armed and len(armed) == 3:
            raise RuntimeError("out of memory on rank 0 alone (injected)")
        armed and armed.append(1)
        return real_step(self, *args, **kwargs)

    def run_records(self, prompt, settings, **kwargs):
        armed[:] = [1] if prompt == FAIL_ALONE else []
        yield from real_run(self, prompt, settings, **kwargs)

    DiffusionGemmaForBlockDiffusion._denoising_step, Leader.run_records = step, run_records
if "auto" in APP_ARGS:  # `--port auto`: rank 0 chooses a free port now, just before it serves, and keeps it across
    # torchrun's restarts (OUT_DIR/port, which the test waits for); chosen by the test, the port stayed free through
    # the model's loading and the stock run, long enough for another process to take it
    port_file = OUT / "port"
    if rank() == 0 and not port_file.exists():
        from tests.torchrun import free_port

        (OUT / "port.part").write_text(str(free_port()))
        (OUT / "port.part").rename(port_file)
    APP_ARGS[APP_ARGS.index("auto")] = port_file.read_text() if rank() == 0 else "0"  # a follower serves nothing
app.main(APP_ARGS)  # every rank leaves here (sys.exit): a follower when rank 0 says goodbye
