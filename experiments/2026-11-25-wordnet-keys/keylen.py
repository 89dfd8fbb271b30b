"""Visitor JSON keys written, by the number of tokens a key takes, from `training.evaluate --json` files
(experiments/README.md, "A few keys decide a visitor JSON score"): each asked key counted once a prompt.

    python experiments/2026-11-25-wordnet-keys/keylen.py results.json [more.json ...]
"""

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from transformers import AutoTokenizer  # noqa: E402

TOKENIZER = ROOT / "assets" / "tokenizer"


def by_length(results: list[dict], tokenizer) -> dict[int, tuple[int, int]]:
    written, asked = Counter(), Counter()
    for r in results:
        if r.get("kind") == "paraphrase" and r.get("scored_as") == "json" and r.get("keys_written"):
            for key, ok in r["keys_written"].items():
                n = len(tokenizer(key, add_special_tokens=False).input_ids)
                written[n] += bool(ok)
                asked[n] += 1
    return {n: (written[n], asked[n]) for n in sorted(asked)}


def main() -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(TOKENIZER))
    for path in sys.argv[1:]:
        table = by_length(json.load(open(path))["results"], tokenizer)
        print(f"{path}: " + ", ".join(f"{n} tokens {w}/{a}" for n, (w, a) in table.items()))


if __name__ == "__main__":
    main()
