"""`python -m training.build_random --out FOLDER`: write the random-weight test model to a folder.

The builder itself is `backends.random_model.build_random_model` (the backends build this model
on first use, and never import training).
"""

from __future__ import annotations

import argparse

from backends.random_model import build_random_model


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder to write the model into")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(build_random_model(args.out, seed=args.seed))


if __name__ == "__main__":
    main()
