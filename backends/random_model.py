"""Build the small random-weight DiffusionGemma deterministically (for tests and as a baseline).

An untrained model is worth seeing once: with nothing learned, its entropies stay high, the
sampler accepts a few positions at a time and re-masks most of them at the next step, and no
block ever converges early.  Tests use it where they need exact control.

    build_random_model("/tmp/random-tiny")           # same weights every time, ~3 MB
    python -m training.build_random --out /tmp/random-tiny

It takes the project's tokenizer from `assets/tokenizer/`, so it speaks the same ids as the
trained demo model.  It lives with the backends (which build it on first use) so that no backend
needs the training code.
"""

from __future__ import annotations

from pathlib import Path

from .small_models import small_config

TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "assets" / "tokenizer"
END_TURN = "<turn|>"  # Gemma 4 ends a model turn with it; generation stops there as at <eos>

# The real checkpoint's generation defaults, written into every small model we save.
GENERATION_DEFAULTS = dict(
    max_new_tokens=256, max_denoising_steps=48, t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.005
)


def load_project_tokenizer(folder: str | Path = TOKENIZER_DIR):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def set_generation_defaults(model, tokenizer) -> None:
    """eos/pad and the checkpoint's sampler defaults: transformers saves none of them by itself."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

    g = model.generation_config
    g.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids(END_TURN)]
    g.pad_token_id = tokenizer.pad_token_id
    g.bos_token_id = tokenizer.bos_token_id
    for key, value in GENERATION_DEFAULTS.items():
        setattr(g, key, value)
    g.sampler_config = EntropyBoundSamplerConfig(entropy_bound=0.1)


def build_random_model(out_dir: str | Path, *, preset: str = "test", seed: int = 0, tokenizer=None) -> Path:
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    out_dir = Path(out_dir)
    tokenizer = tokenizer or load_project_tokenizer()
    torch.manual_seed(seed)
    model = DiffusionGemmaForBlockDiffusion(small_config(len(tokenizer), preset)).eval()
    set_generation_defaults(model, tokenizer)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
