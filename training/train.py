"""Train the built-in DiffusionGemma demo model on the project's task mix.

The model is `DiffusionGemmaForBlockDiffusion` itself (backends/small_models.py, preset "demo"),
trained with the block-diffusion objective of training/objective.py on examples from
training/data.py, and saved as a folder that `from_pretrained` loads like the real checkpoint:
config, generation config (eos/pad and the sampler defaults), tokenizer, safetensors weights.

    python -m training.train --out runs/base                          # a plain run from scratch (~12 min on an H200)
    python -m training.train --out /tmp/t --preset test --steps 40 --batch-size 8   # CPU smoke run, ~10 s

The shipped model's four commands are in docs/builtin-model.md ("Retrain it"): a run from scratch on short
canvases (`--short-canvas 64`) and three fine-tunes with `--init-from`, all with `--self-correction`, which
puts the model's own samples where the sampler would have them.

It uses CUDA with bf16 autocast when a GPU is visible, else the CPU in float32 (`--compile`
compiles every transformer layer: see compile_layers for what that costs).  Batches are made on demand
by DataLoader workers (training.data.TaskBatches): every batch is new text from the mix, drawn
with a seed of its own, so the run never repeats a fixed pool.  With `--minutes`, the step count is
fitted to the time budget after timing the first steps, and the learning-rate schedule is laid out
over that count.  `--stop-after-minutes` ends the process after that much training with the
whole state saved in the output folder (and the model so far, to evaluate); `--resume` goes on
from there, with the same schedule and the same batches, so a long run fits in short sessions.
Loss and throughput go to stdout and to train_log.jsonl in the output folder; the folder also
gets training_summary.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from backends.small_models import PRESETS

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_DIR = ROOT / "assets" / "tokenizer"


@dataclass
class TrainConfig:
    out: str = "runs/demo"
    preset: str = "demo"
    tokenizer: str = str(TOKENIZER_DIR)  # folder of the tokenizer to train with (and ship)
    # Defaults are a plain run from scratch; docs/builtin-model.md's "Retrain it" gives the shipped model's four commands.
    steps: int = 2672  # the LR schedule's length; with --minutes, at most this many steps
    minutes: float | None = None  # wall-clock budget for the optimisation loop: fits the steps to it
    batch_size: int = 256
    lr: float = 3e-3  # peak AdamW learning rate
    min_lr_ratio: float = 0.05  # cosine decay ends at lr * this
    warmup_steps: int = 200
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    self_condition_share: float = 0.5  # batches that get the no-grad self-conditioning pass
    self_correction: float = 0.0  # in those, share of newly accepted positions holding the model's own sample
    self_correction_max_entropy: float | None = None  # ... only where the first pass's entropy is below this (nats)
    shift_correction: float = 0.0  # share of examples whose accepted tokens sit 1-2 positions off from a cut on
    seed: int = 0
    log_every: int = 50
    device: str | None = None  # default: cuda when available, else cpu
    save_dtype: str = "bfloat16"  # the shipped weights; the backend loads them as float32 on CPU
    workers: int | None = None  # processes that make batches while the GPU trains (default: cores - 2; 0: inline)
    init_from: str | None = None  # continue from a saved model folder (its weights and its tokenizer)
    family_weights: str | None = None  # "math=3,json=3" or a named mix: the task mix (default: data.FAMILY_WEIGHTS)
    corpus: str | None = None  # the "docs" corpus file (default: runs/corpus/python_docs.jsonl, built if missing)
    wordnet: str | None = None  # the "wordnet" definitions file (default: runs/corpus/wordnet.jsonl, built if missing)
    compile: bool = False  # torch.compile every layer (compile_layers: faster steps, minutes of compiling)
    stop_after_minutes: float | None = None  # end this process after this much training, resumable
    resume: bool = False  # go on with the run that --stop-after-minutes saved in --out
    short_canvas: int | None = None  # train answers that fit this many tokens on a canvas this long (TaskBatches)
    routing: str = "gather"  # the MoE router's scale lookup: "gather" (training/routing.py) or transformers' "stock"


def learning_rate(step: int, total: int, config: TrainConfig) -> float:
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = min(1.0, (step - config.warmup_steps) / max(1, total - config.warmup_steps))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def parse_weights(text: str | None) -> dict[str, float] | None:
    """"math=3,json=2.5" -> {"math": 3.0, "json": 2.5}; families left out weigh 1.  A name from
    data.NAMED_MIXES ("base", "visitor", "one-mix") is that mix."""
    if not text:
        return None
    from prompts.tasks import FAMILIES

    from .data import CORPORA, NAMED_MIXES

    if text.strip() in NAMED_MIXES:
        return dict(NAMED_MIXES[text.strip()])

    known = (*FAMILIES, *CORPORA)
    weights = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in known:
            raise ValueError(f"unknown family {name.strip()!r} in --family-weights; choose from: {', '.join(known)}, "
                             f"or name one mix: {', '.join(NAMED_MIXES)}")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--family-weights wants name=number pairs (got {part!r})") from None
    return weights


def make_optimizer(model, config: TrainConfig):
    """AdamW, with no weight decay on norms and biases (fused kernels on CUDA)."""
    import torch

    parameters = list(model.parameters())  # each once: the encoder and decoder share theirs
    decay = [p for p in parameters if p.ndim >= 2]
    no_decay = [p for p in parameters if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr, betas=(0.9, 0.95), fused=parameters[0].device.type == "cuda",
    )


def train_step(model, optimizer, parts: list[dict], config: TrainConfig, *, self_condition: bool, generator) -> dict:
    """One optimisation step on a batch already on the model's device (bf16 autocast on CUDA), given
    as TaskBatches' parts: one, or a short-canvas part and a full one, whose gradients add up to the
    whole batch's on the full canvas.  Returns the objective's detached stats, averaged over the
    parts by their examples."""
    import torch

    from .objective import diffusion_loss

    device = next(model.parameters()).device.type
    examples = sum(len(part["target"]) for part in parts)
    normalizer = examples * max(part["target"].shape[1] for part in parts)  # one part: the plain mean
    optimizer.zero_grad(set_to_none=True)
    stats = {}
    for part in parts:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss, part_stats = diffusion_loss(model, part, self_condition=self_condition,
                                              self_correction=config.self_correction,
                                              self_correction_max_entropy=config.self_correction_max_entropy,
                                              shift_correction=config.shift_correction,
                                              generator=generator, normalizer=normalizer)
        loss.backward()
        share = len(part["target"]) / examples
        for key, value in part_stats.items():  # the parts' losses already add up to the batch's
            stats[key] = stats.get(key, 0) + (value if key == "loss" else value * share)
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    return stats


RESUME_FILE = "resume.pt"  # the whole training state, written by --stop-after-minutes
RESUME_CONFIG_FILE = "resume_config.json"  # the stopped run's settings, which --resume goes on with


def compile_layers(model) -> None:
    """torch.compile each encoder and decoder layer: most of a step's ~5,700 kernel launches are the
    layers' small ops, and the eager step waits on Python and launches, not on the GPU.  Dynamic
    shapes: contexts differ per batch.

    Measured on an H100 (2026-11-24, torch 2.11, demo preset, batch 512): 307 ms a step compiled
    against 438 eager (1.43x), but the compiling took about 7 minutes of a 23-minute budget: Dynamo
    specialises on each layer's `layer_idx` and on whether its cache layer is initialised, so it
    recompiles layer after layer until its recompile limit (8), and a resumed run compiles again.
    The demo preset needs 30 graphs (CPU recompile log, 2026-11-25), so past the limit most layer
    variants ran eager in that measurement.  Hence off by default; worth it only for runs much
    longer than the compile."""
    for layer in (*model.model.encoder.language_model.layers, *model.model.decoder.layers):
        layer.compile(dynamic=True)


def self_condition_draw(seed: int, step: int, share: float) -> bool:
    """Whether step `step` runs the self-conditioning pass: a coin of its own per step, so a resumed
    run draws what an unbroken one would."""
    import numpy as np

    return bool(np.random.default_rng([seed, step]).random() < share)


def batch_loader(config: TrainConfig, tokenizer_dir: str, first_step: int):
    """Batches first_step, first_step + 1, ... made by DataLoader workers (or inline with 0 workers)."""
    import os

    import torch

    from .data import TaskBatches

    batches = TaskBatches(tokenizer_dir, config.batch_size, seed=config.seed,
                          weights=parse_weights(config.family_weights), corpus=config.corpus, wordnet=config.wordnet,
                          short_canvas=config.short_canvas)
    workers = config.workers if config.workers is not None else max(0, min(12, (os.cpu_count() or 1) - 2))
    extra = dict(prefetch_factor=8, persistent_workers=True) if workers else {}
    return torch.utils.data.DataLoader(batches, batch_size=None, sampler=range(first_step, 2**31 - 1),
                                       num_workers=workers, pin_memory=torch.cuda.is_available(), **extra)


def save_model(model, tokenizer, out: Path, save_dtype: str) -> None:
    """The folder `from_pretrained` loads: weights in `save_dtype`, generation defaults, tokenizer.
    Converts the model in place: call it last."""
    import torch

    from backends.random_model import set_generation_defaults

    model.eval()
    set_generation_defaults(model, tokenizer)
    model.to(getattr(torch, save_dtype)).save_pretrained(out)
    tokenizer.save_pretrained(out)


def train(config: TrainConfig) -> Path:
    import torch
    import transformers
    from transformers import AutoTokenizer, DiffusionGemmaForBlockDiffusion

    from backends.small_models import small_config
    from .objective import to_device
    from .routing import use_gather_routing

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(config.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    tokenizer_dir = config.init_from or config.tokenizer  # a continued model keeps its own tokenizer
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    state = torch.load(out / RESUME_FILE, map_location="cpu", weights_only=False) if config.resume else None

    if config.init_from:
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(config.init_from, dtype=torch.float32)
    else:
        model = DiffusionGemmaForBlockDiffusion(small_config(len(tokenizer), config.preset))
    if state:
        model.load_state_dict(state["model"])
    model = model.to(device).train()
    if config.routing == "gather":
        use_gather_routing(model)  # same outputs, a cheaper backward on CUDA (training/routing.py)
    compiled = config.compile
    if compiled:
        compile_layers(model)
    print(f"model: {config.init_from or 'preset ' + config.preset}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"vocab {len(tokenizer)}, device {device}, {'compiled layers' if compiled else 'eager'}"
          + (f", resumed at step {state['step']} of {state['total_steps']}" if state else ""), flush=True)
    optimizer = make_optimizer(model, config)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    if state:
        optimizer.load_state_dict(state["optimizer"])
        generator.set_state(state["generator"])

    step = state["step"] if state else 0
    total_steps = state["total_steps"] if state else config.steps
    earlier_seconds = state["train_seconds"] if state else 0.0
    segments = state["segments"] if state else []
    loop_start, timed_from = time.perf_counter(), None
    log = (out / "train_log.jsonl").open("a" if state else "w")
    window, tokens, row = [], 0, None
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    stopped_early = False
    for numpy_parts in batch_loader(config, tokenizer_dir, step):
        if step >= total_steps:
            break
        parts = [to_device(part, device) for part in numpy_parts]
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, total_steps, config)
        self_condition = self_condition_draw(config.seed, step, config.self_condition_share)
        window.append(train_step(model, optimizer, parts, config, self_condition=self_condition, generator=generator))
        tokens += sum(part["target"].numel() + part["context_ids"].numel() for part in parts)
        step += 1

        if config.minutes is not None and not state and step == 20:
            timed_from = (time.perf_counter(), step)  # the first steps include warm-up and compile costs
        if config.minutes is not None and timed_from and step == 120:
            per_step = (time.perf_counter() - timed_from[0]) / (step - timed_from[1])
            budget = config.minutes * 60 - (time.perf_counter() - loop_start)
            total_steps = min(config.steps, step + int(budget / per_step))
            print(f"{per_step * 1000:.0f} ms/step: {total_steps} steps fit in {config.minutes} min", flush=True)

        elapsed = time.perf_counter() - loop_start
        if step % config.log_every == 0 or step == total_steps:
            row = {k: round(float(torch.stack([s[k] for s in window]).mean()), 4) for k in window[0]}
            row.update(step=step, lr=round(optimizer.param_groups[0]["lr"], 6), elapsed_s=round(earlier_seconds + elapsed, 1),
                       tokens_per_s=round(tokens / elapsed))
            print(json.dumps(row), flush=True)
            log.write(json.dumps(row) + "\n")
            log.flush()
            window = []
        if config.stop_after_minutes is not None and elapsed > config.stop_after_minutes * 60 and step < total_steps:
            stopped_early = True
            break
    log.close()
    train_seconds = time.perf_counter() - loop_start
    segments = [*segments, {"steps": step - (state["step"] if state else 0), "seconds": round(train_seconds, 1),
                            "device": device_name}]

    if stopped_early:  # everything a resumed process needs, in float32, before the model is converted
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "generator": generator.get_state(),
                    "step": step, "total_steps": total_steps, "train_seconds": earlier_seconds + train_seconds,
                    "segments": segments}, out / RESUME_FILE)
        (out / RESUME_CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
    save_model(model, tokenizer, out, config.save_dtype)
    summary = {
        "config": dataclasses.asdict(config),
        "steps": step,
        "total_steps": total_steps,
        "finished": not stopped_early,
        "train_seconds": round(earlier_seconds + train_seconds, 1),
        "segments": segments,
        "final": row,
        "device": device_name,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    (out / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if stopped_early:
        print(f"stopped at step {step} of {total_steps} after {train_seconds / 60:.1f} min: `--resume` goes on "
              f"(the model so far is saved in {out})", flush=True)
    else:
        (out / RESUME_FILE).unlink(missing_ok=True)
        (out / RESUME_CONFIG_FILE).unlink(missing_ok=True)
        print(f"saved {out} after {step} steps in {(earlier_seconds + train_seconds) / 60:.1f} min", flush=True)
    return out


def resumed_config(given: TrainConfig, parser: argparse.ArgumentParser) -> TrainConfig:
    """The stopped run's own settings, with only when to stop again taken from the command line.

    A run resumed with other settings (another mix, batch size or canvas) would train a recipe no
    command describes; so `--resume --out DIR` is all it needs, and the other flags are ignored."""
    saved = Path(given.out) / RESUME_CONFIG_FILE
    if not (Path(given.out) / RESUME_FILE).is_file() or not saved.is_file():
        parser.error(f"--resume: no {RESUME_FILE} and {RESUME_CONFIG_FILE} in {given.out} (--stop-after-minutes writes them)")
    settings = json.loads(saved.read_text())
    config = dataclasses.replace(TrainConfig(**settings), resume=True, out=given.out,
                                 stop_after_minutes=given.stop_after_minutes)
    defaults = TrainConfig()
    ignored = [f.name for f in dataclasses.fields(TrainConfig)
               if getattr(given, f.name) not in (getattr(defaults, f.name), getattr(config, f.name))
               and f.name not in ("resume", "stop_after_minutes")]
    if ignored:
        print(f"--resume goes on with the stopped run's settings; ignoring --{', --'.join(n.replace('_', '-') for n in ignored)}",
              flush=True)
    return config


def parse_args(argv=None) -> TrainConfig:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type.startswith("bool"):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=getattr(defaults, f.name))
            continue
        kind = {"int": int, "float": float}.get(f.type.split()[0], str)  # "float | None" -> float
        parser.add_argument(flag, type=kind, default=getattr(defaults, f.name))
    args = parser.parse_args(argv)
    config = TrainConfig(**vars(args))
    if config.routing not in ("gather", "stock"):
        parser.error(f"unknown --routing {config.routing!r}; choose gather or stock")
    if config.preset not in PRESETS:
        parser.error(f"unknown preset {config.preset!r}; choose one of: {', '.join(PRESETS)}")
    if not (Path(config.tokenizer) / "tokenizer.json").is_file():
        parser.error(f"no tokenizer in {config.tokenizer}: run `python -m training.build_tokenizer` first")
    if config.init_from and not (Path(config.init_from) / "config.json").is_file():
        parser.error(f"--init-from {config.init_from}: no model folder there (config.json missing)")
    try:
        parse_weights(config.family_weights)
    except ValueError as exc:
        parser.error(str(exc))
    if not 0 <= config.self_correction <= 1:
        parser.error("--self-correction is a share of positions: between 0 and 1")
    if not 0 <= config.shift_correction <= 1:
        parser.error("--shift-correction is a share of examples: between 0 and 1")
    if config.self_correction_max_entropy is not None and config.self_correction_max_entropy <= 0:
        parser.error("--self-correction-max-entropy must be above 0 (nats)")
    if config.resume:
        config = resumed_config(config, parser)
    if config.short_canvas is not None and not 1 <= config.short_canvas <= 256:
        parser.error("--short-canvas is a canvas length: 1 to 256 tokens")
    if config.stop_after_minutes is not None and config.stop_after_minutes <= 0:
        parser.error("--stop-after-minutes must be above 0")
    for name in ("steps", "batch_size"):
        if getattr(config, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return config


def main(argv=None) -> None:
    config = parse_args(argv)
    try:
        train(config)
    except KeyboardInterrupt:
        sys.exit("interrupted")


if __name__ == "__main__":
    main()
