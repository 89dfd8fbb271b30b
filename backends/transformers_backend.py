"""Transformers backend: DiffusionGemmaForBlockDiffusion on CUDA (bf16) or CPU (float32).

Loads the real checkpoint (`google/diffusiongemma-26B-A4B-it`, with its processor and chat
template, placed on the GPU with `device_map`) or any local folder saved by `save_pretrained`
(the project's small models, with their own tokenizer), through the same `from_pretrained` path.

    backend = TransformersBackend("assets/models/diffusiongemma-tiny-demo")
    for record in backend.generate("Write a haiku about rain", GenerationSettings(seed=0)):
        print(type(record).__name__)

`model.generate` runs inside `capture_steps` on the backend's one generation thread (`_launch`);
records reach the caller through a bounded queue as soon as each step ends.  Closing the generator or setting `stop`
ends the run between two steps.  Several prompts run as one batched call (`Backend.generate_rows`),
left-padded with an attention mask (`batch_inputs`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import defaultdict
from concurrent.futures import Future
from pathlib import Path

import torch

# transformers' sampler calls torch.compiler.cudagraph_mark_step_begin() at every step, and the first
# call imports this module, which stashes Python objects in the importing thread's C++ thread-locals.
# On a generation worker those are freed after the thread has left Python; when that happens while
# the interpreter is shutting down, freeing them aborts the process ("terminate called without an
# active exception": twice in CI, 2 of ~250 CLI runs here).  Imported here, the stash belongs to
# the thread that imports the backend (the main thread), never to a worker.
import torch._inductor.cudagraph_trees  # noqa: F401  (imported for its side effect)

from visualizer.records import ModelInfo
from visualizer.samplers import BUDGET_ENTROPY_BOUND, SAMPLER_ENTROPY_BOUND, AcceptRule, SamplerSpec
from visualizer.settings import DEFAULT_RECORD_TOPK, GenerationSettings, with_defaults

from . import sharded
from .base import COMMON_KNOBS, Backend, BackendError, Capabilities
from .capture import capture_steps
from .kl_to_final import KlToFinal, check_block
from .layer_capture import decoder_layers  # importing it makes torch.compile guard module hooks (its docstring)
from .compile_cache import bucket_length, first_compile, shape_key, trace_alike_in_every_process, use_compile_cache
from .model_thread import ModelThread, stop_thread
from .process_group import note_compiled_run
from .sharded_server import agreed
from .vote_errors import FailedInStep
from .known import REAL_CHECKPOINT, REAL_CHECKPOINT_BF16_GB, load_failure_message, looks_like_path, on_zero_gpu

ENTROPY_BOUND = SamplerSpec(
    SAMPLER_ENTROPY_BOUND,
    "Entropy-bound (transformers' rule): each step accepts the lowest-entropy positions whose summed entropy "
    "stays within the bound and recomputes that set from scratch, so a token accepted at one step can turn "
    "back into noise at the next (remasked).",
    AcceptRule(renoises=True, last_step_samples=True, budget=BUDGET_ENTROPY_BOUND),
    knobs=frozenset({"entropy_bound", "t_min", "t_max"}),
    fork_knobs=frozenset({"entropy_bound", "t_min", "t_max"}),  # the sampler's attribute, the schedule's (interventions.py)
)
CAPABILITIES = Capabilities(
    knobs=COMMON_KNOBS | {"sampler", "compiled", "pins", "layers", "record_shift", "kl_to_final"},
    samplers=(ENTROPY_BOUND,),
    max_batch=None,  # as many prompts as the GPU's memory holds
    interventions=frozenset({"set", "remask", "forbid", "nudge", "topk", "knob"}),  # forks (backends/interventions.py)
)


_LAUNCH_LOCK = threading.Lock()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class TransformersBackend(Backend):
    name = "transformers"
    capabilities = CAPABILITIES
    runs_in_order = True  # every run on the one model thread (`_launch`)
    parallel: str | None = None  # how the model is spread (backends/sharded.py); None: whole, in this process
    fork_plan = None  # a fork's interventions, set for its one run by `interventions.fork_trace`; None: none

    def __init__(
        self,
        source: str,
        *,
        device: str | None = None,
        dtype: str | None = None,
        display_name: str | None = None,
        builtin: bool = False,
        parallel: str | None = None,
    ):
        from transformers import DiffusionGemmaForBlockDiffusion
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the app and the CLI print their own progress

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BackendError("CUDA was asked for but no CUDA GPU is visible to PyTorch on this machine.")
        torch_dtype = getattr(torch, dtype) if dtype else (torch.bfloat16 if device.startswith("cuda") else torch.float32)
        local = Path(source).expanduser()
        is_local = local.is_dir()
        if not is_local and looks_like_path(source):
            raise BackendError(f"No model folder at {source}.")
        # ZeroGPU: the GPU exists only inside `spaces.GPU` calls; the model is placed with a plain
        # .to("cuda") at start-up, which ZeroGPU records and replays.
        zero_gpu = on_zero_gpu()
        # Several processes (torchrun): each loads its shard (backends/sharded.py); "layers" is one process.
        spread = _parallel_kwargs(parallel, str(local) if is_local else source, device)
        self.parallel = parallel
        if parallel in sharded.TORCHRUN_KINDS:  # before any compile: ranks that compile alike compute alike
            sharded.compile_alike()
        # A ZeroGPU slice has 70 GB, it cannot be asked before a call; "layers" lets accelerate fit what it can.
        if source == REAL_CHECKPOINT and not zero_gpu and parallel != "layers":
            _check_room_for_real_checkpoint(device, parts=sharded.world_size() if "distributed_config" in spread else 1)
        device_map = device if device.startswith("cuda") and not zero_gpu else None
        if spread:
            device_map = spread.pop("device_map", None)
        try:
            self.tokenizer = load_tokenizer(str(local) if is_local else source)
            self.model = DiffusionGemmaForBlockDiffusion.from_pretrained(
                str(local) if is_local else source,
                dtype=torch_dtype,
                device_map=device_map,
                **spread,
            ).eval()
        except torch.cuda.OutOfMemoryError:
            raise BackendError(f"Out of GPU memory while loading {source}.") from None
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise BackendError(load_failure_message(source, exc, what="a DiffusionGemma model", is_folder=is_local)) from None
        if device_map is None and not spread:
            self.model.to(device)
        trace_alike_in_every_process(self.model)  # so a compiled run's cache serves the next process
        text_config = self.model.config.text_config
        generation = self.model.generation_config
        eos = generation.eos_token_id if generation.eos_token_id is not None else text_config.eos_token_id
        eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else ((eos,) if eos is not None else ())
        pad = generation.pad_token_id if generation.pad_token_id is not None else text_config.pad_token_id
        self.info = ModelInfo(
            name=display_name or (local.name if is_local else source),
            source=str(local.resolve()) if is_local else source,
            backend=self.name,
            device=_where(self.model, parallel),
            dtype=_dtype_name(self.model.dtype),
            canvas_length=int(self.model.config.canvas_length),
            vocab_size=int(text_config.vocab_size),
            eos_token_ids=eos_ids,
            pad_token_id=pad,
            max_context=int(text_config.max_position_embeddings),
            builtin=builtin,
            parameters=sum(p.numel() for p in {id(p): p for p in self.model.parameters()}.values()),
            layers=len(decoder_layers(self.model)),
        )

    @classmethod
    def from_model(cls, model, tokenizer, info: ModelInfo) -> "TransformersBackend":
        """A backend around a model built elsewhere, loaded as it is (a benchmark's full-shape random
        model, which no folder holds); the model's generation config gives the defaults."""
        backend = cls.__new__(cls)
        backend.model, backend.tokenizer, backend.info = model, tokenizer, info
        trace_alike_in_every_process(model)
        return backend

    def on_model_thread(self, fn) -> Future:
        """Run `fn` where this backend's runs run (its one generation thread, `_launch`): stock
        `model.generate` timed beside captured runs shares their CUDA graphs (benchmarks)."""
        return self._launch(fn)

    # ---- the interface ---------------------------------------------------------------------
    def _launch(self, work) -> Future:
        """Every run on this backend's one generation thread, started at the first run.

        One thread for the model's life, not one per run, because of torch.compile's CUDA graphs
        (`compiled`): inductor keeps their trees in thread-locals (`cudagraph_trees.local`). On a
        fresh thread torch 2.11 fails with a bare AssertionError (the probe's compiled runner died of
        it), and later versions start a new tree there, recording every graph again at each run.
        The thread holds its own trees as Python thread-locals (`_own_cuda_graph_trees`), which
        go with the thread; nothing is stashed in C++ thread-locals, whose clean-up at exit once
        aborted the process (see the import at the top)."""
        with _LAUNCH_LOCK:  # two first runs started at once (the probe starts the next batch early) share one thread
            if getattr(self, "_thread_pid", None) != os.getpid():  # none yet, or made before a fork (ZeroGPU's worker)
                self._thread, self._thread_pid = ModelThread(f"{self.name}-generate"), os.getpid()
                self._stop_thread = weakref.finalize(self, stop_thread, self._thread)
                self._thread.submit(_own_cuda_graph_trees)
            return self._thread.submit(work)

    def default_settings(self) -> GenerationSettings:
        g = self.model.generation_config
        bound = getattr(g.sampler_config, "entropy_bound", None) if g.sampler_config is not None else None
        return GenerationSettings(
            **with_defaults(max_new_tokens=g.max_new_tokens, max_denoising_steps=g.max_denoising_steps,
                            entropy_bound=bound, t_min=g.t_min, t_max=g.t_max),
            seed=0,
            sampler=SAMPLER_ENTROPY_BOUND,
            temperature=None,
            compiled=False,
            record_topk=DEFAULT_RECORD_TOPK,
            record_shift=True,
        )

    def prompt_ids(self, prompt: str, *, thinking: bool = False) -> list[int]:
        return self.templated_ids(prompt, thinking)

    def generate_kwargs(self, settings: GenerationSettings) -> dict:
        """The exact `model.generate` arguments for resolved settings (also used by the tests)."""
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

        self.capabilities.sampler(settings.sampler)  # anything else is refused with one line
        if settings.compiled:
            note_compiled_run()  # an NCCL group can't be destroyed after it (backends/process_group.py)
        return {
            "max_new_tokens": settings.max_new_tokens,
            "max_denoising_steps": settings.max_denoising_steps,
            "sampler_config": EntropyBoundSamplerConfig(entropy_bound=float(settings.entropy_bound)),
            "t_min": float(settings.t_min),
            "t_max": float(settings.t_max),
            "cache_implementation": "static" if settings.compiled else None,
        }

    def _produce(self, ids, settings, emit, should_stop) -> None:
        self._produce_batch([ids], settings, emit, should_stop)

    def _produce_batch(self, rows_ids, settings, emit, should_stop) -> None:
        kwargs = self.generate_kwargs(settings)
        model = self.model  # a local reference: close() from another session must not pull it away mid-run
        input_ids, attention_mask = self.model_inputs(rows_ids, settings, model.device)
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        to_final, on_block = None, emit
        if settings.kl_to_final:  # a first, silent pass keeps each block's final distribution (backends/kl_to_final.py)
            to_final, on_block = self._final_distributions(model, input_ids, kwargs, settings, emit, should_stop)
        torch.manual_seed(settings.seed)  # once per batch; seeds the CPU and every CUDA device
        topk = min(settings.record_topk, self.info.vocab_size)
        # sharded: every rank votes at each step, so the followers stop (or fail) where this rank does
        agree = agreed if self.parallel in sharded.TORCHRUN_KINDS else None
        watch = capture_steps(
            model, emit, on_block, should_stop, topk=topk, agree=agree, shift=bool(settings.record_shift),
            layers=tuple(settings.layers or ()), pins=self.pinned_ids(settings), edits=self.fork_plan, to_final=to_final,
        )
        # compiled: module hooks are guarded (layer_capture), so layer hooks cost one recompile
        with self._compile_once(settings, input_ids.shape), watch:
            model.generate(input_ids, **kwargs)

    def record_refilled(self, prompts, seeds, settings, *, rows, stop=None, exact=True):
        from .refill import refill_traces  # torch's loop of our own, loaded by the runs that use it

        return refill_traces(self, prompts, seeds, settings, rows=rows, stop=stop, exact=exact)

    def _final_distributions(self, model, input_ids, kwargs, settings, emit, should_stop):
        """Pass 1 of --kl-to-final: the run with the same seed, recording nothing but each block's final
        distribution; (pass 2's processor, pass 2's on_block that checks it commits what pass 1 did)."""
        first, blocks = KlToFinal(), []
        torch.manual_seed(settings.seed)
        with self._compile_once(settings, input_ids.shape), capture_steps(
                model, lambda step: None, blocks.append, should_stop, pins=self.pinned_ids(settings), edits=self.fork_plan,
                to_final=first):
            model.generate(input_ids, **kwargs)
        return first.second_pass(), check_block(emit, blocks)

    def model_inputs(self, rows_ids, settings: GenerationSettings, device) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`batch_inputs` as this backend runs them: a compiled batch of several rows is padded to a
        length bucket (`compile_cache.bucket_length`), so a long probe run compiles a bounded number of
        graphs. Not a batch of one: that is exactly the single-prompt run, bit for bit as plain
        `generate` on its prompt (padding changes the numbers); nor a sharded model, whose followers run
        the prompt as it is (`follow`)."""
        pad_to = None
        if (settings.compiled and len(rows_ids) > 1 and self.info.pad_token_id is not None
                and self.parallel not in sharded.TORCHRUN_KINDS):
            pad_to = bucket_length(max(len(ids) for ids in rows_ids))
        return batch_inputs(rows_ids, self.info.pad_token_id, device, pad_to=pad_to)

    def _compile_once(self, settings: GenerationSettings, shape):
        """Compiled: the host's inductor cache for this torch build, and its lock for this shape
        (`compile_cache.first_compile`); not for a sharded model, whose ranks compile in lockstep."""
        if not settings.compiled or self.parallel in sharded.TORCHRUN_KINDS:
            return contextlib.nullcontext()
        rows, length = shape
        return first_compile(use_compile_cache(), shape_key(rows, length, settings.max_new_tokens, self.info.source))

    def follow(self, prompt: str, settings: GenerationSettings, *, lockstep: bool = True) -> torch.Tensor:
        """What a follower rank of a sharded model runs for one request (backends/sharded_server.py): the stock
        `model.generate` with the same ids, knobs and seed; returns the generated ids (CPU).

        The ranks meet in the same all-reduces in the same order, so the followers need no records; the
        capture on rank 0 reads only what every rank computes alike (all-reduced activations, the
        replicated head's logits) and draws no random numbers, so the ranks stay in step. In `lockstep`
        (what rank 0's `_produce` expects) it runs under the capture too, recording nothing, so that it
        votes on rank 0's stop where rank 0 asks; `lockstep=False` on every rank is the plain stock
        `generate`, the tests' reference."""
        ids = self.check(prompt, settings)
        resolved = self.resolve(settings)
        torch.manual_seed(resolved.seed)
        ignore = lambda item: None  # noqa: E731
        pins = self.pinned_ids(resolved)  # the leader pins these too: every rank samples the same canvas
        watch = capture_steps(self.model, ignore, ignore, agree=agreed, pins=pins) if lockstep else contextlib.nullcontext()
        with watch:
            out = self.model.generate(torch.tensor([ids], device=self.model.device), **self.generate_kwargs(resolved))
        return out.sequences[0, len(ids):].cpu()

    def check(self, prompt: str, settings: GenerationSettings) -> list[int]:
        ids = super().check(prompt, settings)
        if settings.layers and self.parallel in sharded.TORCHRUN_KINDS:
            # the lens runs the head on rank 0 alone, and a sharded head gathers over every rank
            raise BackendError("--layers records one whole model: it is not available with --parallel under torchrun")
        if settings.kl_to_final and self.parallel in sharded.TORCHRUN_KINDS:  # the followers would not run pass 1
            raise BackendError("--kl-to-final runs the model twice on rank 0: it is not available with --parallel under torchrun")
        return ids

    def failure_message(self, exc: BaseException) -> str:
        if isinstance(exc, FailedInStep) and exc.__cause__ is not None:  # a recording error held for the vote: say it
            exc = exc.__cause__
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return "Out of GPU memory during generation: lower max new tokens, or use a shorter prompt."
        return super().failure_message(exc)

    def close(self) -> None:
        self.model = None
        if getattr(self, "_thread", None) is not None:
            self._stop_thread()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ---- helpers -----------------------------------------------------------------------------------
def _own_cuda_graph_trees() -> None:
    """Give the calling thread its own CUDA-graph trees, as Python thread-locals (see `_launch`)."""
    from torch._inductor import cudagraph_trees as trees

    if not hasattr(trees.local, "tree_manager_containers"):
        trees.local.tree_manager_containers = {}
        trees.local.tree_manager_locks = defaultdict(threading.Lock)


def batch_inputs(rows_ids: list[list[int]], pad_token_id: int | None, device, *,
                 pad_to: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The `input_ids` (batch, longest) and `attention_mask` of a batch of prompts for `generate`.

    Padded on the left: transformers numbers positions from 0 to the longest prompt for every row
    and puts each block right after them, so a left-padded row's canvas follows its own prompt
    (rotary attention sees only relative positions) while right padding would leave a gap of pad
    between the two. The mask hides the pad from every attention. Rows of one length need no
    padding and get no mask: exactly the single-prompt call. (Checked on the built-in model: from
    the same starting canvas a left-padded row's first step matches its run alone within 2e-5
    nats, and right padding moves it by up to 2 nats; tests/test_batch_capture.py.)
    `pad_to` (a compiled run's length bucket) pads every row to that length, with a mask even when
    the rows are of one length, so every batch of the bucket has the same inputs' shapes.
    """
    longest = max(max(len(ids) for ids in rows_ids), pad_to or 0)
    if pad_to is None and all(len(ids) == longest for ids in rows_ids):
        return torch.tensor(rows_ids, device=device), None
    if pad_token_id is None:
        raise BackendError("This model's config has no pad token id, so prompts of different lengths cannot share a batch.")
    input_ids = torch.full((len(rows_ids), longest), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows_ids), longest), dtype=torch.long)
    for row, ids in enumerate(rows_ids):
        input_ids[row, longest - len(ids) :] = torch.tensor(ids)
        attention_mask[row, longest - len(ids) :] = 1
    return input_ids.to(device), attention_mask.to(device)


def _where(model, parallel: str | None) -> str:
    """The model's device, or how it is spread: "expert parallel over 4 GPUs, 16.2 GB each"."""
    if parallel in sharded.TORCHRUN_KINDS:
        return sharded.spread(model, parallel, sharded.world_size())
    placed = sorted({str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()})
    if parallel == "layers" and len(placed) > 1:
        return f"layers over {len(placed)} devices ({', '.join(placed)})"
    return str(model.device)


def load_tokenizer(source: str):
    """The checkpoint's processor tokenizer when it has one (the real model), else AutoTokenizer.

    AutoProcessor wants the image and video processors (torchvision); small local models carry
    only a tokenizer, so they skip it.
    """
    from transformers import AutoTokenizer

    folder = Path(source)
    has_processor = not folder.is_dir() or any(
        (folder / name).exists() for name in ("processor_config.json", "preprocessor_config.json")
    )
    if has_processor:
        try:
            from transformers import AutoProcessor

            return AutoProcessor.from_pretrained(source).tokenizer
        except (OSError, ValueError, ImportError, AttributeError):
            pass
    return AutoTokenizer.from_pretrained(source)


def _parallel_kwargs(parallel: str | None, source: str, device: str) -> dict:
    """The extra `from_pretrained` arguments that spread the model (empty: one process, one device)."""
    if parallel is None:  # one whole model per process, also under torchrun (data parallel: each rank its own jobs)
        return {}
    if parallel not in sharded.PARALLEL_KINDS:
        raise BackendError(f"--parallel must be one of {', '.join(sharded.PARALLEL_KINDS)} (got {parallel}).")
    if parallel == "layers":
        if sharded.under_torchrun():
            raise BackendError("--parallel layers spreads layers over the GPUs of one process: start it with python, not torchrun.")
        return {"device_map": "auto"}
    if not sharded.under_torchrun():
        raise BackendError(
            f"--parallel {parallel} runs one process per GPU: start it with torchrun --nproc-per-node N "
            f"(or use --parallel layers for one process over several GPUs)."
        )
    from transformers import AutoConfig

    try:
        sharded.check_fits(parallel, sharded.world_size(), AutoConfig.from_pretrained(source).text_config)
    except (OSError, ValueError) as exc:
        raise BackendError(str(exc)) from None
    _join_sharded_group(device)
    return {"distributed_config": sharded.distributed_config(parallel, sharded.world_size())}


def _join_sharded_group(device: str) -> None:
    """Open the group transformers would open for a sharded load (NCCL bound to this rank's GPU, or gloo;
    its 2-hour timeout), but on this torchrun attempt's own keys, so a restarted job loads again
    (`process_group.join_group`)."""
    from datetime import timedelta

    from .process_group import join_group

    if device.startswith("cuda"):
        local = torch.device("cuda", sharded.local_rank())
        torch.cuda.set_device(local)
        join_group("nccl", timeout=timedelta(hours=2), device_id=local)
    else:
        join_group("gloo", timeout=timedelta(hours=2))


def _check_room_for_real_checkpoint(device: str, *, parts: int = 1) -> None:
    if device.startswith("cuda"):
        free, total = torch.cuda.mem_get_info(sharded.local_rank())  # this rank's GPU (0 without torchrun)
        if free / 1e9 < REAL_CHECKPOINT_BF16_GB / parts + 4:
            where = "this GPU" if parts == 1 else f"each of {parts} GPUs"
            raise BackendError(
                f"{REAL_CHECKPOINT} needs about {REAL_CHECKPOINT_BF16_GB / parts:.0f} GB of GPU memory in bf16 on {where}; "
                f"this one has {free / 1e9:.0f} GB free of {total / 1e9:.0f} GB. Use an 80 GB GPU (H100/A100), "
                "more GPUs under torchrun (docs/sharded.md), or the MLX 4-bit model on a Mac."
            )
    else:
        raise BackendError(
            f"{REAL_CHECKPOINT} is a 26B-parameter model: it needs a CUDA GPU with about "
            f"{REAL_CHECKPOINT_BF16_GB} GB of memory (or the MLX 4-bit checkpoint on Apple silicon). "
            "No CUDA GPU is available here, so the built-in model stays loaded."
        )
