"""Compiled runs: prompt lengths in a few buckets, one compile per host, a cache that trusts only its own build.

    length = bucket_length(70)                   # 256: prompts are left-padded up to a bucket
    folder = use_compile_cache()                 # TORCHINDUCTOR_CACHE_DIR, keyed by the torch build
    with first_compile(folder, shape_key(8, 128, 256)):
        model.generate(...)                      # the host's first process at this shape compiles it;
                                                 # the others wait, then load it from the cache

**Buckets.** A compiled (`cache_implementation="static"`) generate specializes on the prompt
length (the static cache is prompt + max_new_tokens long), so every new length could cost a
compile, and one compile at the real shape takes minutes (BENCHMARKS.md).  Padded to BUCKETS (one
bucket up to 256 tokens, then powers of two), a run whose longest prompt is L tokens meets at most
`len(buckets_up_to(L))` lengths: one for every prompt of the probe suite (all under 256 tokens).
The probe runner fills each seed's shorter last batch up to the plan's rows
(`cli.probe_runner.filled_prompts`), so a compiled study compiles one graph per bucket. Finer
buckets (64, 128, 192) would spare a step attention over at most 192 pad positions, at a compile each.

**One compile per host.** Inductor's caches (FX graphs, AOT autograd, Triton kernels, autotuning)
live in one folder per torch build (`cache_key`: torch, CUDA, Triton and Python versions), shared by
every process and every run of the machine: a cache of another build sits in another folder and
is never read.  Ranks that start together would all miss it at once, so `first_compile` lets one
process per shape compile while the others wait on a file lock (flock: released by the kernel if
that process dies), then find everything in the cache; a second run finds it there from the start.
Not for a sharded model, whose ranks must compile in lockstep (their collectives would deadlock).
The user's own TORCHINDUCTOR_CACHE_DIR, when set, is used as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import platform
from pathlib import Path

BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
CACHE_ROOT_ENV = "DIFFUSIONGEMMA_COMPILE_CACHE"  # where the per-build folders go (default: ~/.cache/...)
_DEFAULT_ROOT = Path.home() / ".cache" / "diffusiongemma-visualizer" / "inductor"


def bucket_length(length: int) -> int:
    """The padded length of a batch whose longest prompt has `length` tokens."""
    if length < 1:
        raise ValueError(f"a prompt has at least one token (got {length})")
    for bucket in BUCKETS:
        if length <= bucket:
            return bucket
    return -(-length // BUCKETS[-1]) * BUCKETS[-1]  # beyond any context the model has: whole multiples


def buckets_up_to(length: int) -> list[int]:
    """Every padded length a run whose prompts have at most `length` tokens can meet."""
    return [b for b in BUCKETS if b < bucket_length(length)] + [bucket_length(length)]


def cache_key(torch_version: str, cuda_version: str | None, triton_version: str | None,
              python_version: str = platform.python_version()) -> str:
    """A folder name per build: kernels and graphs compiled by another torch, CUDA, Triton or Python
    are not trusted (inductor's own keys include some of this; the folder makes it all explicit)."""
    build = f"torch-{torch_version}-cuda-{cuda_version or 'none'}-triton-{triton_version or 'none'}-py-{python_version}"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in build)


def current_cache_key() -> str:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return cache_key(torch.__version__, torch.version.cuda, triton_version)


def users_inductor_folder(environ=os.environ) -> str | None:
    """TORCHINDUCTOR_CACHE_DIR where the user chose it.  Importing `torch._dynamo` (every backend does)
    sets the variable to inductor's default folder when it is unset, so that value is not a choice:
    read as one, it kept every run in /tmp/torchinductor_<user> and this module's folder unused."""
    value = environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not value:
        return None
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return None if os.path.abspath(value) == os.path.abspath(default_cache_dir()) else value


def cache_folder(environ=os.environ) -> Path:
    """The inductor cache folder of this build: the user's TORCHINDUCTOR_CACHE_DIR, else <root>/<key>."""
    if users_inductor_folder(environ):
        return Path(environ["TORCHINDUCTOR_CACHE_DIR"])
    root = Path(environ.get(CACHE_ROOT_ENV) or _DEFAULT_ROOT)
    return root / current_cache_key()


def use_compile_cache(environ=os.environ) -> Path:
    """Point inductor at this build's cache folder (before the first compile; inductor reads the
    variable whenever it looks for its cache) and make it; the folder."""
    folder = cache_folder(environ)
    folder.mkdir(parents=True, exist_ok=True)
    environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    return folder


def shape_key(rows: int, padded_length: int, max_new_tokens: int, model: str = "") -> str:
    """What a compiled graph is specialized on, as a lock file name."""
    digest = hashlib.sha256(model.encode()).hexdigest()[:12]
    return f"{digest}-{rows}x{padded_length}-new{max_new_tokens}"


def trace_alike_in_every_process(model) -> None:
    """Make the model trace the same graph in every process, so a second process finds the first's
    graphs in the cache.  transformers' DiffusionGemma text models keep `unique_layer_types =
    set(config.layer_types)` and compute one rotary embedding per type in that set's order; string
    hashes are salted per process (PYTHONHASHSEED), so about half of all processes trace the two
    embeddings the other way round, number the graph's nodes differently and miss every cached graph
    of the model (on the built-in model, compiled twice in two processes: 2 of its 4 graphs missed,
    the two with the embeddings).  A sorted tuple iterates alike everywhere; every value is the same."""
    for module in model.modules():
        types = getattr(module, "unique_layer_types", None)
        if isinstance(types, (set, frozenset)):
            module.unique_layer_types = tuple(sorted(types))


_compiled_here: set[tuple[str, str]] = set()  # shapes this process has compiled (or loaded) already


@contextlib.contextmanager
def first_compile(folder: Path, key: str):
    """The host's first process to run shape `key` compiles it holding the host's lock for the key; the
    others wait on the lock, then run at once, side by side, loading it from the cache (a `.done` file beside
    the lock says it is there).  Holding the lock through every process's first run instead made the
    processes load one after another: 175, 221, 256 and 292 s for 4 ranks on 4 H100s, about 40 s a load.
    Later runs of the shape in this process take no lock.  The lock is an flock: a process that dies frees it."""
    if (str(folder), key) in _compiled_here:
        yield
        return
    locks = Path(folder) / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    done = locks / f"{key}.done"
    with open(locks / f"{key}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits while another process of the host compiles this shape
        compiling = not done.exists()
        if not compiling:  # compiled by another process: load it beside the others, holding nothing
            fcntl.flock(handle, fcntl.LOCK_UN)
        try:
            yield
            _compiled_here.add((str(folder), key))
            if compiling:
                done.touch()
        finally:
            if compiling:
                fcntl.flock(handle, fcntl.LOCK_UN)
