"""Run under torchrun by tests/test_sharded.py: stock sharded generate, then the CLI's sharded record.

    torchrun --nproc-per-node 2 tests/sharded_worker.py KIND MODEL OUT_DIR

Every rank runs the stock `model.generate` (backends.sharded.follow) and then `python -m visualizer
record --parallel KIND` through the CLI's own entry point, as a user would. Rank 0 then writes
result.json: the stock ids of every rank and the sequence of the trace rank 0 wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # torchrun runs this file as a script

import torch.distributed as dist  # noqa: E402

from backends import load_backend  # noqa: E402
from backends.sharded import follow, rank  # noqa: E402
from cli.main import main  # noqa: E402
from prompts.demos import demo_prompt  # noqa: E402
from visualizer.settings import GenerationSettings  # noqa: E402
from visualizer.trace import Trace  # noqa: E402

KIND, MODEL, OUT = sys.argv[1], sys.argv[2], Path(sys.argv[3])
SEED, MAX_NEW, STEPS = 3, 320, 6  # few steps keep it short (the built-in model ends the story in one block)

backend = load_backend(MODEL, parallel=KIND)
stock = follow(backend, demo_prompt("story"), GenerationSettings(seed=SEED, max_new_tokens=MAX_NEW, max_denoising_steps=STEPS))
every_rank = [None] * dist.get_world_size()
dist.all_gather_object(every_rank, stock.tolist())

trace_file = OUT / "sharded.json"
status = main(["record", "--parallel", KIND, "--model", MODEL, "--demo", "story", "--seed", str(SEED),
               "--max-new-tokens", str(MAX_NEW), "--steps", str(STEPS), "--quiet", "--out", str(trace_file)])
if rank() == 0:
    trace = Trace.load(trace_file)
    result = {"status": status, "stock": every_rank, "recorded": trace.end.sequence.tolist(),
              "device": trace.model.device, "blocks": len(trace.blocks), "steps": len(trace.steps)}
    (OUT / "result.json").write_text(json.dumps(result))
