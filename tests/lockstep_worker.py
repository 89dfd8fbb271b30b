"""Run under torchrun by tests/test_sharded.py: rank 0 leads requests, the followers serve them.

    torchrun --nproc-per-node 2 -m tests.lockstep_worker KIND MODEL OUT_DIR

As the app's sharded server does: rank 0 holds a `Leader`, the followers sit in `follow_requests`.
Rank 0 runs six requests (a whole run, a run stopped after its first step, a run whose recording
fails on rank 0 alone at its third step, a run whose canvas rank 1 alone changes after its first step,
an empty prompt refused before any collective, the first run again) and then says goodbye. Rank 0
writes result.json; a follower writes its exit status.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from backends import BackendError, capture, load_backend
from backends.process_group import end_process
from backends.sharded import rank
from backends.sharded_server import Leader, follow_requests
from prompts.demos import demo_prompt
from visualizer.records import StepRecord
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

KIND, MODEL, OUT = sys.argv[1], sys.argv[2], Path(sys.argv[3])
DIVERGING = demo_prompt("haiku")  # the request whose canvas rank 1 changes
backend = load_backend(MODEL, parallel=KIND)


def diverging_follow(follow):
    """`backend.follow` where, for DIVERGING only, every step's output canvas gets its first token
    changed on this rank: the ranks then start the next step from different canvases, as when their
    replicated layers compute different numbers."""

    def follow_request(prompt, settings, **kwargs):
        if prompt != DIVERGING:
            return follow(prompt, settings, **kwargs)
        model_class = type(backend.model)
        real_step = model_class._denoising_step

        def step(self, *args, **step_kwargs):
            canvas, *rest = real_step(self, *args, **step_kwargs)
            canvas = canvas.clone()
            canvas[..., 0] += 1
            return (canvas, *rest)

        model_class._denoising_step = step
        try:
            return follow(prompt, settings, **kwargs)
        finally:
            model_class._denoising_step = real_step

    return follow_request


if rank() != 0:
    backend.follow = diverging_follow(backend.follow)
    (OUT / f"follower_{rank()}.json").write_text(json.dumps(follow_requests(backend)))
    sys.exit(end_process(0, backend=backend))

SETTINGS = GenerationSettings(seed=5, max_new_tokens=64, max_denoising_steps=12)
leader = Leader(backend, keep_alive_s=0)
model_errors = []  # what each of rank 0's runs returned: the exception that ended the model's run, or None


def noting_model_errors(generate_batches):
    def generate(*args, **kwargs):
        returned = yield from generate_batches(*args, **kwargs)
        model_errors.append(returned)
        return returned

    return generate


backend.generate_batches = noting_model_errors(backend.generate_batches)


def lead(prompt: str, *, stop_after_steps: int | None = None):
    trace, stop = Trace(model=backend.info, prompt=prompt), threading.Event()
    for batch in leader.run_records(prompt, SETTINGS, trace=trace, stop=stop):
        for record in batch:
            if stop_after_steps is not None and isinstance(record, StepRecord) and record.step + 1 >= stop_after_steps:
                stop.set()  # as the app's Stop button does, from outside the generation
    return trace


def failing_copy(at: int):
    """capture._to_host failing at its `at`-th call, on this rank only (rank 0 records, the others do not)."""
    real, calls = capture._to_host, []

    def to_host(tensors):
        calls.append(1)
        if len(calls) == at:
            raise RuntimeError("recording failed on rank 0 (injected)")
        return real(tensors)

    return to_host


first = lead(demo_prompt("story"))
stopped = lead(demo_prompt("story"), stop_after_steps=1)
real_copy, capture._to_host = capture._to_host, failing_copy(at=3)
try:
    failed = lead(demo_prompt("story"))
finally:
    capture._to_host = real_copy
failed_in_step, problem_after_failure = type(model_errors[-1]).__name__, leader.problem()
diverged = lead(DIVERGING)
diverged_failure, problem_after_divergence = type(model_errors[-1]).__name__, leader.problem()
try:
    lead("   ")
    refused = None
except BackendError as exc:
    refused = str(exc)
again = lead(demo_prompt("story"))
said_goodbye = leader.close()
(OUT / "result.json").write_text(json.dumps({
    "first": [first.end.finish_reason, len(first.steps), first.end.sequence.tolist()],
    "stopped": [stopped.end.finish_reason, len(stopped.steps)],
    "failed": [failed.end.finish_reason, failed.end.error, len(failed.steps), failed_in_step],
    "problem_after_failure": problem_after_failure,
    "diverged": [diverged.end.finish_reason, diverged.end.error, len(diverged.steps), diverged_failure],
    "problem_after_divergence": problem_after_divergence,
    "refused": refused,
    "again": [again.end.finish_reason, len(again.steps), again.end.sequence.tolist()],
    "said_goodbye": said_goodbye,
}))
sys.exit(end_process(0, backend=backend))
