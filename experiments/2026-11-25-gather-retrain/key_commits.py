"""Where the built-in model miscopies JSON keys: for every key after the first in its answers to held-out
training-generator visitor JSON prompts (the development set's kind, not the evaluation set), was the key's
closing `":` committed before the key's own pieces (a slot fixed before the key's length was known), and was
the key copied right (its text in the prompt)?  A key's slot counts as fixed from the step its tokens stay
accepted (the last run of `block_commits(...).accepted`; the study's commit step, the first acceptance, would
count a closing quote that the sampler later re-noised).

    python experiments/2026-11-25-gather-retrain/key_commits.py assets/models/diffusiongemma-tiny-demo 120
"""

import re
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backends import record_trace  # noqa: E402
from backends.transformers_backend import TransformersBackend  # noqa: E402
from prompts.tasks import heldout_tasks  # noqa: E402
from visualizer.metrics.commits import block_commits  # noqa: E402
from visualizer.settings import GenerationSettings  # noqa: E402


def stays_accepted_from(accepted: np.ndarray) -> np.ndarray:
    """(canvas,) the step from which each position stays accepted to the end ((steps, canvas) in)."""
    steps = len(accepted)
    last_not_accepted = np.where(~accepted, np.arange(steps)[:, None], -1).max(axis=0)
    return last_not_accepted + 1


def main() -> None:
    torch.set_num_threads(2)
    backend = TransformersBackend(sys.argv[1], device="cpu")
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    table: dict[tuple[bool, bool], int] = {}
    for task in heldout_tasks("json_paraphrase", count):
        trace = record_trace(backend, task.prompt, GenerationSettings(seed=0))
        commits = block_commits(trace, 0)
        end = commits.content_length
        commit = stays_accepted_from(commits.accepted)
        pieces = [trace.piece(int(t)) for t in commits.tokens[:end]]
        starts = np.cumsum([0] + [len(p) for p in pieces])
        text = "".join(pieces)

        def tokens_in(a: int, b: int) -> list[int]:
            return [k for k in range(end) if starts[k] < b and starts[k + 1] > a]

        for n, match in enumerate(re.finditer(r'"([^"]*)":', text)):
            key = tokens_in(match.start(1), match.end(1))
            colon = [k for k in tokens_in(match.end(1), match.end()) if k not in key]
            if n == 0 or not key or not colon:
                continue  # the first key sits at a fixed place, committed at step 0
            early = max(commit[k] for k in colon) < min(commit[k] for k in key)
            right = match.group(1) in task.prompt
            table[early, right] = table.get((early, right), 0) + 1
    for early in (True, False):
        right, wrong = table.get((early, True), 0), table.get((early, False), 0)
        print(f"{'closing quote first' if early else 'key first or together'}: {right + wrong} keys, "
              f"{wrong} miscopied ({wrong / max(1, right + wrong):.0%})")


if __name__ == "__main__":
    main()
