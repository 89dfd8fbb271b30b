"""Shared fixtures: small real DiffusionGemma models built on the fly (nothing is downloaded)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session", autouse=True)
def _two_threads():
    import torch

    torch.set_num_threads(2)  # CI and this machine have two cores; more threads only add noise


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory):
    """The deterministic random-weight model (training/build_random.py)."""
    from training.build_random import build_random_model

    return build_random_model(tmp_path_factory.mktemp("random-tiny"))


@pytest.fixture(scope="session")
def no_eos_model_dir(tmp_path_factory):
    """The random model with its EOS logits pinned to zero, so runs always fill every block.

    Random weights put an EOS somewhere in about half of all 256-token canvases; tests that need
    several blocks need control over that, so the tied embedding rows of the EOS ids are zeroed.
    """
    import torch
    from transformers import DiffusionGemmaForBlockDiffusion

    from training.build_random import build_random_model
    from training.tokenizer import EOS_TOKEN_IDS

    folder = build_random_model(tmp_path_factory.mktemp("random-no-eos"))
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(folder)
    with torch.no_grad():
        model.get_output_embeddings().weight[EOS_TOKEN_IDS] = 0.0
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def random_backend(random_model_dir):
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(str(random_model_dir), device="cpu")


@pytest.fixture(scope="session")
def no_eos_backend(no_eos_model_dir):
    from backends.transformers_backend import TransformersBackend

    return TransformersBackend(str(no_eos_model_dir), device="cpu")
