"""How the tests serve the app and drive its API as a client does: the app on a port of its own
(`served_app`), the generate event's inputs (the knobs by the knob table's names), the answers of events
that update many components by name, and the run's outcome, which the chained `/run_message` event
reports after the stream ends."""

from __future__ import annotations

from contextlib import contextmanager

KNOBS = dict(entropy_bound=0.1, t_min=0.4, t_max=0.8, seed=0, sampler="entropy-bound", temperature=1.0)
GENERATE_ARGS = {**KNOBS, "max_new_tokens": 768, "max_denoising_steps": 48}  # a long run: three canvases


@contextmanager
def served_app(demo, **launch):
    """`demo` (a built app) queued as the app queues it and served in this process until the block ends;
    yields its URL. `launch`: more of Gradio's launch arguments (max_file_size, server_port)."""
    from webapp import serve

    serve.queue_app(demo).launch(prevent_thread_lock=True, quiet=True, **launch)
    try:
        yield demo.local_url
    finally:
        demo.close()


def submit_generate(client, prompt, model, max_new_tokens=256, steps=4, **overrides):
    """Start a run; the job yields the live view's values (`visualizer.live_stream.LiveRing`)."""
    knobs = {**KNOBS, "max_new_tokens": max_new_tokens, "max_denoising_steps": steps, **overrides}
    return client.submit(prompt, model, **knobs, api_name="/generate")


def model_answer(values) -> dict:
    """The `/load_model` API's answer by output name (`webapp.app.MODEL_OUTPUTS`)."""
    from webapp.app import MODEL_OUTPUTS

    return dict(zip(MODEL_OUTPUTS, values))


def run_message(client) -> tuple[str, str]:
    """(committed text, message) of this client's last run, as the page shows them after it."""
    return tuple(client.predict(api_name="/run_message"))


def finished_run(client, job, timeout=None) -> tuple[str, str]:
    """Wait for a run's stream to end, then its (committed text, message)."""
    job.result(timeout=timeout)
    return run_message(client)


def frames_of(*values) -> list[dict]:
    """The frames in live-view values a client received, read as the browser reads them (which
    checks that every frame applies, in order)."""
    import json

    from visualizer.live_decode import LiveState

    decoder, frames = LiveState(), {}
    for value in values:
        frames.update((m["i"], m) for m in (json.loads(line) for line in value[2:] if line))
        decoder.read_value(value)
    assert sorted(frames) == list(range(decoder.frames))
    return [frames[i] for i in sorted(frames)]
