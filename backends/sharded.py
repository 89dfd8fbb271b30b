"""DiffusionGemma across several processes of one host: the plans, who is rank 0, and lockstep.

Launched by torchrun (the code never spawns its own processes); every rank loads its shard and
runs the same `model.generate` in lockstep; rank 0 records, the followers record nothing (they run
under the capture only to vote on rank 0's stop, `agreed`):

    torchrun --nproc-per-node 4 -m visualizer record --parallel expert --model M --demo acrostic --out run.json

    config = distributed_config("expert", world_size())       # -> from_pretrained(distributed_config=...)
    if is_follower(): backend.follow(prompt, settings)         # the same generate, nothing recorded

A server (the app: `torchrun --nproc-per-node 2 app.py --parallel expert`) runs many requests:
rank 0 holds a `Leader` that announces each one and runs it; every other rank sits in
`follow_requests(backend)` until rank 0 says goodbye.

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
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

TEXT_MODELS = ("model.decoder", "model.encoder.language_model")  # tied: the decoder's weights are the checkpoint's
REPLICATED = {"lm_head": "replicate", "model.encoder.language_model.embed_tokens": "replicate"}
ATTENTION_AND_DENSE = tuple(
    f"layers.*.{name}" for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                    "self_attn.q_norm", "self_attn.k_norm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
)
PARALLEL_KINDS = ("expert", "tensor", "tensor+expert", "layers")
KEEP_ALIVE = "keep-alive"  # announced by an idle leader, so that a follower's wait never meets the group's timeout
# transformers opens the process group with a 2-hour timeout: a follower waiting longer for the next
# request would fail its broadcast and end the server; a keep-alive a minute costs one tiny broadcast.
KEEP_ALIVE_S = 60.0
LOST_WAIT_S = 2.0  # after a failed collective, how long a dying rank's process is given to be gone
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


# ---- lockstep: one request at a time, stopped on every rank at once ------------------------------
RANKS_DISAGREE = (
    "The ranks' canvases differ: the GPUs computed different numbers for the parts every rank runs whole, so the "
    "sharded model is no longer one model. The run stopped here; its steps so far are kept. docs/sharded.md "
    "(\"Ranks that disagree\") says why this can happen."
)


def agreed(flag: bool, canvas=None) -> bool:
    """True on every rank when any rank's `flag` is true: one tiny all-reduce, called by all ranks alike.

    The capture's vote (`capture_steps(agree=agreed)`): it asks at each block's start and before each
    step, on every rank (followers run it too, recording nothing), so a stop, a closed browser or a
    recording error on rank 0 ends the run on all ranks between the same two steps, and every rank is
    ready for the next request.

    Before a step it also gets the canvas that step denoises, which every rank must hold alike (each
    samples it from the same all-reduced logits with the same seed). The same all-reduce carries its
    fingerprint; where the ranks' fingerprints differ, every rank raises RanksDisagree at this vote."""
    import torch
    import torch.distributed as dist

    from .base import RanksDisagree

    # this rank's GPU, named: the current device is per thread, and the vote runs on the generation thread
    device = torch.device("cuda", local_rank()) if dist.get_backend() == "nccl" else torch.device("cpu")
    fingerprint = torch.zeros((), dtype=torch.int64, device=device) if canvas is None else canvas_fingerprint(canvas).to(device)
    # MAX of (flag, f, -f): any rank's stop, and the largest and (negated) smallest fingerprint
    vote = torch.stack([torch.tensor(int(bool(flag)), device=device), fingerprint, -fingerprint])
    dist.all_reduce(vote, op=dist.ReduceOp.MAX)
    stop, highest, minus_lowest = vote.tolist()
    if highest != -minus_lowest:
        raise RanksDisagree(RANKS_DISAGREE)
    return bool(stop)


def canvas_fingerprint(canvas):
    """One int64, on the canvas's device (no copy to the host): every token id times its 1-based
    position, summed. One changed token always changes it; several could cancel out only by an exact
    coincidence, and a divergence that did would show at a later step."""
    import torch

    ids = canvas.reshape(-1).to(torch.int64)
    return (ids * torch.arange(1, ids.numel() + 1, device=ids.device)).sum()


def announce(request) -> None:
    """Rank 0: send the next request (prompt, settings) to the followers; None tells them to leave,
    KEEP_ALIVE only that rank 0 is still there."""
    import torch.distributed as dist

    dist.broadcast_object_list([request], src=0)


def serve(backend) -> int:
    """A follower's life: wait for each request rank 0 announces and run it in lockstep, until None.

    Returns how many requests it ran. A request rank 0 refuses (bad prompt, bad knobs) is refused here
    too, before any collective, by the same `check`."""
    import torch.distributed as dist

    served = 0
    while True:
        box = [None]
        dist.broadcast_object_list(box, src=0)
        if box[0] is None:
            return served
        if box[0] == KEEP_ALIVE:
            continue
        prompt, settings = box[0]
        try:
            backend.follow(prompt, settings)
        except Exception as exc:  # noqa: BLE001  refused or stopped like rank 0; the next request decides
            from .base import BackendError, GenerationCancelled

            if not isinstance(exc, (BackendError, GenerationCancelled)):
                raise
        served += 1


# ---- a sharded server: rank 0 leads, the followers follow, and a rank that stops is named ---------
def meet() -> list[tuple[str, int]]:
    """Every rank's (host name, process id), in rank order: one all-gather at start-up, by the leader
    and every follower."""
    import socket

    import torch.distributed as dist

    ranks = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, (socket.gethostname(), os.getpid()))
    return ranks


def process_gone(pid: int) -> bool:
    """True once the process has ended (a zombie that torchrun has not reaped yet counts as ended).
    For processes of this host only: rank 0 looks at the followers that share its host."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except (OSError, IndexError):  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


class Leader:
    """Rank 0 of a sharded server (the app under torchrun): runs one request at a time in lockstep
    with the followers (`follow_requests`), names a follower whose process has ended, and tells the
    followers to leave at the end.

        leader = Leader(backend)                        # rank 0, after load_backend(..., parallel=KIND)
        for batch in leader.run_records(prompt, settings, trace=trace, stop=stop): ...
        leader.problem()                                # None, or why no request can run any more
        leader.close()                                  # at exit: announce(None), the followers leave

    Every collective of rank 0 (announce, the run's all-reduces, the stop votes, keep-alives) happens
    under one lock, so the ranks always meet in the same sequence whoever asks. A stop (or a closed
    stream) ends a run on every rank between the same two steps; a refused request fails before
    anything is announced; an error of the capture's own (rank 0 records, the others do not) is held
    until the next vote and ends the run on every rank at the same step (`capture_steps(agree=...)`),
    so the server goes on; so do ranks whose canvases differ (RanksDisagree, raised at a vote). Any
    other error inside rank 0's `generate` (one the followers do not meet, e.g. running out of GPU
    memory on rank 0 alone) leaves the followers inside theirs, so it ends the server's runs too, with
    the error and "restart torchrun".
    A dead follower: with gloo the run's next collective fails at once (its socket closes), and the
    run ends with "rank 1 of 2 stopped ..." instead of gloo's error; with NCCL it would wait for the
    group's timeout. torchrun notices a dead worker within its monitor interval (0.1 s) and sends
    SIGTERM to the others: the app turns that into `end(problem)` (app.py)."""

    def __init__(self, backend, *, keep_alive_s: float | None = None):
        import socket

        self.backend = backend
        here = socket.gethostname()  # a follower on another host (torchrun --nnodes) cannot be looked at: None
        self.pids = [pid if host == here else None for host, pid in meet()]
        self.keep_alives = 0  # sent so far (the tests read it)
        keep_alive_s = KEEP_ALIVE_S if keep_alive_s is None else keep_alive_s  # 0: none
        self._lock = threading.Lock()  # one request, keep-alive or goodbye at a time on the process group
        self._ended: str | None = None  # why no request runs any more (a lost rank, a failed run, a shutdown)
        self._out_of_step = False  # a run failed on rank 0 alone: the followers cannot hear a goodbye
        self._stop: threading.Event | None = None  # the run in flight's stop
        self._idle_since = time.monotonic()
        self._closed = threading.Event()
        # set when a run failed on rank 0 alone and torchrun has restarts left: the server should end now,
        # so that torchrun restarts the whole group (the app waits on it)
        self.restarting = threading.Event()
        if keep_alive_s:
            threading.Thread(target=self._keep_alive, args=(keep_alive_s,), name="sharded-keep-alive", daemon=True).start()

    @property
    def closing(self) -> bool:
        """`close` was called: the server is on its way out."""
        return self._closed.is_set()

    # ---- what went wrong ----
    def stopped_ranks(self) -> list[int]:
        return [r for r, pid in enumerate(self.pids) if r and pid is not None and process_gone(pid)]

    def lost(self, wait: float = 0.0) -> str | None:
        """One line naming the followers whose process has ended, None while all run. `wait`: seconds
        given to a dying rank to be gone (a failed collective can come a moment before its exit)."""
        deadline = time.monotonic() + wait
        gone = self.stopped_ranks()
        while not gone and time.monotonic() < deadline:
            time.sleep(0.05)
            gone = self.stopped_ranks()
        if not gone:
            return None
        ranks = f"rank {gone[0]}" if len(gone) == 1 else "ranks " + ", ".join(map(str, gone))
        return (f"{ranks} of {len(self.pids)} stopped (its process ended; torchrun's log says why): the sharded "
                "model can't run any more. Restart torchrun.")

    def problem(self) -> str | None:
        """Why no request can run (a follower stopped, the server is shutting down); None when they can."""
        return self.lost() or self._ended

    def end(self, reason: str) -> None:
        """No request runs after this: the run in flight stops at its next step (on every rank, while
        they all live) and later requests are refused with `reason`. With NCCL a rank that died leaves
        the others inside its collective for ever, so the run is also abandoned: it ends with `reason`
        `ABANDON_GRACE_S` later whether or not the model gets there (`base.Stop`)."""
        self._ended = self._ended or reason
        stop = self._stop
        if stop is not None:
            stop.abandon(self._ended)

    # ---- running requests ----
    def run_records(self, prompt: str, settings, *, trace, stop: threading.Event) -> Iterator[list]:
        """`backends.run_records` in lockstep: checks the request, announces it to the followers and
        runs it on rank 0, holding the lock until the run's end. Raises BackendError (a bad request, or
        `problem()`) at the first batch, before anything is announced."""
        from .base import Stop
        from .run import run_records

        with self._lock:
            self._stop = stop = Stop(linked=stop)  # the caller's stop, and `end`'s abandon
            try:
                problem = self.problem()
                if problem:
                    from .base import BackendError

                    raise BackendError(problem)
                self.backend.check(prompt, settings)  # refused here: the followers never hear of it
                self._announce((prompt, settings))
                yield from run_records(self, prompt, settings, trace=trace, stop=stop)
            finally:
                self._stop = None
                self._idle_since = time.monotonic()

    def generate_batches(self, prompt: str, settings, stop) -> Iterator[list]:
        """The backend's batches, with a failed run's error replaced by the name of the rank that stopped."""
        from visualizer.records import FINISH_ERROR, RunEnd

        from .base import FailedInStep
        from .process_group import abandon_process

        for batch in self.backend.generate_batches(prompt, settings, stop):
            end = batch[-1]
            if isinstance(end, RunEnd) and end.finish_reason == FINISH_ERROR:
                lost = self.lost(wait=LOST_WAIT_S)
                if lost:
                    self.end(lost)
                    batch = [*batch[:-1], replace(end, error=lost)]
                elif isinstance(self.backend.last_failure, FailedInStep):
                    pass  # raised at a vote (a held recording error, ranks that disagree): every rank stopped there
                else:  # rank 0 left `generate` mid-way: the others may wait in its next collective for ever
                    self._out_of_step = True
                    self.end(out_of_step_message(end.error))
                    # the followers sit in a collective for good: destroying the group would wait for them
                    abandon_process("a run failed on rank 0 alone: the other ranks wait in a collective it never joins")
                    if restarts_left() > 0:
                        self.restarting.set()  # the app closes, rank 0 exits 1, torchrun restarts every rank
                    batch = [*batch[:-1], replace(end, error=self._ended)]
            yield batch

    def _announce(self, request) -> None:
        try:
            announce(request)
        except Exception as exc:  # noqa: BLE001  a follower's socket closed (gloo): say which one
            from .base import BackendError

            lost = self.lost(wait=LOST_WAIT_S) or f"The other ranks did not answer ({_first_line(exc)}): restart torchrun."
            self.end(lost)
            raise BackendError(lost) from None

    def _keep_alive(self, every: float) -> None:
        while not self._closed.wait(min(every, 5.0)):
            if self.problem() or time.monotonic() - self._idle_since < every or not self._lock.acquire(blocking=False):
                continue
            try:
                if not self._closed.is_set():
                    self._announce(KEEP_ALIVE)
                    self.keep_alives += 1
            except Exception:  # noqa: BLE001  said by problem() from now on
                pass
            finally:
                self._idle_since = time.monotonic()
                self._lock.release()

    def close(self, timeout: float = 60.0) -> bool:
        """At exit: stop a run in flight, then tell the followers to leave (announce None). Returns
        whether they were told (not when one has stopped: nobody listens then)."""
        self._closed.set()
        self.end("This server is shutting down.")
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            if self._out_of_step or self.lost():
                return False
            announce(None)
            return True
        except Exception:  # noqa: BLE001  a follower went meanwhile
            return False
        finally:
            self._lock.release()


def restarts_left() -> int:
    """How many more times torchrun restarts this job when a worker fails (its --max-restarts)."""
    return int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) - int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def out_of_step_message(error: str | None) -> str:
    """What a visitor reads when a run failed on rank 0 alone (e.g. out of GPU memory there): the other
    ranks wait in a collective rank 0 never joins, so only a new group can run again."""
    said = f"{(error or 'The run failed').rstrip('.')}. Rank 0 failed alone, so the other ranks are out of step"
    if restarts_left() > 0:
        return f"{said}: the server restarts the sharded model now (torchrun --max-restarts); try again in a minute."
    return f"{said}: restart torchrun (started with --max-restarts N, it restarts by itself)."


def follow_requests(backend) -> int:
    """A follower's life in a sharded server: meet the leader, run every request it announces in
    lockstep (`serve`), leave when it says so. Returns the exit status: 0 when told to leave, 1 when
    the leader went first (its collective failed).

    Ctrl-C reaches every rank of a terminal's torchrun: a follower ignores it and leaves when rank 0,
    which shuts down on it, says so. SIGTERM (torchrun ending the job) takes effect when the collective
    it waits in returns (rank 0's goodbye, or the error of its end), so a follower that is still
    there when rank 0 looks was not the one that stopped. With NCCL a collective that never completes
    holds the thread in a host sync without letting go of the interpreter lock (on 2 H100s, with the wait
    moved to a second thread, the main thread's SIGTERM handler never ran), so torchrun's SIGKILL, 30 s
    after its SIGTERM, ends such a follower."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _leave)
    meet()
    try:
        serve(backend)
    except Exception as exc:  # noqa: BLE001  the leader's process ended: its sockets closed
        print(f"rank {rank()}: rank 0 is gone ({_first_line(exc)}); leaving.", file=sys.stderr)
        return 1
    return 0


def _leave(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__
