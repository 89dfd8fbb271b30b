"""Configs of the project's small DiffusionGemma models: the real architecture, scaled down.

A backend concern: the random test model (`backends/random_model.py`) is built from these, and
training (`training/train.py`) trains the built-in model from the "demo" preset.

`DiffusionGemmaForBlockDiffusion` is used exactly as for the 26B checkpoint (encoder and decoder
sharing weights, MoE in every layer, self-conditioning, 256-token canvas); only the sizes shrink.
Pitfalls these configs avoid (each found building the model with transformers 5.23):
- MoE is always built, so `num_experts`, `top_k_experts` and `moe_intermediate_size` are set;
- `global_head_dim` defaults to 512 and `num_global_key_value_heads` to the local value: set both;
- the last layer must be `full_attention`;
- with no `vision_config`, transformers builds a 167M-parameter vision tower: pass a tiny one.

    config = small_config(vocab_size=len(tokenizer), preset="test")
"""

from __future__ import annotations

from dataclasses import dataclass

CANVAS_LENGTH = 256  # the real model's block length; kept so frames look like the real thing


@dataclass(frozen=True)
class Preset:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP next to the experts in every layer
    num_experts: int
    top_k_experts: int
    moe_intermediate_size: int
    max_position_embeddings: int = 2048  # context of the small models: prompt + output, in tokens


PRESETS = {
    # Random-weight model for tests that need exact control: builds in a second, runs 256 tokens in ~1 s.
    "test": Preset(64, 2, 2, 1, 32, 128, 4, 2, 32),
    # The built-in demo model (assets/models/diffusiongemma-tiny-demo): ~10.0M parameters, 20.1 MB in
    # bf16; small enough for a denoising step in ~0.1 s on 2 CPU threads, big enough to learn the task mix.
    "demo": Preset(256, 6, 4, 2, 64, 512, 8, 2, 128),
}


def small_config(vocab_size: int, preset: str | Preset = "test", canvas_length: int = CANVAS_LENGTH):
    from transformers import DiffusionGemmaConfig

    p = PRESETS[preset] if isinstance(preset, str) else preset
    layer_types = ["sliding_attention"] * (p.num_hidden_layers - 1) + ["full_attention"]
    text_config = dict(
        vocab_size=vocab_size,
        hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_hidden_layers,
        num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads,
        head_dim=p.head_dim,
        global_head_dim=p.head_dim,
        num_global_key_value_heads=p.num_key_value_heads,
        layer_types=layer_types,
        sliding_window=512,
        num_experts=p.num_experts,
        top_k_experts=p.top_k_experts,
        moe_intermediate_size=p.moe_intermediate_size,
        max_position_embeddings=p.max_position_embeddings,
        use_bidirectional_attention="vision",  # as the real checkpoint: text is causal in the encoder
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    vision_config = dict(
        model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=1, num_key_value_heads=1, head_dim=16,
    )
    return DiffusionGemmaConfig(text_config=text_config, vision_config=vision_config, canvas_length=canvas_length)
