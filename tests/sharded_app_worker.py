"""Run under torchrun by tests/test_sharded_app.py: the stock sharded generate, then the app's own `main`.

    torchrun --nproc-per-node 2 tests/sharded_app_worker.py KIND OUT_DIR REQUEST_JSON -- APP_ARGS...

Every rank writes its process id to OUT_DIR/pid_RANK, runs the stock `model.generate` of the request
(`backend.follow(..., lockstep=False)`: no capture, no app), and rank 0 writes every rank's ids to
OUT_DIR/stock.json. Then every rank runs `app.main(APP_ARGS)`, as `torchrun ... app.py APP_ARGS` would:
rank 0 serves the UI, the others follow its requests; idle, rank 0 sends a keep-alive every 0.5 s
(instead of every minute), and writes how many it sent to OUT_DIR/keep_alives after its app closed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # torchrun runs this file as a script

import torch.distributed as dist  # noqa: E402

import app  # noqa: E402
from webapp import app_run  # noqa: E402
from backends import sharded  # noqa: E402
from backends import BUILTIN_MODEL_DIR, load_backend  # noqa: E402
from backends.sharded import rank  # noqa: E402
from visualizer.settings import GenerationSettings  # noqa: E402

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
sharded.KEEP_ALIVE_S = 0.5  # keep-alives between the test's requests, not only after a minute idle
app.main(APP_ARGS)  # a follower leaves here (sys.exit) when rank 0 says goodbye
(OUT / "keep_alives").write_text(str(app_run.LEADER.keep_alives))
