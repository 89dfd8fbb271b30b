"""A model and a sampler are two choices; the backend follows (`backends.registry.backend_for`)."""

from __future__ import annotations

import pytest

from backends import BUILTIN_MODEL_DIR, BackendError, BackendUnavailable, model_choices
from backends import registry

BUILTIN = str(BUILTIN_MODEL_DIR)


def test_each_sampler_of_a_model_comes_from_the_first_installed_backend_that_has_it():
    assert registry.sampler_backends(BUILTIN) == {
        "entropy-bound": "transformers", "discrete-ddim": "diffusers", "block-refinement": "diffusers",
    }
    assert registry.backend_for(BUILTIN) == "transformers" and registry.backend_for(BUILTIN, "block-refinement") == "diffusers"
    assert registry.backend_for("diffusers:" + BUILTIN, "entropy-bound") == "diffusers"  # the prefix still names it


def test_a_sampler_on_a_backend_not_installed_says_what_to_install(monkeypatch):
    missing = registry.BackendEntry(**{**registry.BACKENDS["diffusers"].__dict__, "available": lambda: False})
    monkeypatch.setitem(registry.BACKENDS, "diffusers", missing)
    assert registry.sampler_backends(BUILTIN) == {"entropy-bound": "transformers"}
    with pytest.raises(BackendUnavailable, match="the discrete-ddim sampler runs on the diffusers backend, which is not installed here: pip"):
        registry.backend_for(BUILTIN, "discrete-ddim")


def test_a_sampler_no_backend_of_the_model_has_names_who_has_it():
    with pytest.raises(BackendError, match=r"cannot run the confidence-threshold sampler \(it runs on the mlx backend"):
        registry.backend_for(BUILTIN, "confidence-threshold")
    with pytest.raises(BackendError, match="no backend has it"):
        registry.backend_for(BUILTIN, "no-such-sampler")


def test_the_picker_lists_each_model_once():
    sources = [choice.source.removeprefix("diffusers:") for choice in model_choices()]
    assert len(sources) == len(set(sources))
