"""Hand-made traces for tests: accepted masks written as strings, everything else derived.

    trace = fake_trace(["1000", "1100", "0110"], canvas_length=4)   # one block, three steps

Ids: an accepted position p shows token 10 + p (or `changes[(step, p)]` to model a resample
that changed), noise positions hold token 3, the argmax is always 10 + p, the committed block is
the last argmax.  `eos_at` puts an EOS (id 1) at that position of the committed block, pad after.
"""

from __future__ import annotations

import numpy as np

from visualizer.records import BlockRecord, ModelInfo, RunEnd, RunStart, StepRecord
from visualizer.samplers import BUDGET_ENTROPY_BOUND, AcceptRule
from visualizer.trace import Trace

NOISE_ID, EOS_ID, PAD_ID = 3, 1, 0
FAKE_RULE = AcceptRule(renoises=True, last_step_samples=True, budget=BUDGET_ENTROPY_BOUND)  # the fake backend's sampler


def fake_model(canvas_length: int) -> ModelInfo:
    return ModelInfo(
        name="fake", source="tests", backend="fake", device="cpu", dtype="float32", canvas_length=canvas_length,
        vocab_size=1000, eos_token_ids=(EOS_ID,), pad_token_id=PAD_ID, max_context=4096,
    )


def fake_trace(*blocks: list[str], canvas_length: int, changes=None, eos_at=None, finished=True, entropy=None) -> Trace:
    changes = changes or {}
    trace = Trace(model=fake_model(canvas_length), prompt="test prompt")
    pieces = {i: f"t{i}" for i in range(10, 10 + canvas_length)} | {EOS_ID: "<eos>", PAD_ID: "<pad>", 2: "<bos>", 5: "x", NOISE_ID: "<noise>"}
    pieces |= {tok: f"c{tok}" for tok in changes.values()}
    trace.append(RunStart(prompt_ids=np.array([2, 5], np.int32), settings={"seed": 0, "max_new_tokens": canvas_length * len(blocks)},
                          max_blocks=len(blocks), sampler_rule=FAKE_RULE.to_dict(), new_pieces=pieces))
    sequence = []
    for b, masks in enumerate(blocks):
        for step, mask in enumerate(masks):
            accepted = np.array([c == "1" for c in mask])
            canvas = np.where(accepted, 10 + np.arange(canvas_length), NOISE_ID).astype(np.int32)
            for (s, p), tok in changes.items():
                if s == step and accepted[p]:
                    canvas[p] = tok
            ent = np.full(canvas_length, 0.5, np.float32) if entropy is None else np.asarray(entropy[step], np.float32)
            trace.append(StepRecord(
                block=b, step=step, steps_remaining=len(masks) - step, accepted=accepted, canvas=canvas,
                argmax=(10 + np.arange(canvas_length)).astype(np.int32), entropy_nats=ent, wall_time_s=0.01,
            ))
        tokens = (10 + np.arange(canvas_length)).astype(np.int32)
        eos = None
        if eos_at is not None and b == len(blocks) - 1:
            tokens[eos_at] = EOS_ID
            tokens[eos_at + 1:] = PAD_ID
            eos = eos_at
        trace.append(BlockRecord(block=b, tokens=tokens, eos_position=eos, stop_reason="converged", steps_used=len(masks)))
        sequence.append(tokens)
    if finished:
        seq = np.concatenate(sequence)
        trace.append(RunEnd(finish_reason="eos" if eos_at is not None else "length", sequence=seq, text="text", wall_time_s=0.1))
    return trace
