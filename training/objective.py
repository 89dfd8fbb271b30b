"""The block-diffusion training objective, matched to transformers' DiffusionGemma sampler.

What the sampler does at inference (generation_diffusion_gemma.py), and what training mirrors:
- the encoder writes the clean context (prompt + earlier blocks) into the KV cache; the decoder
  reads it and attends bidirectionally over the 256-token canvas;
- there is no mask token: a canvas position is either a token accepted earlier or a fresh
  uniform random token.  Training replaces each target position, with probability r (drawn per
  example), by a uniform random id over the whole vocabulary;
- self-conditioning: every step after the first feeds the previous step's temperature-scaled
  logits back in.  On part of the batches a no-grad first pass runs on a noisier canvas (the
  previous step accepted fewer positions), its logits are divided by a temperature from the
  sampler's schedule (t in [t_min, t_max]) and fed to the second pass;
- the sampler's accepted positions hold the model's own *samples*, not the truth.  With
  `self_correction` > 0, a self-conditioned batch puts the first pass's sample (at its
  temperature) at that share of the positions the first pass saw as noise and the second sees as
  accepted; `self_correction_max_entropy` keeps it to positions the sampler could have accepted
  (low entropy), so open-ended text, where the truth is one of many good samples, is left alone.
  Trained on uniform noise alone, every plausible token on the canvas is the truth, so the model
  copies a wrong accepted token with near-zero entropy and the sampler keeps it; with its own
  slips on the canvas it learns to doubt them, and the sampler re-noises them;
- the sampler can commit later structure before what precedes it is settled: a JSON key's closing
  `":` placed while the value in front of it still has no length, so the key must then be squeezed
  or stretched into the slot (experiments/2026-11-25-gather-retrain/key_commits.py).  With
  `shift_correction` > 0, that share of the examples holds its accepted tokens, from a random cut
  on, one or two positions off; the loss still targets the truth, so the model learns to doubt
  structure that does not line up with the text before it, and the sampler can re-noise it;
- the block is committed from the argmax at every position, so the loss is cross-entropy of the
  clean target at all canvas positions, noised or not, <eos> tail included.

`forward` computes no loss, so it is computed here.  Contexts are right-padded: pads get masked
out of the encoder and of the decoder's view of the cache, and the canvas positions start right
after each row's own context, exactly as in `generate` (tests/test_training.py checks that a
padded batch gives the same logits as one row at a time).

    loss, stats = diffusion_loss(model, batch, self_condition=True, self_correction=1.0,
                                 self_correction_max_entropy=0.1, generator=g)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

MIN_NOISE = 0.02  # smallest fraction of positions noised (r = 0 teaches nothing)
FULL_NOISE_SHARE = 0.1  # share of examples with a fully random canvas: the sampler's first step
T_MIN, T_MAX = 0.4, 0.8  # the checkpoint's temperature schedule (generation defaults)


def to_device(batch: dict, device) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v).to(device, non_blocking=True) for k, v in batch.items()}


def encode_context(model, batch: dict[str, torch.Tensor]):
    """Run the encoder over the (right-padded) clean context; returns the KV cache the decoder reads."""
    ids = batch["context_ids"]
    positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0).expand_as(ids)
    out = model.model.encoder(input_ids=ids, attention_mask=batch["context_mask"], position_ids=positions)
    return out.past_key_values


def decoder_logits(model, cache, canvas: torch.Tensor, batch: dict[str, torch.Tensor], self_conditioning_logits=None):
    """(B, canvas, vocab) float32 logits for `canvas`, given the encoded context."""
    canvas_length = canvas.shape[1]
    mask = torch.cat([batch["context_mask"], torch.ones_like(canvas, dtype=torch.bool)], dim=1)
    positions = batch["context_length"][:, None] + torch.arange(canvas_length, device=canvas.device)[None, :]
    return model(
        past_key_values=cache,
        decoder_input_ids=canvas,
        decoder_attention_mask=mask,
        decoder_position_ids=positions,
        self_conditioning_logits=self_conditioning_logits,
    ).logits


def noise_levels(batch_size: int, *, device, generator=None) -> torch.Tensor:
    """r per example: uniform in [MIN_NOISE, 1], with FULL_NOISE_SHARE of rows fully noised."""
    r = MIN_NOISE + (1 - MIN_NOISE) * torch.rand(batch_size, 1, device=device, generator=generator)
    full = torch.rand(batch_size, 1, device=device, generator=generator) < FULL_NOISE_SHARE
    return torch.where(full, torch.ones_like(r), r)


def replace_with_noise(target: torch.Tensor, noised: torch.Tensor, vocab_size: int, generator=None) -> torch.Tensor:
    random_ids = torch.randint(0, vocab_size, target.shape, device=target.device, generator=generator)
    return torch.where(noised, random_ids, target)


def place_own_samples(canvas: torch.Tensor, newly_accepted: torch.Tensor, scaled_logits: torch.Tensor, share: float,
                      max_entropy: float | None = None, generator=None) -> torch.Tensor:
    """`canvas` with the sampler's own samples (one multinomial draw per position from `scaled_logits`)
    at `share` of the `newly_accepted` positions; with `max_entropy`, only where the logits' entropy is
    below it, as the sampler accepts low-entropy positions only.  Every other position is left as it was."""
    own = newly_accepted & (torch.rand(canvas.shape, device=canvas.device, generator=generator) < share)
    # the same entropy the capture records (backends/capture.py)
    distribution = torch.distributions.Categorical(logits=scaled_logits.float(), validate_args=False)
    if max_entropy is not None:
        own &= distribution.entropy() < max_entropy
    probabilities = distribution.probs.reshape(-1, scaled_logits.shape[-1])
    samples = torch.multinomial(probabilities, 1, generator=generator).view(canvas.shape)
    return torch.where(own, samples, canvas)


def shift_accepted(canvas: torch.Tensor, target: torch.Tensor, accepted: torch.Tensor, content_length: torch.Tensor,
                   share: float, max_shift: int = 2, generator=None) -> torch.Tensor:
    """`canvas` where, in `share` of the rows, the `accepted` positions from a random cut inside the content
    onward hold the target shifted by 1 to `max_shift` positions, either way (clamped at the canvas's
    ends): later structure committed at the wrong offset.  Every other position is left as it was."""
    batch_size, length = canvas.shape
    device = canvas.device
    rows = torch.rand(batch_size, 1, device=device, generator=generator) < share
    cut = (torch.rand(batch_size, 1, device=device, generator=generator) * content_length[:, None]).long()
    size = torch.randint(1, max_shift + 1, (batch_size, 1), device=device, generator=generator)
    sign = torch.where(torch.rand(batch_size, 1, device=device, generator=generator) < 0.5, -1, 1)
    index = torch.arange(length, device=device)[None, :]
    shifted = target.gather(1, (index - size * sign).clamp(0, length - 1))
    return torch.where(rows & accepted & (index >= cut), shifted, canvas)


def diffusion_loss(model, batch: dict[str, torch.Tensor], *, self_condition: bool, self_correction: float = 0.0,
                   self_correction_max_entropy: float | None = None, shift_correction: float = 0.0, generator=None,
                   normalizer: float | None = None):
    """Cross-entropy of the clean block from a noised canvas; returns (loss, detached stats).

    `self_correction` (self-conditioned batches only): share of the positions accepted since the
    first pass that hold the first pass's sample instead of the clean target; with
    `self_correction_max_entropy`, only positions where that pass's entropy was below it.
    `shift_correction`: share of the examples whose accepted tokens, from a random cut on, sit one or
    two positions off (shift_accepted; before the own samples go in).
    The loss is the mean over every canvas position, or with `normalizer` their sum divided by it:
    a part of a batch on a short canvas passes (examples in the whole batch) x (full canvas length),
    so its positions weigh what they would on the full canvas (the <eos> fill it leaves out costs
    next to nothing once learnt).
    """
    target = batch["target"]
    batch_size, canvas_length = target.shape
    vocab_size = model.config.text_config.vocab_size
    device = target.device

    r = noise_levels(batch_size, device=device, generator=generator)
    u = torch.rand(target.shape, device=device, generator=generator)
    noised = u < r
    canvas = replace_with_noise(target, noised, vocab_size, generator)
    if shift_correction > 0:  # no draws at 0: runs without it keep their random streams
        canvas = shift_accepted(canvas, target, ~noised, batch["content_length"], shift_correction,
                                generator=generator)
    cache = encode_context(model, batch)

    sc_logits = None
    if self_condition:
        # the previous step saw more noise: r_prev >= r, so its noised set contains this one
        r_prev = r + (1 - r) * torch.rand(batch_size, 1, device=device, generator=generator)
        previous = replace_with_noise(target, u < r_prev, vocab_size, generator)
        with torch.no_grad():
            first = decoder_logits(model, cache, previous, batch)
        temperature = T_MIN + (T_MAX - T_MIN) * torch.rand(batch_size, 1, 1, device=device, generator=generator)
        scaled = first / temperature
        sc_logits = scaled.to(model.model.decoder.embed_tokens.weight.dtype)
        if self_correction > 0:
            canvas = place_own_samples(canvas, (u < r_prev) & ~noised, scaled, self_correction,
                                       self_correction_max_entropy, generator)

    logits = decoder_logits(model, cache, canvas, batch, sc_logits)
    token_loss = F.cross_entropy(logits.reshape(-1, vocab_size), target.reshape(-1), reduction="none").view_as(target)
    loss = token_loss.mean() if normalizer is None else token_loss.sum() / normalizer

    with torch.no_grad():
        content = torch.arange(canvas_length, device=device)[None, :] < batch["content_length"][:, None]
        correct = logits.argmax(-1) == target
        noised_content = noised & content
        stats = {
            "loss": loss.detach(),
            "content_loss": token_loss[content].mean(),
            "noised_content_accuracy": correct[noised_content].float().mean(),
            "tail_accuracy": correct[~content].float().mean() if (~content).any() else torch.ones((), device=device),
        }
    return loss, stats
