"""Is a row's decoder pass the same bit for bit alone as in a batch? What a refilling loop's stock reference needs.

    python -m benchmarks.bench_batch_invariance                                   # the built-in model, CPU
    python -m benchmarks.bench_batch_invariance --device cuda --layers 2          # the real width, random bf16 weights

A loop that refills finished rows within a block puts each generation into whatever rows happen to be free, beside
other generations at other steps; its traces can equal each generation run alone (batch 1, stock `generate`) only if
a row's logits do not depend on the rest of its batch. One full forward (prompt of 64 tokens, a random canvas) of a
row alone against the same row at rows 0 and B-1 of a batch of B whose other rows are other prompts of that length
(no padding, so the positions agree): the largest absolute difference of the logits, ‖difference‖ / ‖alone‖, and
whether they are equal.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

BUILTIN = Path(__file__).resolve().parent.parent / "assets" / "models" / "diffusiongemma-tiny-demo"


def load(args):
    if args.device == "cpu":
        from transformers import DiffusionGemmaForBlockDiffusion

        return DiffusionGemmaForBlockDiffusion.from_pretrained(BUILTIN).eval()
    from benchmarks.bench_capture_fullshape import REAL_SHAPE, build, full_shape_config

    return build(full_shape_config(layers=args.layers, experts=REAL_SHAPE["num_experts"], vocab=REAL_SHAPE["vocab_size"]),
                 args.device)[0].eval()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=2, help="decoder and encoder layers at the real width (cuda)")
    parser.add_argument("--rows", default="2,4,8,16")
    args = parser.parse_args(argv)
    model = load(args)
    vocab, canvas = model.config.text_config.vocab_size, model.config.canvas_length
    draw = torch.Generator().manual_seed(0)
    most = max(int(n) for n in args.rows.split(","))
    prompts = torch.randint(3, vocab, (most, 64), generator=draw).to(args.device)
    canvases = torch.randint(0, vocab, (most, canvas), generator=draw).to(args.device)

    def logits(rows: slice) -> torch.Tensor:
        with torch.no_grad():
            return model(input_ids=prompts[rows], decoder_input_ids=canvases[rows]).logits.float()

    alone = {0: logits(slice(0, 1))[0]}
    print(f"{args.device} ({torch.cuda.get_device_name(0) if args.device.startswith('cuda') else 'built-in model'}), "
          f"vocabulary {vocab}, canvas {canvas}\n")
    print("| batch | row | largest abs difference from the row alone | relative (norm) | equal bit for bit |")
    print("|---|---|---|---|---|")
    equal_everywhere = True
    for rows in (int(n) for n in args.rows.split(",")):
        batch = logits(slice(0, rows))
        for row in (0, rows - 1):
            if row not in alone:
                alone[row] = logits(slice(row, row + 1))[0]
            same = torch.equal(batch[row], alone[row])
            equal_everywhere &= same
            diff = batch[row] - alone[row]
            print(f"| {rows} | {row} | {diff.abs().max().item():.3g} | {(diff.norm() / alone[row].norm()).item():.2g} | "
                  f"{same} |", flush=True)
    return 0 if equal_everywhere else 1


if __name__ == "__main__":
    raise SystemExit(main())
