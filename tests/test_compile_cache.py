"""Compiled runs on CPU, without compiling: the prompt-length buckets, the padded inputs, the cache
folder keyed by the torch build, and the host lock that lets one process compile a shape first."""

import fcntl
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from backends import compile_cache
from backends.compile_cache import (BUCKETS, bucket_length, buckets_up_to, cache_folder, cache_key, first_compile,
                                    shape_key)
from backends.transformers_backend import batch_inputs
from visualizer.settings import GenerationSettings

pytestmark = pytest.mark.model


def test_lengths_fall_in_a_few_buckets():
    assert [bucket_length(n) for n in (1, 64, 65, 128, 129, 200, 256, 257, 600, 8192, 8193)] == \
        [256, 256, 256, 256, 256, 256, 256, 512, 1024, 8192, 16384]
    assert all(bucket_length(n) >= n for n in range(1, 5000, 7))
    # a long run with prompts up to 256 tokens meets four lengths, up to 4,096 eight
    assert len({bucket_length(n) for n in range(1, 257)}) == len(buckets_up_to(256)) == 1  # the whole probe suite
    assert len({bucket_length(n) for n in range(1, 4097)}) == len(buckets_up_to(4096)) == 5
    assert bucket_length(BUCKETS[-1] + 1) % BUCKETS[-1] == 0
    with pytest.raises(ValueError):
        bucket_length(0)


def test_padding_to_a_bucket_left_pads_every_row_with_a_mask():
    ids, mask = batch_inputs([[5, 6, 7], [8, 9]], 0, "cpu", pad_to=64)
    assert ids.shape == mask.shape == (2, 64)
    assert ids[0, -3:].tolist() == [5, 6, 7] and ids[1, -2:].tolist() == [8, 9] and int(ids[:, :61].sum()) == 0
    assert mask.sum(1).tolist() == [3, 2] and mask[0, -3:].tolist() == [1, 1, 1]
    same, same_mask = batch_inputs([[5, 6], [7, 8]], 0, "cpu", pad_to=64)  # one length: still the bucket's shape
    assert same.shape == (2, 64) and same_mask.sum().item() == 4
    plain, none = batch_inputs([[5, 6], [7, 8]], 0, "cpu")  # eager: unchanged, no padding, no mask
    assert plain.tolist() == [[5, 6], [7, 8]] and none is None


def test_the_backend_pads_compiled_runs_to_a_bucket_and_eager_ones_not():
    from backends import BUILTIN_MODEL_DIR as BUILTIN

    from backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(BUILTIN), device="cpu")
    rows = [backend.prompt_ids("Why is the sky blue?"), backend.prompt_ids("What is 2 + 3?")]
    longest = max(map(len, rows))
    compiled, mask = backend.model_inputs(rows, GenerationSettings(compiled=True), "cpu")
    assert compiled.shape == (2, bucket_length(longest)) and mask is not None
    eager, _ = backend.model_inputs(rows, GenerationSettings(compiled=False), "cpu")
    assert eager.shape == (2, longest)
    assert torch.equal(compiled[:, -longest:], eager)  # the same rows, more pad on the left
    one, no_mask = backend.model_inputs(rows[:1], GenerationSettings(compiled=True), "cpu")
    assert one.shape == (1, len(rows[0])) and no_mask is None  # a batch of one is the single-prompt run, unpadded


def test_the_cache_folder_is_one_per_build_and_shared_by_every_rank(tmp_path):
    base = cache_key("2.11.0+cu128", "12.8", "3.5.0", "3.12.3")
    others = [cache_key("2.13.0+cu128", "12.8", "3.5.0", "3.12.3"), cache_key("2.11.0+cu128", "13.0", "3.5.0", "3.12.3"),
              cache_key("2.11.0+cu128", "12.8", "3.6.0", "3.12.3"), cache_key("2.11.0+cu128", "12.8", "3.5.0", "3.13.1")]
    assert len({base, *others}) == 5 and "/" not in base and "+" not in base  # another build: another folder
    ranks = [cache_folder({compile_cache.CACHE_ROOT_ENV: str(tmp_path), "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(4)]
    assert len(set(ranks)) == 1 and ranks[0].parent == tmp_path
    assert ranks[0].name == compile_cache.current_cache_key()
    # the user's own inductor folder wins; use_compile_cache points inductor at the folder and makes it
    assert cache_folder({"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "mine")}) == tmp_path / "mine"
    environ = {compile_cache.CACHE_ROOT_ENV: str(tmp_path)}
    folder = compile_cache.use_compile_cache(environ)
    assert environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder) and folder.is_dir()


def test_inductors_own_default_is_not_taken_for_the_users_choice(tmp_path):
    """Importing torch._dynamo sets TORCHINDUCTOR_CACHE_DIR to inductor's default when it is unset:
    that value must not stand for the user's folder, or the per-build folder is never used."""
    import os

    import torch._dynamo  # noqa: F401 -- what every backend imports
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # set by the import itself when the user did not
    environ = {"TORCHINDUCTOR_CACHE_DIR": default_cache_dir(), compile_cache.CACHE_ROOT_ENV: str(tmp_path)}
    folder = compile_cache.use_compile_cache(environ)
    assert folder == tmp_path / compile_cache.current_cache_key()
    assert environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)


def try_lock(path) -> str:
    """In another process: can the lock be taken right now?"""
    code = ("import fcntl, sys\nh = open(sys.argv[1], 'a+')\n"
            "try:\n    fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('free')\n"
            "except BlockingIOError:\n    print('held')\n")
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout.strip()


def test_one_process_compiles_a_shape_while_the_others_wait(tmp_path):
    key = shape_key(8, 128, 256, "google/diffusiongemma-26B-A4B-it")
    assert key != shape_key(8, 192, 256, "google/diffusiongemma-26B-A4B-it") != shape_key(4, 128, 256, "x")
    lock = tmp_path / "locks" / f"{key}.lock"
    with first_compile(tmp_path, key):
        assert try_lock(lock) == "held"  # another rank of the host waits here
    assert try_lock(lock) == "free"
    # once this process has run the shape it takes no lock: another process may hold it meanwhile
    holder = open(lock, "a+")
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        again = threading.Thread(target=lambda: first_compile(tmp_path, key).__enter__(), daemon=True)
        again.start()
        again.join(10)
        assert not again.is_alive()
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        holder.close()
    with pytest.raises(RuntimeError), first_compile(tmp_path, "failing"):  # a failed compile frees the lock
        raise RuntimeError("boom")
    assert try_lock(tmp_path / "locks" / "failing.lock") == "free"
    assert not (tmp_path / "locks" / "failing.done").exists()  # and the next process compiles it, holding the lock
    assert os.path.isdir(tmp_path / "locks")


def test_processes_that_find_the_shape_compiled_load_it_side_by_side(tmp_path):
    """Once one process has compiled a shape, the others do not hold the lock through their own first run (a
    load from the cache, about 40 s at the real shape): they would otherwise load one after another."""
    from backends import compile_cache

    key = shape_key(8, 256, 256, "m")
    with first_compile(tmp_path, key):  # the compiling process
        pass
    assert (tmp_path / "locks" / f"{key}.done").exists()
    compile_cache._compiled_here.clear()  # two more processes of the host, each running the shape first
    entered, release = threading.Barrier(3, timeout=10), threading.Event()

    def load():
        with first_compile(tmp_path, key):
            entered.wait()  # all three inside at once: a lock held through a load would keep them apart
            release.wait(10)

    loaders = [threading.Thread(target=load, daemon=True) for _ in range(2)]
    for thread in loaders:
        thread.start()
    entered.wait()
    assert try_lock(tmp_path / "locks" / f"{key}.lock") == "free"
    release.set()
    for thread in loaders:
        thread.join(10)


# What transformers' text models iterate: a set of the config's layer types. Its order needs only Python (no
# transformers import, a process costs milliseconds), so the seeds' sweep reads the layer types from config.json.
PLAIN_ORDER = "import sys; print(list(set(sys.argv[1:])))"
# The decoder the backend loads.
BACKEND_ORDER = """
import sys
from backends.transformers_backend import TransformersBackend
backend = TransformersBackend(sys.argv[1], device="cpu")
print([list(m.unique_layer_types) for m in backend.model.modules() if hasattr(m, "unique_layer_types")])
"""


def _rotary_order(seed: int, which: str) -> str:
    from backends import BUILTIN_MODEL_DIR as BUILTIN

    if which == "plain":
        layer_types = json.loads((Path(BUILTIN) / "config.json").read_text())["text_config"]["layer_types"]
        command = [sys.executable, "-c", PLAIN_ORDER, *layer_types]
    else:
        command = [sys.executable, "-c", BACKEND_ORDER, str(BUILTIN)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
                          env=os.environ | {"PYTHONHASHSEED": str(seed)}, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_model_computes_its_rotary_embeddings_in_one_order_whatever_the_hash_seed():
    """The order a compiled forward computes its rotary embeddings in is part of its traced graph,
    hence of the cache key: without `trace_alike_in_every_process` it follows the process's string
    hash seed (seen: a second process missed half the cached graphs)."""
    plain = {seed: _rotary_order(seed, "plain") for seed in range(6)}
    seeds = [min(s for s in plain if plain[s] == order) for order in set(plain.values())]
    assert len(seeds) == 2  # the plain set's order does change with the seed: the test can tell
    loaded = {_rotary_order(seed, "backend") for seed in seeds}
    assert len(loaded) == 1 and "sliding_attention" in loaded.pop()
