"""Serving the app: `python app.py`'s flags, Gradio's queue as the app runs it, and a sharded model's
process life under torchrun.

    python app.py --port 7861                                          # main(): build_app, queue_app, launch
    torchrun --nproc-per-node 2 app.py --parallel expert --model M     # rank 0 serves, the others follow
    queue_app(build_app(model)).launch(prevent_thread_lock=True)       # tests and benchmarks: as users get it

Under torchrun rank 0's `Leader` owns the process's way out (torchrun's SIGTERM, a restart after a run
failed on rank 0 alone: `Leader.own_exits`); `main` closes the group in order on every path out.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from pathlib import Path

import gradio as gr

from backends import (
    BackendError, Leader, ModelChoice, default_model, follow_requests, is_follower, load_backend, under_torchrun,
)
from backends.process_group import end_process
from backends.sharded import PARALLEL_KINDS

from . import app_run, hosting
from .app import build_app
from .page import page_style
from .hosting import Hosting

# Gradio's queue looks for work every 1 ms on Linux and for progress every 10 ms, idle or busy: the app
# cost 32-60 ms of CPU a second with a page open and nothing to do, about what a live run adds at 25
# steps/s. At 20 ms and 100 ms it costs 5-12 ms a second (BENCHMARKS.md, "Gradio's queue polling every 20 ms"); the price: a
# queued call may wait up to 20 ms more to start, and gr.Progress bars (exports) move 10 times a second.
QUEUE_POLL_S = 0.02
PROGRESS_POLL_S = 0.1
# A sharded model: rank 0 stays up this long after torchrun's SIGTERM (or a failed run) so that open tabs
# hear why on their next health tick (app.HEALTH_TICK_S); torchrun sends SIGKILL 30 s after its SIGTERM.
TERM_GRACE_S = 10.0
_LOG = logging.getLogger(__name__)


def queue_app(demo_app: gr.Blocks) -> gr.Blocks:
    """Turn on Gradio's queue as this app runs it (one call at a time unless an event says otherwise)
    and slow its idle polling to QUEUE_POLL_S and PROGRESS_POLL_S; returns `demo_app`, to launch.
    Every launch goes through here, the tests' and benchmarks' too, so they measure what users get.

    Gradio has no setting for the polling: this sets two private attributes of its `Queue`
    (`sleep_when_free`, read by `start_processing`, and `progress_update_sleep_when_free`, read by
    `start_progress_updates`; checked against Gradio 6.31's queueing.py). A Gradio without them
    keeps its own intervals, and the log says so once."""
    demo_app.queue(default_concurrency_limit=1)
    queue = getattr(demo_app, "_queue", None)
    intervals = {"sleep_when_free": QUEUE_POLL_S, "progress_update_sleep_when_free": PROGRESS_POLL_S}
    missing = [name for name in intervals if not hasattr(queue, name)]
    if missing:
        _say_once(f"Gradio's queue has no {' or '.join(missing)} (renamed?): it keeps its own polling intervals, "
                  "and the idle app costs more CPU (see webapp.serve.queue_app)")
    for name, seconds in intervals.items():
        if name not in missing:
            setattr(queue, name, seconds)
    return demo_app


@functools.cache
def _say_once(message: str) -> None:
    _LOG.warning(message)


def main(argv=None) -> None:
    """`python app.py [flags]`: build the app for this server's mode and serve it until it closes."""
    parser = argparse.ArgumentParser(description="Watch DiffusionGemma denoise in the browser.")
    parser.add_argument("--model", help="hub id or local folder to preselect (default: the best one here)")
    parser.add_argument("--host", default=None, help="e.g. 0.0.0.0 to serve the local network")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--hosted", action="store_true", help="public-server mode: model allowlist and caps (see README)")
    parser.add_argument("--parallel", choices=PARALLEL_KINDS,
                        help="serve --model (default: the built-in one) spread over several GPUs, and no other model: "
                             "expert/tensor/tensor+expert under torchrun --nproc-per-node N, layers in one process "
                             "(docs/sharded.md)")
    args = parser.parse_args(argv)
    if under_torchrun() and not args.parallel:  # N copies of the whole app would fight over one port
        _refuse(parser, "under torchrun the app serves one model spread over the processes: add --parallel expert, tensor "
                        "or tensor+expert")
    mode = Hosting.from_environment(flag=args.hosted)
    model = args.model or (default_model() if args.parallel else None)  # --parallel goes through the same checks
    if mode.hosted and model and mode.choice_for(model) is None:
        _refuse(parser, f"--model {model} is not in the hosted allowlist; add it with {hosting.EXTRA_MODELS_ENV}")
    if model and mode.model_problem(model):
        _refuse(parser, mode.model_problem(model))  # a folder that is not there: one line, not a traceback
    leader = None
    if args.parallel:
        mode, leader = _serve_spread(parser, mode, mode.choice_for(model), args.parallel)
        model = mode.choices[0].label
    demo_app = build_app(model, mode)
    if leader is None:
        app_run.preload_for_zero_gpu(mode.choice_for(model).source if model else mode.choices[0].source)
    else:
        leader.own_exits(demo_app.close, grace_s=TERM_GRACE_S)  # torchrun's SIGTERM, a restart: the page closes
    launched = False
    try:
        queue_app(demo_app).launch(
            server_name=args.host, server_port=args.port, **page_style(),
            max_file_size=mode.limits.max_file_size,  # Gradio refuses a bigger upload before anything reads it
        )
        launched = True
    except Exception as exc:
        if leader is None:
            raise
        # the `sys.exit` below replaces the exception: say it first (a port taken meanwhile once ended a sharded
        # app at once with status 0 and nothing in torchrun's log)
        print(f"error: the app could not serve: {exc}", file=sys.stderr, flush=True)
    finally:
        if leader is not None:  # the followers leave (announce None) unless one stopped; then the group ends in order
            closed = leader.close()
            sys.exit(end_process(0 if closed and launched else 1, backend=leader.backend))


def _refuse(parser: argparse.ArgumentParser, message: str) -> None:
    """One line and exit 2; under torchrun only rank 0 says it (every rank refuses the same flags)."""
    if is_follower():
        sys.exit(2)
    parser.error(message)


def _serve_spread(parser, mode: Hosting, choice: ModelChoice, parallel: str):
    """Load this rank's part of the model (`--parallel`). A follower rank then runs rank 0's requests
    until it says goodbye, and exits; rank 0 gets the mode narrowed to this one model, whose picker
    label says how it is spread, and its `Leader` (None for `layers`, which is one process)."""
    try:
        backend = load_backend(choice.source, parallel=parallel)
    except BackendError as exc:  # --parallel without torchrun, a split that does not fit: the backend's own line
        _refuse(parser, str(exc))
    if is_follower():
        sys.exit(end_process(follow_requests(backend), backend=backend))
    leader = Leader(backend) if under_torchrun() else None
    name = Path(choice.source).name if Path(choice.source).is_dir() else choice.source  # a folder's name, a hub id
    label = f"{name} · {backend.info.device}"
    app_run.serve_only(choice.source, backend, leader)
    return mode.serving_only(ModelChoice(label, choice.source, choice.backend, choice.builtin)), leader


if __name__ == "__main__":
    main()
