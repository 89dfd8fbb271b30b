"""The shipped built-in model: a real checkpoint folder that loads and answers through the app's backend."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from backends import BUILTIN_MODEL_DIR, load_backend
from prompts.demos import demo_prompt
from prompts.tasks import check_task, heldout_tasks
from prompts.tasks.demo_families import demo_task
from training.denoising_stats import block_stats
from backends import record_trace
from visualizer.settings import GenerationSettings

pytestmark = pytest.mark.model


MAX_FOLDER_BYTES = 25 * 1024 * 1024


@pytest.fixture(scope="module")
def backend():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a small model on a shared CPU: threads only add contention
    yield load_backend(str(BUILTIN_MODEL_DIR))
    torch.set_num_threads(before)


def run(backend, prompt, seed):
    return record_trace(backend, prompt, GenerationSettings(seed=seed))


def text(trace):
    return trace.end.text


def test_folder_is_a_complete_checkpoint_under_25_mb():
    names = {p.name for p in BUILTIN_MODEL_DIR.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "chat_template.jinja"} <= names
    assert sum(p.stat().st_size for p in BUILTIN_MODEL_DIR.iterdir()) <= MAX_FOLDER_BYTES


def test_config_is_the_real_architecture_with_the_sampler_defaults():
    config = json.loads((BUILTIN_MODEL_DIR / "config.json").read_text())
    assert config["architectures"] == ["DiffusionGemmaForBlockDiffusion"]
    assert config["canvas_length"] == 256 and config["text_config"]["max_position_embeddings"] == 2048
    generation = json.loads((BUILTIN_MODEL_DIR / "generation_config.json").read_text())
    assert generation["eos_token_id"] == [1, 106] and generation["pad_token_id"] == 0
    assert (generation["max_denoising_steps"], generation["t_min"], generation["t_max"]) == (48, 0.4, 0.8)
    assert generation["sampler_config"]["entropy_bound"] == 0.1


def test_shipped_tokenizer_matches_assets():
    shipped = (BUILTIN_MODEL_DIR / "tokenizer.json").read_text()
    assert shipped == (BUILTIN_MODEL_DIR.parent.parent / "tokenizer" / "tokenizer.json").read_text()


def test_loads_through_the_backend_as_float32_on_cpu(backend):
    info = backend.info
    assert info.backend == "transformers" and info.device == "cpu" and info.dtype == "float32"
    assert info.builtin and info.vocab_size == len(backend.tokenizer) == 4096
    assert 5e6 < info.parameters < 15e6


def test_answers_the_sky_demo_in_exactly_three_sentences(backend):
    results = [run(backend, demo_prompt("sky"), seed) for seed in range(3)]
    assert sum(bool(check_task(demo_task("sky"), text(r))) for r in results) >= 2
    assert all(r.end.finish_reason == "eos" for r in results)


def test_lists_the_eight_planets(backend):
    results = [run(backend, demo_prompt("planets"), seed) for seed in range(2)]
    assert any(check_task(demo_task("planets"), text(r)) for r in results)


def test_held_out_json_requests_mostly_parse_and_match_their_schema(backend):
    tasks = heldout_tasks("json", 6)
    passed = sum(bool(check_task(task, text(run(backend, task.prompt, 0)))) for task in tasks)
    assert passed >= 3


def test_denoising_spreads_commits_over_several_steps(backend):
    """Not one token a step, not everything at once: several steps, several tokens each."""
    for name in ("sky", "planets"):
        result = run(backend, demo_prompt(name), 0)
        stats = block_stats(result, 0)
        assert stats["steps_with_new"] >= 3, stats
        assert stats["tokens_per_step"] > 1.0, stats
        assert stats["max_new_per_step"] <= 0.5 * stats["content_tokens"], stats
        assert not np.isnan(stats["tau_b"])
