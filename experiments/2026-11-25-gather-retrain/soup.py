"""Average the weights of model folders that share a parent (a "model soup", Wortsman et al. 2022).

finalA, finalB and finalC are three third stages from the same second-stage model; fine-tunes of one
parent often average into a model better than each.  The first folder's files (config, tokenizer,
generation defaults) are copied; only model.safetensors is averaged, in float32, saved in bfloat16 as
the shipped weights are.

    python experiments/2026-11-25-gather-retrain/soup.py runs/soupAC runs/finalA runs/finalC
"""

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def main() -> None:
    out, parts = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    out.mkdir(parents=True, exist_ok=True)
    for f in parts[0].iterdir():
        if f.is_file() and f.name != "model.safetensors":
            shutil.copy(f, out / f.name)
    weights = [load_file(str(p / "model.safetensors")) for p in parts]
    assert all(w.keys() == weights[0].keys() for w in weights), "the folders hold different models"
    soup = {k: (sum(w[k].float() for w in weights) / len(weights)).to(weights[0][k].dtype) for k in weights[0]}
    save_file(soup, str(out / "model.safetensors"), metadata={"format": "pt"})
    print(f"{out}: the mean of {', '.join(map(str, parts))}")


if __name__ == "__main__":
    main()
