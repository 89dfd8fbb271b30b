"""Convert the project's small DiffusionGemma models (transformers folders) to MLX folders for mlx-vlm.

    python -m training.convert_mlx --model assets/models/diffusiongemma-tiny-demo --out /tmp/tiny-mlx
    python -m training.convert_mlx --model FOLDER --out /tmp/tiny-mlx-4bit --bits 4
    convert_to_mlx("FOLDER", "OUT", bits=4)          # returns Path("OUT")

The conversion itself is mlx-vlm's (`mlx_vlm.convert`, float32, `-q --q-bits N` for a quantized
model with its recipe for this architecture: embeddings, attention, dense MLP and router at 8
bits, experts at N).  What mlx-vlm 0.7.10 needs that our transformers folders do not say, and
what this module fixes in a staged copy of the config (each found converting and loading our folders with
mlx-vlm 0.7.10 on Linux CPU; the MLX tests convert the random model, tests/conftest.py, and generate from it):
- `"vision_config": null`: our small models carry a tiny vision tower only because transformers
  builds a 167M-parameter one without it; the MLX model is text-only (mlx-vlm then skips the
  vision weights itself);
- the full-attention layers' head size and kv heads as `global_head_dim` and
  `num_global_key_value_heads`: transformers 5.23 keeps them in `per_layer_config`, which it
  writes out as `{}`, and mlx-vlm would fall back to 512;
- float32 weights: unquantized bf16 MoE fails on the CPU;
- the tokenizer files exactly as ours: mlx-vlm's processor rewrites tokenizer_config.json on save
  (it drops the turn tokens from the special tokens), so the originals are copied back, and the
  vocabulary must match the model's (`vocab_size == len(tokenizer)`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


class ConversionError(ValueError):
    """The source folder cannot be converted; the message says why."""


def mlx_config(model_dir: Path) -> dict:
    """config.json of `model_dir` as mlx-vlm reads it: text only, head sizes written out."""
    from transformers import AutoConfig

    raw = json.loads((model_dir / "config.json").read_text())
    if raw.get("model_type") != "diffusion_gemma":
        raise ConversionError(f"{model_dir} holds a {raw.get('model_type')!r} model, not DiffusionGemma")
    text = AutoConfig.from_pretrained(str(model_dir)).text_config
    full_attention = text.per_layer_config["full_attention"]
    raw["vision_config"] = None
    text_config = raw["text_config"]
    text_config.pop("per_layer_config", None)
    text_config["global_head_dim"] = int(full_attention.head_dim)
    text_config["num_global_key_value_heads"] = int(full_attention.num_key_value_heads)
    text_config["final_logit_softcapping"] = text.final_logit_softcapping
    return raw


def check_vocabulary(model_dir: Path, config: dict) -> None:
    from transformers import AutoTokenizer

    vocab = config["text_config"]["vocab_size"]
    size = len(AutoTokenizer.from_pretrained(str(model_dir)))
    if size != vocab:
        raise ConversionError(f"the tokenizer has {size} tokens but the model's vocab_size is {vocab}; they must match")


def convert_to_mlx(model_dir, out_dir, *, bits: int | None = None, group_size: int = 64) -> Path:
    """Write an MLX folder for the transformers DiffusionGemma folder `model_dir`; quantize when `bits`."""
    model_dir, out_dir = Path(model_dir).expanduser(), Path(out_dir).expanduser()
    if not (model_dir / "config.json").is_file():
        raise ConversionError(f"no config.json in {model_dir}: not a model folder")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise ConversionError(f"{out_dir} already exists and is not empty; choose a new folder")
    if bits is not None and bits not in (2, 3, 4, 5, 6, 8):
        raise ConversionError(f"bits must be one of 2, 3, 4, 5, 6, 8 (got {bits})")
    config = mlx_config(model_dir)
    check_vocabulary(model_dir, config)
    from mlx_vlm.convert import convert

    with tempfile.TemporaryDirectory(prefix="convert-mlx-") as tmp:
        stage = Path(tmp)
        for item in model_dir.iterdir():  # everything but the config, by link: no weights are copied
            if item.name != "config.json":
                (stage / item.name).symlink_to(item.resolve())
        (stage / "config.json").write_text(json.dumps(config, indent=2))
        convert(
            str(stage),
            mlx_path=str(out_dir),
            dtype="float32",
            quantize=bits is not None,
            q_bits=bits or 4,
            q_group_size=group_size,
        )
    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            shutil.copyfile(model_dir / name, out_dir / name)
    return out_dir


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="transformers DiffusionGemma folder (save_pretrained)")
    parser.add_argument("--out", required=True, help="new folder for the MLX model")
    parser.add_argument("--bits", type=int, default=None, help="quantize the experts to this many bits (e.g. 4)")
    parser.add_argument("--group-size", type=int, default=64, help="quantization group size (default 64)")
    args = parser.parse_args(argv)
    try:
        print(convert_to_mlx(args.model, args.out, bits=args.bits, group_size=args.group_size))
    except ImportError as exc:
        from backends import MLX_INSTALL_HINT

        sys.exit(f"convert_mlx: MLX or a part of mlx-vlm is missing here ({exc}). {MLX_INSTALL_HINT}")
    except (ValueError, OSError) as exc:  # ConversionError, or mlx-vlm refusing the folder
        sys.exit(f"convert_mlx: {exc}")


if __name__ == "__main__":
    main()
