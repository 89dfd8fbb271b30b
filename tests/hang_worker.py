"""Run under torchrun by tests/test_torchrun_exit.py: `record --parallel expert` where rank 1 stops
answering in the middle of the run.

    torchrun --nproc-per-node 2 -m tests.hang_worker OUT_FILE

Rank 1 sleeps before its fourth denoising step, so it never reaches that step's all-reduce and rank 0
waits inside it for good: what a rank whose NCCL peer died sees (gloo would fail the collective at once
when a peer's process ends; a peer that is alive but silent holds it for the group's 2-hour timeout).
The test then sends rank 0 torchrun's SIGTERM.
"""

from __future__ import annotations

import os
import sys
import time

from transformers import DiffusionGemmaForBlockDiffusion

from backends import BUILTIN_MODEL_DIR
from backends.sharded import rank
from cli.main import run_as_process

if rank() == 1:
    real_step, steps = DiffusionGemmaForBlockDiffusion._denoising_step, []

    def silent_from_the_fourth_step(self, *args, **kwargs):
        steps.append(1)
        if len(steps) == 4:
            time.sleep(3600)
        out = real_step(self, *args, **kwargs)
        # the test's cue (the record's own progress says only each block's end when piped)
        print(f"step {len(steps)}: done on rank {os.environ.get('RANK')}", file=sys.stderr, flush=True)
        return out

    DiffusionGemmaForBlockDiffusion._denoising_step = silent_from_the_fourth_step

sys.exit(run_as_process(["record", "--parallel", "expert", "--model", str(BUILTIN_MODEL_DIR), "--demo", "story",
                         "--seed", "3", "--max-new-tokens", "256", "--steps", "48", "--out", sys.argv[1]]))
