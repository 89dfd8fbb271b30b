"""Train the project's BPE tokenizer on the task mix and save it (to assets/tokenizer/ by default).

    python -m training.build_tokenizer                  # rewrites assets/tokenizer/
    python -m training.build_tokenizer --out /tmp/tok --texts 2000

The result is deterministic for a seed: the same texts, the same merges.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .data import TOKENIZER_MIXES, TOKENIZER_TEXTS, VOCAB_SIZE, build_tokenizer

TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "assets" / "tokenizer"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(TOKENIZER_DIR))
    parser.add_argument("--texts", type=int, default=TOKENIZER_TEXTS, help="tasks to train on")
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--isolate-capitals", action=argparse.BooleanOptionalAction, default=True,
                        help="make every capital letter its own token, so an acrostic copies letters (default: on)")
    parser.add_argument("--mix", choices=sorted(TOKENIZER_MIXES), default="all",
                        help="the texts: every generated family (the shipped tokenizer's), or the template families only")
    parser.add_argument("--whole-numbers", type=int, default=200,
                        help="make every number below this one token (200, the shipped tokenizer; 0: what BPE merges)")
    parser.add_argument("--space-apart", action=argparse.BooleanOptionalAction, default=True,
                        help="keep the space before a lowercase word apart, so a word splits the same after a space "
                             "and after a quote: a JSON key is copied from the prompt piece by piece (default: on)")
    args = parser.parse_args(argv)
    if args.texts < 1 or not 300 <= args.vocab_size <= 65536 or not 0 <= args.whole_numbers <= 1000:
        parser.error("--texts must be at least 1, --vocab-size between 300 and 65536, --whole-numbers 0 to 1000")
    tokenizer = build_tokenizer(
        seed=args.seed, count=args.texts, vocab_size=args.vocab_size, isolate_capitals=args.isolate_capitals,
        mix=args.mix, whole_numbers=args.whole_numbers, space_apart=args.space_apart,
    )
    tokenizer.save_pretrained(args.out)
    print(f"saved a {len(tokenizer)}-token tokenizer to {args.out}")


if __name__ == "__main__":
    main()
