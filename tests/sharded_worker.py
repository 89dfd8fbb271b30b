"""Run under torchrun by tests/test_sharded.py: stock sharded generate, then the CLI's sharded record.

    torchrun --nproc-per-node 2 -m tests.sharded_worker KIND[,KIND...] MODEL OUT_DIR

For each KIND in turn (one launch for all: torchrun, the imports and the group are the slow part), every
rank loads the model split that way, runs the stock `model.generate` (`backend.follow(..., lockstep=False)`)
and then `python -m visualizer record --parallel KIND` through the CLI's own entry point, as a user would.
Rank 0 then writes result.json, by kind: the stock ids of every rank and the sequence of the trace rank 0 wrote.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import torch
import torch._inductor.config as inductor
import torch.distributed as dist

from backends import load_backend
from backends.process_group import end_process
from backends.sharded import rank
from cli.main import main
from prompts.demos import demo_prompt
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace

KINDS, MODEL, OUT = sys.argv[1].split(","), sys.argv[2], Path(sys.argv[3])
SEED, MAX_NEW, STEPS = 3, 320, 6  # few steps keep it short (the built-in model ends the story in one block)
SETTINGS = GenerationSettings(seed=SEED, max_new_tokens=MAX_NEW, max_denoising_steps=STEPS)


def wrong_products(model) -> list[str]:
    """The text models' Linear layers whose hooked forward differs from the product with the whole weight.

    The tie puts the decoder's weights into the encoder's modules, so a hook that does not match its
    weight (a split weight's hook on a whole one) computes a wrong product; Gemma's norms after each
    block can hide that from the generated tokens, so every layer is checked on its own."""
    from torch.distributed.tensor import DTensor, Shard

    wrong = []
    torch.manual_seed(0)  # the same inputs on every rank
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or not name.startswith(("model.decoder", "model.encoder.language_model")):
            continue
        weight = module.weight
        whole = weight.full_tensor() if isinstance(weight, DTensor) else weight  # a collective: every rank, same order
        x = torch.randn(1, 3, whole.shape[1])
        expected = torch.nn.functional.linear(x, whole)
        split = weight.placements[0] if isinstance(weight, DTensor) else None
        with torch.no_grad():
            if split == Shard(1):  # rowwise: this rank's slice of the inputs, the outputs summed over the ranks
                got = module(x.chunk(dist.get_world_size(), -1)[rank()])
            else:
                got = module(x)
        if split == Shard(0) and got.shape != expected.shape:  # colwise: this rank's slice of the outputs
            expected = expected.chunk(dist.get_world_size(), -1)[rank()]
        if got.shape != expected.shape or not torch.allclose(got, expected, rtol=1e-4, atol=1e-5):
            wrong.append(name)
    return wrong


@functools.cache
def whole_run():
    """The same run on one whole model in this process: no collectives, so rank 0 alone may run it."""
    from backends.run import record_trace

    return record_trace(load_backend(MODEL), demo_prompt("story"), SETTINGS)


def run_kind(kind: str) -> tuple[dict | None, object]:
    """Stock and recorded runs split `kind`-wise; rank 0's result, None elsewhere. Returns the backend too."""
    backend = load_backend(MODEL, parallel=kind)
    wrong = wrong_products(backend.model)
    stock = backend.follow(demo_prompt("story"), SETTINGS, lockstep=False)  # the plain stock generate on every rank
    every_rank = [None] * dist.get_world_size()
    dist.all_gather_object(every_rank, stock.tolist())
    reductions_filtered = [None] * dist.get_world_size()  # set by the load (sharded.compile_alike), on every rank
    dist.all_gather_object(reductions_filtered, inductor.test_configs.force_filter_reduction_configs)

    trace_file = OUT / f"sharded-{kind}.json"
    status = main(["record", "--parallel", kind, "--model", MODEL, "--demo", "story", "--seed", str(SEED),
                   "--max-new-tokens", str(MAX_NEW), "--steps", str(STEPS), "--quiet", "--out", str(trace_file)])
    if rank() != 0:
        return None, backend
    trace = Trace.load(trace_file)
    first_sharded, first_whole = trace.steps[0].entropy_nats, whole_run().steps[0].entropy_nats
    return {"status": status, "wrong_products": wrong, "stock": every_rank, "reductions_filtered": reductions_filtered,
            "recorded": trace.end.sequence.tolist(),
            "device": trace.model.device, "blocks": len(trace.blocks), "steps": len(trace.steps),
            "first_step_entropy_gap": float(abs(first_sharded.astype("float64") - first_whole).max())}, backend


results, backend = {}, None
for kind in KINDS:
    if backend is not None:
        backend.close()  # the last kind's model: its generation thread ends before the next split loads
    results[kind], backend = run_kind(kind)
if rank() == 0:
    (OUT / "result.json").write_text(json.dumps(results))
sys.exit(end_process(0, backend=backend))  # every rank ends its group in order (backends/process_group.py)
