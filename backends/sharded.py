"""DiffusionGemma across several processes of one host: where a process stands, the plans, the fit checks.

Launched by torchrun (the code never spawns its own processes); every rank loads its shard and
runs the same `model.generate` in lockstep; rank 0 records, the followers record nothing (they run
under the capture only to vote on rank 0's stop, `sharded_server.agreed`):

    torchrun --nproc-per-node 4 -m visualizer record --parallel expert --model M --demo acrostic --out run.json

    config = distributed_config("expert", world_size())       # -> from_pretrained(distributed_config=...)
    if is_follower(): backend.follow(prompt, settings)         # the same generate, nothing recorded

A server of many requests (the app: `torchrun --nproc-per-node 2 app.py --parallel expert`) is
`backends/sharded_server.py`: rank 0's `Leader`, the followers' `follow_requests`, and the vote.

Kinds (`PARALLEL_KINDS`):
  expert          each rank holds 1/N of every layer's experts; attention, embeddings and head are
                  replicated; one all-reduce per MoE layer (transformers' `AllReduceEP`). N must divide
                  the number of experts (128 on the real model).
  tensor          attention heads, dense MLP and every expert split N ways (transformers' own
                  `base_model_tp_plan`); three all-reduces a layer. N must divide the kv heads, so at most
                  2 on the real model (2 global kv heads).
  tensor+expert   attention and dense MLP as `tensor`, experts as `expert`.
  layers          no torchrun: one process, layers spread over the visible GPUs by
                  `device_map="auto"` (for fitting GPUs of different sizes, not for speed).

Why our own plans (transformers 5.23; docs/sharded.md has the reproduction):
- The model's resolved plan names the *encoder*'s text layers only (the config's
  `base_model_tp_plan` lands on `DiffusionGemmaEncoderTextModel`, the one sub-model whose config
  is the text config). But the encoder's text weights are tied to the *decoder*'s, and the
  checkpoint holds the decoder's: after loading, the tie puts the decoder's plain full tensors into
  the encoder's modules, whose forwards still carry the TP hooks. The embedding hook turns the ids
  into a DTensor and the lookup meets a plain weight: "aten.embedding.default got mixed
  torch.Tensor and DTensor". Past that error the colwise/rowwise hooks would all-reduce full
  (unsharded) products: wrong numbers, silently. Naming the decoder's modules too shards the tie's
  source, so both sides share one DTensor.
- The decoder's self-conditioning multiplies the previous logits by `embed_tokens.weight` directly,
  outside any hook, so a vocabulary-sharded embedding (the auto `embedding_rowwise`) cannot work
  there; embeddings and the tied head stay replicated (`replicate`: 1.5 GB in bf16 on the real model).
- A dict passed as `tp_plan` or `ep_plan` is merged into the model's plan (`plan | override`): a key
  left out is not removed, so overriding means naming the key with another style, not dropping it.
  (The auto EP plan also splits the dense MLP: left in, the encoder's MLP hooks all-reduced the
  decoder's whole weights' products, doubling them on 2 ranks; Gemma's post-MLP norm hid it.)
"""

from __future__ import annotations

import os

TEXT_MODELS = ("model.decoder", "model.encoder.language_model")  # tied: the decoder's weights are the checkpoint's
REPLICATED = {"lm_head": "replicate", "model.encoder.language_model.embed_tokens": "replicate"}
ATTENTION_AND_DENSE = tuple(
    f"layers.*.{name}" for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                    "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
)
PARALLEL_KINDS = ("expert", "tensor", "tensor+expert", "layers")
TORCHRUN_KINDS = ("expert", "tensor", "tensor+expert")


# ---- who am I (torchrun sets these; a plain `python` run is rank 0 of 1) -------------------------
def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int:
    """This process's GPU on its host."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def under_torchrun() -> bool:
    return world_size() > 1


def is_follower() -> bool:
    """A rank other than 0: it runs every generation in lockstep but records and writes nothing."""
    return rank() != 0


# ---- the plans ---------------------------------------------------------------------------------
def _for_text_models(plan: dict[str, str]) -> dict[str, str]:
    """One base-model plan written out for the decoder and the encoder's text model alike."""
    return {f"{prefix}.{key}": style for prefix in TEXT_MODELS for key, style in plan.items()}


def plans(kind: str) -> tuple[dict[str, str], dict[str, str]]:
    """(tp_plan, ep_plan) overrides for `DistributedConfig`, for one of TORCHRUN_KINDS.

    Every rule of the model's own plans is named again for both text models, so the encoder's
    hooks always match the decoder's weights it holds after the tie."""
    from transformers.models.diffusion_gemma.configuration_diffusion_gemma import DiffusionGemmaTextConfig as Text

    tensor = {**_for_text_models(Text.base_model_tp_plan), **REPLICATED}
    if kind == "tensor":
        return tensor, {}
    if kind == "tensor+expert":  # the model's EP plan: experts dealt out, the dense MLP split as in `tensor`
        return tensor, _for_text_models(Text.base_model_ep_plan)
    if kind == "expert":
        # transformers' mesh needs tp_size == ep_size here; plans that shard nothing but the experts give pure EP
        # (every other rule named again with `replicate`, since a left-out key would stay in the plan).
        replicated = _for_text_models(dict.fromkeys(ATTENTION_AND_DENSE, "replicate"))
        experts = {k: ("replicate" if ".mlp." in k else v) for k, v in Text.base_model_ep_plan.items()}
        return {**replicated, **REPLICATED}, _for_text_models(experts)
    raise ValueError(f"unknown parallel kind {kind!r}: use one of {', '.join(TORCHRUN_KINDS)}")


def distributed_config(kind: str, processes: int):
    """The `DistributedConfig` for `from_pretrained` that shards DiffusionGemma `kind`-wise over `processes`."""
    from transformers.distributed import DistributedConfig

    tp_plan, ep_plan = plans(kind)
    if ep_plan:
        return DistributedConfig(tp_size=processes, ep_size=processes, tp_plan=tp_plan, ep_plan=ep_plan)
    return DistributedConfig(tp_size=processes, tp_plan=tp_plan)


def compile_alike(inductor=None) -> str:
    """Make every rank's torch.compile pick the same kernels, so the work every rank runs whole (attention,
    the dense MLP, the head, sampling) gives the same bits everywhere; returns how, for the benchmark.

    Inductor times each reduction kernel's candidate configs in its own process and keeps the fastest.
    Two ranks can keep different ones, which sum in different orders: their logits then differ in the
    last bits and their canvases drift apart. On 4 H200s the ranks' tokens differed in every compiled
    `expert` run (docs/sharded.md, "Ranks that compile alike"). Inductor's filter picks one config by
    fixed rules instead: 30.3 ms a step there, against 28.6 autotuned. `torch.use_deterministic_algorithms`
    filters them too but also swaps in slower aten kernels and fills new memory (34.7 ms), so it is only
    the fallback, for a torch without the filter.
    `inductor`: inductor's config module, by default this torch's (a test passes an older one's)."""
    import torch

    if inductor is None:
        import torch._inductor.config as inductor
    if hasattr(inductor.test_configs, "force_filter_reduction_configs"):  # in torch 2.11 and 2.13
        inductor.test_configs.force_filter_reduction_configs = True
        return "filtered reduction configs"
    torch.use_deterministic_algorithms(True, warn_only=True)
    return "deterministic algorithms"


def _per_layer(text_config, name: str) -> set[int]:
    """Every layer's value of `name`: the real config's sliding and global layers differ (kv heads 8 and 2)."""
    layers = getattr(text_config, "per_layer_config", None)
    if layers:
        return {getattr(layer, name) for layer in (layers.values() if isinstance(layers, dict) else layers)}
    return {getattr(text_config, name)}


def check_fits(kind: str, processes: int, text_config) -> None:
    """Raise ValueError with one line when `kind` cannot split this model `processes` ways."""
    counts = []
    if kind in ("tensor", "tensor+expert"):  # heads and the dense MLP's width are split
        counts += [(n, "attention heads") for n in _per_layer(text_config, "num_attention_heads")]
        counts += [(n, "key/value heads") for n in _per_layer(text_config, "num_key_value_heads")]
        counts.append((text_config.intermediate_size, "dense MLP width"))
    if kind == "tensor":  # each expert's width is split
        counts.append((text_config.moe_intermediate_size, "expert width"))
    else:  # whole experts are dealt out
        counts.append((text_config.num_experts, "experts"))
    bad = [f"{n} {name}" for n, name in sorted(set(counts)) if n % processes]
    if bad:
        hint = "; expert parallel splits only the experts" if kind != "expert" else ""
        raise ValueError(f"{kind} parallel cannot split this model {processes} ways ({', '.join(bad)}{hint}).")


def spread(model, kind: str, processes: int) -> str:
    """How the model is spread, for the picker: "expert parallel over 4 GPUs, 12.6 GB each"."""
    from torch.distributed.tensor import DTensor

    per_rank = sum(
        (p.to_local() if isinstance(p, DTensor) else p).nbytes for p in {id(p): p for p in model.parameters()}.values()
    )
    where = "GPUs" if model.device.type == "cuda" else f"{model.device.type} processes"
    size = f"{per_rank / 1e9:.1f} GB" if per_rank >= 1e9 else f"{per_rank / 1e6:.0f} MB"
    return f"{kind} parallel over {processes} {where}, {size} each"
