"""DiffusionGemma over several processes (backends/sharded.py): the plans, and a real torchrun run.

The integration tests launch `torchrun --nproc-per-node 2` (gloo, CPU, the built-in model) as a
subprocess, the way a user starts it; tests/sharded_worker.py runs in every rank.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from backends import BUILTIN_MODEL_DIR, BackendError, load_backend
from backends.sharded import REPLICATED, TEXT_MODELS, TORCHRUN_KINDS, check_fits, compile_alike, plans
from tests.command_line import cli
from tests.torchrun import MID_RUN_BAR, Screen, rank_pid, single_host, terminal_pair, worker_env, worker_module
from visualizer.trace import Trace

ROOT = Path(__file__).resolve().parent.parent


def _layer(kv_heads):
    return SimpleNamespace(num_attention_heads=16, num_key_value_heads=kv_heads)


REAL_SHAPE = SimpleNamespace(  # the 26B's text config, as far as splitting goes: 5 sliding layers, then a global one
    per_layer_config=[_layer(2) if i % 6 == 5 else _layer(8) for i in range(30)],
    intermediate_size=2112, moe_intermediate_size=704, num_experts=128,
)


@pytest.mark.parametrize("kind", TORCHRUN_KINDS)
def test_plans_name_the_decoder_and_the_encoder_alike_and_replicate_embeddings(kind):
    tp_plan, ep_plan = plans(kind)
    for plan in (tp_plan, ep_plan):
        decoder = {k.removeprefix("model.decoder."): v for k, v in plan.items() if k.startswith(TEXT_MODELS[0])}
        encoder = {k.removeprefix("model.encoder.language_model."): v for k, v in plan.items() if k.startswith(TEXT_MODELS[1])}
        encoder.pop("embed_tokens", None)
        assert decoder == encoder  # tied weights: the tie's source (decoder) is sharded exactly as its targets
    assert tp_plan.items() >= REPLICATED.items()  # the self-conditioning reads embed_tokens.weight outside any hook
    sharding = {style for style in tp_plan.values() if style != "replicate"}
    assert bool(sharding) == (kind != "expert")  # pure expert parallel splits nothing but the experts
    assert bool(ep_plan) == (kind != "tensor")


def test_which_splits_fit_the_real_model():
    check_fits("expert", 4, REAL_SHAPE)
    check_fits("expert", 8, REAL_SHAPE)
    check_fits("tensor", 2, REAL_SHAPE)
    with pytest.raises(ValueError, match="2 key/value heads"):
        check_fits("tensor", 4, REAL_SHAPE)
    with pytest.raises(ValueError, match="128 experts"):
        check_fits("expert", 3, REAL_SHAPE)


def test_compile_alike_filters_inductors_reduction_configs_and_leaves_aten_as_it_is(monkeypatch):
    import torch
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor.test_configs, "force_filter_reduction_configs", False)  # restored after the test
    assert compile_alike() == "filtered reduction configs"
    assert inductor.test_configs.force_filter_reduction_configs is True
    assert not torch.are_deterministic_algorithms_enabled()  # the slower deterministic aten kernels stay off


def test_compile_alike_falls_back_to_deterministic_algorithms_where_torch_has_no_filter():
    import torch

    older_torch = SimpleNamespace(test_configs=SimpleNamespace())  # inductor's config without the filter
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    try:
        assert compile_alike(older_torch) == "deterministic algorithms"
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def test_parallel_outside_torchrun_is_a_one_line_message(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(BackendError, match="torchrun --nproc-per-node N"):
        load_backend(str(BUILTIN_MODEL_DIR), parallel="expert")


@pytest.mark.model
def test_layers_is_one_process_and_gives_the_same_run(monkeypatch):
    from visualizer.settings import GenerationSettings
    from backends import record_trace

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(BackendError, match="not torchrun"):
        load_backend(str(BUILTIN_MODEL_DIR), parallel="layers")
    monkeypatch.delenv("WORLD_SIZE")
    settings = GenerationSettings(seed=1, max_new_tokens=64, max_denoising_steps=6)
    spread = record_trace(load_backend(str(BUILTIN_MODEL_DIR), parallel="layers"), "Write a haiku about rain", settings)
    whole = record_trace(load_backend(str(BUILTIN_MODEL_DIR)), "Write a haiku about rain", settings)
    assert spread.end.finish_reason == whole.end.finish_reason != "error"
    assert spread.end.sequence.tolist() == whole.end.sequence.tolist()  # on CPU, device_map="auto" is one device


def test_cli_refuses_parallel_outside_torchrun_without_a_traceback(tmp_path, monkeypatch):
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    done = cli("record", "--parallel", "tensor", "--prompt", "hi", "--out", tmp_path / "x.json")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: --parallel tensor runs one process per GPU")
    assert "Traceback" not in done.stderr


def _torchrun(kind: str, out: Path, worker: str = "sharded_worker") -> dict:
    done = subprocess.run(
        [*single_host(2), *worker_module(worker), kind, str(BUILTIN_MODEL_DIR), str(out)],
        cwd=ROOT, env=worker_env(), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "result.json").read_text())


@pytest.mark.usefixtures("no_leftover_processes")
def test_sharded_record_equals_stock_sharded_generate(tmp_path):
    """Every split kind in one torchrun launch (tests/sharded_worker.py loads each in turn)."""
    results = _torchrun(",".join(TORCHRUN_KINDS), tmp_path)

    assert list(results) == list(TORCHRUN_KINDS)
    for kind, result in results.items():
        assert result["status"] == 0, kind
        assert result["wrong_products"] == [], kind  # every hooked layer, the encoder's too, computes its true product
        assert result["first_step_entropy_gap"] < 1e-4, kind  # the same numbers as one whole model, up to rounding
        rank0, rank1 = result["stock"]
        assert rank0 == rank1, kind  # the ranks sampled alike: same seed, same all-reduced logits
        assert result["recorded"] == rank0, kind  # the capture on rank 0 changed nothing
        assert result["blocks"] >= 1 and result["steps"] >= 1 and len(rank0) >= 256, kind
        assert result["device"].startswith(f"{kind} parallel over 2 cpu processes")
        assert result["reductions_filtered"] == [True, True], kind  # every rank compiles alike (sharded.compile_alike)


@pytest.mark.usefixtures("no_leftover_processes")
def test_followers_serve_requests_in_lockstep_through_a_stop_a_recording_error_and_a_refusal(tmp_path):
    """A stop on rank 0, an error of rank 0's recording (the followers record nothing), or ranks whose
    canvases differ, ends the run on every rank between the same two steps, and every rank is ready for the next request: the last
    run equals the first, and the followers hear the goodbye (a hang would fail the timeout)."""
    result = _torchrun("expert", tmp_path, worker="lockstep_worker")

    first_finish, first_steps, first_sequence = result["first"]
    assert first_finish != "error" and first_steps > 1
    assert result["stopped"][0] == "cancelled" and result["stopped"][1] < first_steps
    finish, error, kept_steps, failure = result["failed"]
    assert finish == "error" and failure == "FailedInStep" and kept_steps == 2  # the third copy failed
    assert error == "Generation failed: RuntimeError: recording failed on rank 0 (injected)"  # no "restart torchrun"
    assert result["problem_after_failure"] is None  # the server goes on
    # rank 1's canvas differs after step 0: the vote before step 1 ends the run on both ranks, rank 0 keeps step 0
    finish, error, kept_steps, failure = result["diverged"]
    assert finish == "error" and failure == "RanksDisagree" and kept_steps == 1
    assert error.startswith("The ranks' canvases differ") and "restart torchrun" not in error
    assert result["problem_after_divergence"] is None
    assert result["refused"].startswith("The prompt is empty")
    assert result["again"] == result["first"]
    assert result["said_goodbye"] is True and json.loads((tmp_path / "follower_1.json").read_text()) == 0


@pytest.mark.usefixtures("no_leftover_processes")
def test_record_takes_torchruns_sigterm_as_a_stop_and_keeps_its_steps(tmp_path):
    """torchrun answers a dead rank with SIGTERM to the others. Rank 0's record takes it as a stop and
    writes what it recorded (it used to die of the signal with nothing written). Sent here to rank 0
    while rank 1 lives, so the order is fixed: when a rank really dies, gloo may end the run first.
    The command's output is a terminal (a pty), so its progress is the per-step bar, which says when
    the third step is in (piped, it says only each block's end, and the story's one block is the run)."""
    out = tmp_path / "run.json"
    screen, terminal = terminal_pair()
    proc = subprocess.Popen(
        [*single_host(2), "-m", "visualizer", "record", "--parallel", "expert", "--model", str(BUILTIN_MODEL_DIR), "--demo", "story",
         "--seed", "3", "--max-new-tokens", "768", "--steps", "48", "--out", str(out)],
        cwd=ROOT, env=worker_env(), stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal,
    )
    os.close(terminal)
    said = Screen(screen)
    try:
        deadline = time.monotonic() + 120
        while not MID_RUN_BAR.search(said.text()):
            assert proc.poll() is None and time.monotonic() < deadline, said.text()[-3000:]
            time.sleep(0.05)
        os.kill(rank_pid(proc.pid, 0), signal.SIGTERM)
        proc.wait(timeout=60)  # no rank hangs
    finally:
        if proc.poll() is None:
            proc.kill()
        said.close()
    assert "torchrun ended the job" in said.text() and "wrote " in said.text()
    recorded = Trace.load(out)
    assert 3 <= len(recorded.steps) < 48 and recorded.end.finish_reason == "cancelled"

