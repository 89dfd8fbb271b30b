"""Run under torchrun by tests/test_sharded.py: rank 0 leads requests, the followers serve them.

    torchrun --nproc-per-node 2 tests/lockstep_worker.py KIND MODEL OUT_DIR

Rank 0 announces four requests (a whole run, a run stopped after its first step, an empty prompt
refused before any collective, the first run again) and then None; the followers run each in
lockstep (backends.sharded.serve). Rank 0 writes result.json; a follower writes how many it served.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # torchrun runs this file as a script

from backends import BackendError, load_backend, record_trace  # noqa: E402
from backends.sharded import announce, rank, serve  # noqa: E402
from prompts.demos import demo_prompt  # noqa: E402
from visualizer.records import StepRecord  # noqa: E402
from visualizer.settings import GenerationSettings  # noqa: E402

KIND, MODEL, OUT = sys.argv[1], sys.argv[2], Path(sys.argv[3])
backend = load_backend(MODEL, parallel=KIND)
if rank() != 0:
    (OUT / f"served_{rank()}.json").write_text(json.dumps(serve(backend)))
    sys.exit(0)

SETTINGS = GenerationSettings(seed=5, max_new_tokens=64, max_denoising_steps=12)


def lead(prompt: str, *, stop_after_steps: int | None = None):
    announce((prompt, SETTINGS))
    stop = threading.Event()

    def count(record):
        if stop_after_steps is not None and isinstance(record, StepRecord) and record.step + 1 >= stop_after_steps:
            stop.set()  # as the app's Stop button does, from outside the generation

    return record_trace(backend, prompt, SETTINGS, stop=stop, on_record=count)


first = lead(demo_prompt("story"))
stopped = lead(demo_prompt("story"), stop_after_steps=1)
try:
    lead("   ")
    refused = None
except BackendError as exc:
    refused = str(exc)
again = lead(demo_prompt("story"))
announce(None)
(OUT / "result.json").write_text(json.dumps({
    "first": [first.end.finish_reason, len(first.steps), first.end.sequence.tolist()],
    "stopped": [stopped.end.finish_reason, len(stopped.steps)],
    "refused": refused,
    "again": [again.end.finish_reason, len(again.steps), again.end.sequence.tolist()],
}))
