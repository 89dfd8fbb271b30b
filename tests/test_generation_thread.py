"""The transformers backend runs every generation on its one thread, which owns its CUDA-graph trees.

torch.compile's CUDA graphs keep their trees in thread-locals: on a fresh thread per run torch 2.11
failed with a bare AssertionError (the probe's compiled runner on the GPU machine), and later versions
record every graph again at each run. There is no GPU here, so what is checked is the arrangement
that avoids both: one thread for all runs of a backend, holding its own trees.
"""

from __future__ import annotations

import threading

from torch._inductor import cudagraph_trees

from backends.run import record_trace
from backends.transformers_backend import TransformersBackend
from visualizer.records import RunEnd
from visualizer.settings import GenerationSettings


def test_every_run_of_a_backend_is_on_its_one_thread_with_its_own_graph_trees(random_model_dir):
    backend = TransformersBackend(str(random_model_dir), device="cpu")
    seen = []
    stock_generate = backend.model.generate

    def watched(*args, **kwargs):
        seen.append((threading.get_ident(), hasattr(cudagraph_trees.local, "tree_manager_containers")))
        return stock_generate(*args, **kwargs)

    backend.model.generate = watched
    settings = GenerationSettings(seed=0, max_new_tokens=16, max_denoising_steps=2)
    for seed in range(3):
        trace = record_trace(backend, "Write a haiku about rain", settings.replace(seed=seed))
        assert trace.end.finish_reason in ("eos", "length")
    threads = {ident for ident, _ in seen}
    assert len(seen) == 3 and len(threads) == 1
    assert threading.get_ident() not in threads  # not the caller's: the records stream while it runs
    assert all(owns_trees for _, owns_trees in seen)

    thread = backend._thread._thread
    backend.close()
    assert not thread.is_alive()


def test_a_run_returns_the_error_that_ended_the_models_run_and_nothing_when_it_stopped_between_steps(random_model_dir, monkeypatch):
    """A sharded server's leader reads what the run returns to know whether the followers are in step: an
    error raised inside the worker's generate comes back (out of step, unless the capture held it for a
    vote: FailedInStep); a record that breaks the rules ends the run on the consuming side, which stops the
    worker as a Stop does, so the model's run returns nothing."""
    from backends import base, capture
    from backends.sharded_server import FailedInStep

    backend = TransformersBackend(str(random_model_dir), device="cpu")
    settings = GenerationSettings(seed=0, max_new_tokens=16, max_denoising_steps=2)
    real_copy = capture._to_host

    def run():
        """The run's RunEnd, and what its generator returned after it."""
        batches = backend.generate_batches("Write a haiku about rain", settings)
        for batch in batches:
            if isinstance(batch[-1], RunEnd):
                return batch[-1], base.model_error(batches)

    def failing_copy(tensors):
        raise RuntimeError("copy failed")

    monkeypatch.setattr(capture, "_to_host", failing_copy)
    end, model_error = run()
    assert end.error == "Generation failed: RuntimeError: copy failed"
    assert isinstance(model_error, RuntimeError) and str(model_error) == "copy failed"

    monkeypatch.setattr(capture, "_to_host", real_copy)
    monkeypatch.setattr(base, "step_record", lambda item, pieces: (_ for _ in ()).throw(ValueError("bad record")))
    end, model_error = run()
    assert end.error == "Generation failed: ValueError: bad record" and model_error is None

    monkeypatch.undo()
    end, model_error = run()
    assert end.error is None and model_error is None

    held = FailedInStep()  # what the capture raises at the vote after a recording error: the message is the error's
    held.__cause__ = RuntimeError("copy failed")
    assert backend.failure_message(held) == "Generation failed: RuntimeError: copy failed"
    backend.close()
