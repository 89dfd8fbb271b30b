"""docs/lab.md's diffusers experiment: forbid the first-committed answer token, on each sampler, and say what the
answer becomes.

    python tools/lab_forbid_answer.py --seeds 0 1 2 3            # the built-in model, CPU, the three diffusers samplers

For each sampler and seed: record the prompt, find the answer's first-committed token (the first accepted of the
digit tokens right after the first "="), fork at the step it was accepted with `forbid POS=TOKEN`, and print a
Markdown row: the parent's answer, what was forbidden where and when, what the branch put there, and its answer. The same as, for one of them:

    python -m visualizer record --prompt "What is 18 plus 24?" --sampler block-refinement --seed 0 --out run.json
    python -m visualizer fork run.json --at 1:STEP --forbid POS=TOKEN --out branch.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone, as tools/ are

from backends import BUILTIN_MODEL_DIR, BackendError  # noqa: E402
from backends.diffusers_backend import DiffusersBackend  # noqa: E402
from backends.interventions import fork_trace  # noqa: E402
from backends.run import record_trace  # noqa: E402
from visualizer.interventions import parse_spec  # noqa: E402
from visualizer.metrics.commits import block_commits  # noqa: E402
from visualizer.settings import GenerationSettings  # noqa: E402

SAMPLERS = ("entropy-bound", "discrete-ddim", "block-refinement")


def answer(backend, trace) -> str:
    return backend.tokenizer.decode(trace.end.sequence, skip_special_tokens=True).strip().replace("\n", " ")


def first_answer_token(backend, trace) -> tuple[int, int, str] | None:
    """(position, 0-based commit step, text) of the answer's first-committed token: of the digit tokens right after
    the first "=" of block 1 (the sum the model writes, not the operands it repeats); None when there is none."""
    commits = block_commits(trace, 0)
    tokens = trace.blocks[0].tokens
    pieces = [backend.tokenizer.decode([int(t)]) for t in tokens[:commits.content_length]]
    equals = next((p for p, piece in enumerate(pieces) if "=" in piece), None)
    if equals is None:
        return None
    answer_at = []
    for p in range(equals + 1, len(pieces)):
        if pieces[p].strip().isdigit():
            answer_at.append(p)
        elif answer_at or pieces[p].strip():
            break  # the number ended, or something else came first
    if not answer_at:
        return None
    position = min(answer_at, key=lambda p: (commits.commit_step[p], p))
    return position, int(commits.commit_step[position]), pieces[position]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prompt", default="What is 18 plus 24?")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    p.add_argument("--steps", type=int, help="denoising steps a block (default: the model's)")
    args = p.parse_args()
    backend = DiffusersBackend(str(BUILTIN_MODEL_DIR), device="cpu")
    print("| sampler | seed | parent's answer | forbidden (position, step) | branch's token there | branch's answer |")
    print("|---|---|---|---|---|---|")
    for sampler in args.samplers:
        for seed in args.seeds:
            parent = record_trace(backend, args.prompt, GenerationSettings(seed=seed, sampler=sampler,
                                                                                 max_denoising_steps=args.steps))
            found = first_answer_token(backend, parent)
            if found is None:
                print(f"| {sampler} | {seed} | {answer(backend, parent)} | (no number after an =) | - | - |")
                continue
            position, step, text = found
            try:
                branch = fork_trace(backend, parent, "0" * 64, block=1, step=min(step + 1, len(parent.block_steps(0))),
                                    interventions=(parse_spec(f"forbid {position}={text}"),))
            except BackendError as exc:
                print(f"| {sampler} | {seed} | {answer(backend, parent)} | `{text.strip()}` at {position} | - | refused: {exc} |")
                continue
            there = backend.tokenizer.decode([int(branch.blocks[0].tokens[position])])
            print(f"| {sampler} | {seed} | {answer(backend, parent)} | `{text}` at {position}, step 1:{step + 1} "
                  f"| `{there}` | {answer(backend, branch)} |", flush=True)


if __name__ == "__main__":
    main()
