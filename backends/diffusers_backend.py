"""Diffusers backend: diffusers' DiffusionGemmaPipeline with any of its three schedulers.

The pipeline drives the same transformers model object the transformers backend loads (this class
inherits its loading), with `EntropyBoundScheduler`, `DiscreteDDIMScheduler` or
`BlockRefinementScheduler`; the steps are captured by `diffusers_capture.py` into the same
records and trace format as every other backend.

    backend = DiffusersBackend("assets/models/diffusiongemma-tiny-demo")
    settings = GenerationSettings(seed=0, sampler="block-refinement")
    for record in backend.generate("What is 18 plus 24?", settings): ...

On the command line `python -m visualizer record --sampler discrete-ddim ...` picks this backend
(`registry.backend_for`: the model's own backend lacks the sampler), and so does the app's sampler
picker; `--backend diffusers`, or a model source written `diffusers:<folder or hub id>`, runs every
sampler here.

What the pipeline does differently from transformers' `generate` (both read from diffusers 0.42.1):
- a block commits its last canvas (what the scheduler kept, noise included for a sampler that
  renoises), or the argmax when it converged early; transformers always commits the argmax;
- its early stop and its EOS are the tokenizer's one `eos_token_id`; the model's other end ids
  (`<turn|>`) do not end a run, while the trace's EOS and pad follow every one of them;
- DDIM and block refinement sample from the raw logits at the pipeline's `temperature` (0: argmax)
  and self-condition on the raw logits; the trace's entropy is then of the raw logits
  (`AcceptRule.entropy`), while entropy-bound's is of its annealed-temperature logits, as elsewhere.
"""

from __future__ import annotations

import torch

from visualizer.samplers import (
    BUDGET_ENTROPY_BOUND,
    ENTROPY_RAW,
    ENTROPY_SCALED,
    SAMPLER_BLOCK_REFINEMENT,
    SAMPLER_DISCRETE_DDIM,
    SAMPLER_ENTROPY_BOUND,
    AcceptRule,
    SamplerSpec,
)
from visualizer.settings import GenerationSettings

from .base import COMMON_KNOBS, Backend, BackendError, Capabilities
from .diffusers_capture import CALLBACK_TENSORS, capture_pipeline
from .diffusers_edits import DIFFUSERS_KINDS
from .registry import DIFFUSERS_SOURCE_PREFIX
from .transformers_backend import TransformersBackend


SAMPLERS = (
    SamplerSpec(
        SAMPLER_ENTROPY_BOUND,
        "Entropy-bound (diffusers' EntropyBoundScheduler): each step accepts the lowest-entropy positions whose "
        "summed entropy stays within the bound and renoises the rest, so an accepted token can turn back into noise; "
        "the block keeps its last canvas.",
        AcceptRule(renoises=True, last_step_samples=True, budget=BUDGET_ENTROPY_BOUND, entropy=ENTROPY_SCALED),
        knobs=frozenset({"entropy_bound", "t_min", "t_max"}),  # no temperature: EntropyBoundScheduler has its own t schedule
        fork_knobs=frozenset({"entropy_bound", "t_min", "t_max"}),  # a fork's knob: diffusers_edits.py
    ),
    SamplerSpec(
        SAMPLER_DISCRETE_DDIM,
        "Discrete DDIM: every step redraws each position from the uniform-noise posterior (take the predicted token, "
        "stay, or jump to noise), the noise share shrinking to zero at the last step; it reports no accepted set, so "
        "'accepted' here means the canvas holds the step's predicted token.",
        AcceptRule(renoises=True, last_step_samples=True, budget=None, entropy=ENTROPY_RAW),
        knobs=frozenset({"temperature", "corrector_steps", "corrector_k"}),
        # corrector_k is read from the scheduler's config at each sweep; corrector_steps is not: the pipeline splits
        # the step budget between predictor and corrector before the first step
        fork_knobs=frozenset({"temperature", "corrector_k"}),
    ),
    SamplerSpec(
        SAMPLER_BLOCK_REFINEMENT,
        "Block refinement: each step commits the most probable samples up to an even share of the block, plus any "
        "above the threshold; commits accumulate and the uncommitted rest is renoised.",
        AcceptRule(renoises=False, last_step_samples=True, budget=None, entropy=ENTROPY_RAW),
        knobs=frozenset({"temperature", "refine_threshold", "editing_threshold"}),
        fork_knobs=frozenset({"temperature", "refine_threshold", "editing_threshold"}),
    ),
)
# Which scheduler reads which knob is each spec's `knobs` above: a trace records the others as None, never a knob
# that did nothing.
CAPABILITIES = Capabilities(knobs=COMMON_KNOBS | {"sampler", "record_shift", "pins", "layers"}, samplers=SAMPLERS,
                            interventions=DIFFUSERS_KINDS)  # forks and warm starts (diffusers_edits.py)


def scheduler_for(settings: GenerationSettings):
    """The diffusers scheduler of resolved settings, its knobs set."""
    from diffusers import BlockRefinementScheduler, DiscreteDDIMScheduler, EntropyBoundScheduler

    if settings.sampler == SAMPLER_ENTROPY_BOUND:
        return EntropyBoundScheduler(entropy_bound=float(settings.entropy_bound), t_min=float(settings.t_min),
                                     t_max=float(settings.t_max))
    if settings.sampler == SAMPLER_DISCRETE_DDIM:
        return DiscreteDDIMScheduler(corrector_steps=int(settings.corrector_steps), corrector_k=int(settings.corrector_k))
    if settings.sampler == SAMPLER_BLOCK_REFINEMENT:
        return BlockRefinementScheduler(threshold=float(settings.refine_threshold), editing_threshold=settings.editing_threshold)
    raise BackendError(f"no diffusers scheduler for the sampler {settings.sampler!r}")


class IdsProcessor:
    """The pipeline's `processor`, handing it the prompt ids the backend already made.

    The pipeline tokenizes through `processor.apply_chat_template(...)`; given ids, the RunStart's
    `prompt_ids` are exactly what its encoder sees, thinking mode included (the pipeline has no
    switch for it). For a plain prompt these are the ids the tokenizer itself gives the stock
    pipeline (tests/test_diffusers_backend.py)."""

    def __init__(self, tokenizer, ids: list[int]):
        self.tokenizer, self.ids = tokenizer, ids

    def apply_chat_template(self, messages, **kwargs) -> dict:
        ids = torch.tensor([self.ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def batch_decode(self, sequences, **kwargs):
        return self.tokenizer.batch_decode(sequences, **kwargs)


class DiffusersBackend(TransformersBackend):
    name = "diffusers"
    capabilities = CAPABILITIES

    def __init__(self, source: str, **options):
        try:
            import diffusers  # noqa: F401
        except ImportError:
            raise BackendError("The diffusers backend needs diffusers: pip install -r requirements.txt") from None
        super().__init__(source.removeprefix(DIFFUSERS_SOURCE_PREFIX), **options)

    def default_settings(self) -> GenerationSettings:
        from diffusers import BlockRefinementScheduler, DiscreteDDIMScheduler

        ddim, refine = DiscreteDDIMScheduler().config, BlockRefinementScheduler().config
        return super().default_settings().replace(
            sampler=SAMPLER_ENTROPY_BOUND,
            temperature=0.0,  # the pipeline's default: DDIM and block refinement take the argmax
            corrector_steps=ddim.corrector_steps,
            corrector_k=ddim.corrector_k,
            refine_threshold=refine.threshold,
            editing_threshold=refine.editing_threshold,
        )

    def pipeline(self, settings: GenerationSettings, processor):
        """A DiffusionGemmaPipeline on this backend's model with the settings' scheduler."""
        from diffusers import DiffusionGemmaPipeline

        pipe = DiffusionGemmaPipeline(model=self.model, scheduler=scheduler_for(settings), processor=processor)
        pipe.set_progress_bar_config(disable=True)
        return pipe

    def call_kwargs(self, settings: GenerationSettings) -> dict:
        """The pipeline's call arguments for resolved settings (also what the tests give the stock pipeline)."""
        generator = torch.Generator(device=self.model.device).manual_seed(settings.seed)
        return {
            "gen_length": settings.max_new_tokens,
            "num_inference_steps": settings.max_denoising_steps,
            "temperature": float(settings.temperature or 0.0),  # entropy-bound ignores it (its own schedule)
            "generator": generator,
            "output_type": "seq",
        }

    # One prompt a call (`Capabilities.max_batch` 1; the capture reads the pipeline's row 0): the base class's
    # one-prompt `_produce_batch`, not the batched transformers `generate` this class otherwise inherits.
    _produce_batch = Backend._produce_batch

    def _produce(self, ids, settings, emit, should_stop) -> None:
        spec = self.capabilities.sampler(settings.sampler)
        pipe = self.pipeline(settings, IdsProcessor(self.tokenizer, ids))
        with capture_pipeline(
            pipe, emit, emit, should_stop,
            topk=min(settings.record_topk, self.info.vocab_size),
            scaled_entropy=spec.rule.entropy == ENTROPY_SCALED,
            eos_ids=self.info.eos_token_ids,
            pad_id=self.info.pad_token_id,
            confidence_sampler=spec.name == SAMPLER_BLOCK_REFINEMENT,
            shift=bool(settings.record_shift),
            layers=tuple(settings.layers or ()),
            pins=self.pinned_ids(settings),
            edits=self.fork_plan,  # a fork's or a warm start's, for this one run (interventions.fork_trace)
        ) as capture:
            out = pipe(prompt="", callback_on_step_end=capture.callback,
                       callback_on_step_end_tensor_inputs=CALLBACK_TENSORS, **self.call_kwargs(settings))
            capture.finish(out.sequences)
