"""Watch DiffusionGemma denoise: the Gradio app.

    python app.py                      # the built-in model, on http://127.0.0.1:7860
    python app.py --model FOLDER_OR_ID --port 7861
    python app.py --hosted             # as on a public Space (automatic where SPACE_ID is set)
    torchrun --nproc-per-node 2 app.py --parallel expert --model M   # one model over 2 GPUs (docs/sharded.md)

Thin on purpose: the backend yields step records, `visualizer` turns them into frames; the
handlers here only adapt between the two and Gradio.  Each browser session keeps its own run in
a `gr.State`; generations share the model through one queue (one run at a time, queue position
shown); replaying a recorded step never touches the model.
"""

from __future__ import annotations

import argparse
import functools
import html
import inspect
import json
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from backends import (
    BackendError, Leader, ModelChoice, backend_for, default_model, follow_requests, is_follower, load_backend,
    sampler_backends, under_torchrun,
)
from backends.process_group import end_process
from backends.sharded import PARALLEL_KINDS
from prompts.builtin_guide import guide_markdown
from prompts.demos import DEMOS
from visualizer.animation import AnimationError, AnimationOptions, parse_blocks
from visualizer.charts import commit_panel_html, token_details
from visualizer.compare import align, build_compare_animation, compare_html
from visualizer.alternatives import AlternativesError, alternatives_html, frame_position
from visualizer.export import ExportError, export_to_folder, save_gif
from visualizer.insight_charts import accept_budget_svg, structure_first_svg
from visualizer.layer_charts import layer_rms_svg, lens_rank_svg, recorded_layers
from visualizer.layout import grid_layout, text_layout
from visualizer.live_stream import LiveEncoder, LiveRing, replay_value
from visualizer.palette import PALETTES, get_palette
from visualizer.readout import trajectory_html
from visualizer.render_html import frame_caption, render_frame_html
from visualizer.settings import KNOBS, GenerationSettings
from visualizer.states import frame_refs, frame_state
from visualizer.thinking import thoughts_and_answer
from visualizer.replay import example_traces, load_upload, save_download
from visualizer.trace import Trace, TraceError

from . import app_run, hosting
from .app_run import MODELS, run_live
from .gradio_temp import own_gradio_temp_dir
from .hosting import Hosting, generate_validator
from .sessions import RunSession, SessionRegistry

# At most ~6 live updates a second: each costs Gradio a few ms of server CPU whatever it carries, so at
# 25 steps/s an update carries ~4 frames (BENCHMARKS.md, "a few updates a second, paced out in the browser"); the view paces them out
# (live_view.js), and a run's last frames and end line go out at once (`generate` flushes the end).
LIVE_MIN_INTERVAL_S = 0.16
LIVE_VIEW_JS = (Path(__file__).resolve().parent.parent / "visualizer" / "static" / "live_view.js").read_text(encoding="utf-8")
SESSIONS = SessionRegistry()  # frees a session's run and files when its tab closes (every app in this process)
SESSION_TTL_S = 3 * 3600  # an idle session's state is dropped after this (Gradio's time_to_live)
# Gradio's queue looks for work every 1 ms on Linux and for progress every 10 ms, idle or busy: the app
# cost 32-60 ms of CPU a second with a page open and nothing to do, about what a live run adds at 25
# steps/s. At 20 ms and 100 ms it costs 5-12 ms a second (BENCHMARKS.md, "Gradio's queue polling every 20 ms"); the price: a
# queued call may wait up to 20 ms more to start, and gr.Progress bars (exports) move 10 times a second.
QUEUE_POLL_S = 0.02
PROGRESS_POLL_S = 0.1
# A sharded model (torchrun): each open tab asks this often whether every rank still runs (one cheap
# event, only on a sharded server), and rank 0 stays up this long after torchrun's SIGTERM so that
# they all hear why; torchrun sends SIGKILL 30 s after its SIGTERM.
HEALTH_TICK_S = 2.0
TERM_GRACE_S = 10.0
_LOG = logging.getLogger(__name__)

CSS = """
.dv-frame { max-height: 72vh; overflow: auto; }
#dv-message p { color: #f87171; font-weight: 600; }
"""

INTRO = """# Watch DiffusionGemma denoise
Each frame is one denoising step of a 256-token canvas: **gray** noise, **green** accepted this step,
**purple** kept draft (accepted before and now), gray with an **orange bar** remasked, **white** committed.
Hover a token for its entropy; click it for the alternatives the model weighed there. Pick a demo prompt
and press *Generate*."""

INSPECTOR_HINT = "Click a token on the canvas (or rest the pointer on one) for the alternatives the model weighed there."
WHY_CHART_WIDTH = 720  # the accept-budget and structure-first charts: wide enough for their one-line titles
BUDGET_HINT = "Move the replay slider: the step on screen's accept budget appears here."
# the layers and pins boxes (structured knobs: `Knob.from_text` reads them)
TEXT_KNOB_HINTS = {"layers": "e.g. 0,1 or all; empty: off", "pins": "e.g. 11=moon, one a line; or click a token below"}
HIDDEN = "hidden"  # Gradio's visible="hidden": in the page, not shown and taking no space
PIN_HINT = "Click a token of the first block, type a text and press *Pin text here*: the next run holds it there."
THINKING_NOTE = "Renders the chat template with `enable_thinking`: the model thinks in its own channel before answering."
NO_THINKING_NOTE = "This model's chat template has no thinking channel (`enable_thinking`)."



# ---- pure helpers (no Gradio) --------------------------------------------------------------------
def model_info_markdown(info) -> str:
    where = "" if info.builtin else f" (from `{info.source}`)"  # built-in labels already say what they are
    params = f" · {info.parameters / 1e6:.1f}M parameters" if info.parameters else ""
    return (
        f"**{info.name}**{where}  \n{info.backend} on `{info.device}` · {info.dtype} · canvas {info.canvas_length} "
        f"· vocab {info.vocab_size:,}{params}"
    )


def layout_for(trace: Trace, kind: str):
    """Text layout needs the final tokens, so a run still in progress always shows the grid."""
    if kind == "text" and trace.finished and trace.steps:
        return text_layout(trace)
    return grid_layout(trace.max_blocks, trace.canvas_length)


def view_options(palette, layout_kind) -> tuple[str, str]:
    """The palette and layout to draw with; a value the radios cannot hold (an API caller's None
    or typo) falls back to the default rather than failing a replay."""
    return (palette if palette in PALETTES else "standard", layout_kind if layout_kind in ("grid", "text") else "grid")


def render_view(trace: Trace, index: int, palette: str, layout_kind: str) -> tuple[str, str, str]:
    """(canvas HTML, status line, commit-order panel) for frame `index` of a trace."""
    refs = frame_refs(trace)
    if not refs:
        return "", "Waiting for the first step...", ""
    palette, layout_kind = view_options(palette, layout_kind)
    index = max(0, min(int(index), len(refs) - 1))
    frame = frame_state(trace, index, refs)
    details = token_details(trace, index, refs=refs)  # commit step, settle step, re-masks in each tooltip
    html = render_frame_html(trace, frame, layout_for(trace, layout_kind), get_palette(palette), caption="", details=details)
    status = f"Frame {index + 1}/{len(refs)} · {frame_caption(trace, frame)}"
    if frame.kind == "step":
        status += f" · this step took {trace.steps[refs[index].index].wall_time_s * 1000:.0f} ms"
    return html, status, commit_panel_html(trace, index, refs=refs)


def end_message(trace: Trace) -> str:
    end = trace.end
    if end is None:
        return ""
    if end.finish_reason == "error":
        return end.error or "The run failed."
    if end.finish_reason == "cancelled":
        return f"Stopped after {len(trace.steps)} steps; everything recorded so far can be replayed."
    return ""


# ---- handlers ------------------------------------------------------------------------------------
# Handlers that update several components return {component name: update}; `build_app` maps the
# names to its components (`_by_name`), so no list of outputs has to agree with a tuple's order.
APP_KNOBS = tuple(knob for knob in KNOBS.values() if knob.in_app)  # a widget and a `/generate` parameter each
KNOB_OUTPUTS = (*(knob.name for knob in APP_KNOBS), "sampler_note")  # what picking a sampler updates
MODEL_OUTPUTS = ("model_picker", "model_info", "message", *KNOB_OUTPUTS, "current_model")  # and the `/load_model` API's answer


def knob_widget(knob, limits):
    """A knob's widget, from its declaration (`visualizer.settings.KNOBS`): a slider where it declares one
    (its maximum this server's cap, where hosted mode caps it; Gradio refuses more before the queue),
    a checkbox for a switch, a picker for the sampler, else a number box (our own message for a bad value)."""
    label = knob.label if "_" in knob.label else knob.label[:1].upper() + knob.label[1:]
    label += f" ({knob.unit})" if knob.unit else ""
    if knob.name == "sampler":  # its choices are the model's (`knob_updates`); another value gets our own message
        return gr.Dropdown([knob.default], value=knob.default, label=label, info=knob.help, visible=False,
                           allow_custom_value=True)
    if knob.from_text is not None:  # layers, pins: typed as text, read by the knob's own parser and check
        return gr.Textbox("", label=label, info=knob.help, placeholder=TEXT_KNOB_HINTS.get(knob.name, ""),
                          lines=2 if knob.name == "pins" else 1, max_lines=8, elem_id=f"dv-knob-{knob.name}")
    if knob.kind is bool:
        return gr.Checkbox(knob.default, label=label, info=knob.help)
    if knob.slider:
        low, high, step = knob.slider
        high = min(high, limits.knob_caps.get(knob.name, high))
        return gr.Slider(low, high, value=min(knob.default, high), step=step, label=label, info=knob.help)
    return gr.Number(value=knob.default, precision=0 if knob.kind is int else None, label=label, info=knob.help)


def knob_updates(backend, sampler: str | None = None, samplers=None, *, values: bool = True) -> dict:
    """The knobs for a run of `sampler` (None: the backend's default) on `backend`: each shown where that
    run reads it (`Capabilities.knobs_for`) and, with `values`, set to the model's defaults (without:
    only the knobs particular to a sampler or a backend); the sampler picker offers `samplers` (None:
    the backend's own), with the picked one's note, where there is a choice; thinking is offered only
    where the chat template has the switch."""
    defaults, capabilities = backend.default_settings(), backend.capabilities
    spec = capabilities.sampler(sampler)
    reads = capabilities.knobs_for(spec.name)
    samplers = list(samplers) if samplers is not None else [s.name for s in capabilities.samplers]
    updates = {}
    for knob in APP_KNOBS:
        update = {"visible": knob.name in reads}
        if knob.optional and knob.from_text is None and (values or not knob.every_backend):  # the model decides these: its value
            value = getattr(defaults, knob.name)
            update["value"] = knob.default if value is None else value
        updates[knob.name] = gr.update(**update)
    picks = len(samplers) > 1
    thinks = backend.supports_thinking()
    updates["sampler"] = gr.Dropdown(choices=samplers, value=spec.name, visible=picks)
    updates["sampler_note"] = gr.Markdown(spec.note, visible=picks)
    updates["thinking"] = gr.Checkbox(interactive=thinks, info=THINKING_NOTE if thinks else NO_THINKING_NOTE,
                                      **({"value": False} if values else {}))
    return updates


def pick_demo(title: str):
    for d in DEMOS:
        if d.title == title:
            return d.prompt, f"Watch for: {d.scaffolding}."
    return gr.skip(), ""


class Handlers:
    """The handlers that depend on this server's mode (its model list and caps).  `build_app`
    makes one for its mode and wires its methods; the other handlers only need the session."""

    def __init__(self, mode: Hosting):
        self.mode = mode

    def choice_for(self, label_or_source: str) -> ModelChoice:
        """The picker entry (or, outside hosted mode, a typed hub id or folder); BackendError when
        this server will not load it, said in under 2 s (hosting.py)."""
        problem = self.mode.model_problem(label_or_source, loaded=MODELS.loaded)
        if problem:
            raise BackendError(problem)
        return self.mode.choice_for(label_or_source)

    def samplers_for(self, choice: ModelChoice) -> dict[str, str | None]:
        """The samplers the model can run here -> the backend to run it on (None: the model's own).
        A server of one model (a sharded one) runs only the samplers of the backend it loaded. Another
        backend loads a second copy of the weights, so a public server offers that for its small
        built-in models only (the real checkpoint twice would not fit where it fits once)."""
        if self.mode.only_listed:
            return {spec.name: None for spec in MODELS.get(choice.source).capabilities.samplers}
        own = backend_for(choice.source)
        offered = {name: None if kind == own else kind for name, kind in sampler_backends(choice.source).items()}
        if self.mode.hosted and not choice.builtin:
            return {name: kind for name, kind in offered.items() if kind is None}
        return offered

    def backend_for_run(self, choice: ModelChoice, sampler) -> tuple[str | None, object]:
        """(backend name or None, the loaded backend) that runs `choice` with `sampler` (None or empty: the default)."""
        samplers = self.samplers_for(choice)
        if sampler and sampler not in samplers:
            raise BackendError(f"the sampler must be one of {', '.join(samplers)}, the ones this model runs here "
                               f"(got {str(sampler)[:40]!r})")
        kind = samplers.get(sampler) if sampler else None
        if not MODELS.loaded(choice.source, kind):
            gr.Info(f"Loading {choice.label} (once for everyone; later runs start at once)...")
        return kind, MODELS.get(choice.source, kind)

    def select_model(self, label: str, previous: str) -> dict:
        """Load the picked model on its own backend; on failure say why and keep the previous one."""
        try:
            choice = self.choice_for(label)
            backend = MODELS.get(choice.source)
        except BackendError as exc:
            try:
                choice = self.choice_for(previous) if previous and previous != label else self.choice_for(default_model())
                backend = MODELS.get(choice.source)
            except BackendError:
                return {"message": f"{exc}"}
            return {"model_picker": gr.update(value=choice.label), "model_info": model_info_markdown(backend.info),
                    "message": f"{exc}", **knob_updates(backend, None, self.samplers_for(choice)), "current_model": choice.label}
        return {"model_info": model_info_markdown(backend.info), "message": "",
                **knob_updates(backend, None, self.samplers_for(choice)), "current_model": label}

    def select_sampler(self, sampler: str, current_model: str) -> dict:
        """The picked sampler: the model on the backend that runs it (loaded if needed), the knobs that sampler reads."""
        try:
            choice = self.choice_for(current_model)
            _, backend = self.backend_for_run(choice, sampler)
            return {**knob_updates(backend, sampler, self.samplers_for(choice), values=False), "message": ""}
        except BackendError as exc:
            return {"message": f"{exc}"}

    def generate(self, prompt, model, session: RunSession, **knobs):
        """Run the model, streaming step deltas (`visualizer.live_stream`) to the live view; `knobs` are
        the knob table's widgets by name (the `/generate` API's parameters are named as the table names them).

        One small output, a `LiveRing` of the newest frame lines: Gradio sends only the slots that
        changed.  Records come in batches of whatever arrived, at most one update every
        LIVE_MIN_INTERVAL_S, so a slow connection gets fewer, larger updates instead of a backlog.
        Errors are kept in the session for `finish_run`, which runs next.
        """
        session.error = ""
        try:
            choice = self.choice_for(model)
            kind, backend = self.backend_for_run(choice, knobs.get("sampler"))
            settings = settings_from_widgets(knobs, backend.capabilities.knobs_for(knobs.get("sampler") or None))
            problem = next(filter(None, (self.mode.limits.knob_problem(k, v) for k, v in settings.to_dict().items())), None)
            if problem:
                raise ValueError(problem)
            trace = Trace(model=backend.info, prompt=prompt)
            batches = run_live(backend, choice.source, prompt, settings, trace=trace, stop=session.stop, kind=kind)
            next(batches)  # RunStart: a bad request raises here, before the session changes
        except (BackendError, ValueError) as exc:
            session.error = str(exc)
            yield gr.skip()
            return
        session.show(trace)
        session.running = True
        session.stop.clear()
        encoder = LiveEncoder(trace, run=session.run_id)
        ring = LiveRing(encoder.start_line())
        try:
            yield ring.value()
            last = time.monotonic()
            for _ in batches:
                # paced: what arrives meanwhile waits in the backend's queue and comes with the next
                # batch; a run's end goes out at once
                wait = last + LIVE_MIN_INTERVAL_S - time.monotonic()
                if wait > 0 and not trace.finished:
                    time.sleep(wait)
                ring.add(encoder.frame_lines() + (encoder.end_line() if trace.finished else ""))
                yield ring.value()
                last = time.monotonic()
            yield ring.closed()
        finally:
            batches.close()  # a closed stream (the tab went) ends the run at its next step
            session.running = False
            session.stop.clear()

    def export_run(self, session: RunSession, formats, blocks, frame_ms, hold_ms, width, with_prompt, palette, layout_kind,
                   progress=gr.Progress()):
        """Encode the session's run: (files to download, GIF preview, message)."""
        trace = session.trace
        if trace is None or not trace.steps or session.running:
            return None, None, "Export needs a finished run: generate one or load a trace."
        try:
            options = AnimationOptions(
                blocks=parse_blocks(blocks), frame_ms=_int(frame_ms, "frame duration"), hold_ms=_int(hold_ms, "hold"),
                width=_int(width, "width") if width else None, palette=palette, layout=layout_kind, prompt=bool(with_prompt),
            )
            too_many = self.mode.limits.export_problem(trace, options.blocks)
            if too_many:
                return None, None, too_many
            result = export_to_folder(
                trace, options, session.files.name, formats=tuple(formats) or ("gif",),
                progress=lambda done, total: progress((done, total), desc="Encoding"),
            )
        except (AnimationError, ExportError, ValueError) as exc:
            return None, None, str(exc)
        files = [str(path) for path in result.paths.values()]
        preview = str(result.paths["gif"]) if "gif" in result.paths else None
        return files, preview, ""


def all_frames(session: RunSession):
    """Every frame of the session's run, for a browser that fell too far behind to have them all."""
    if session.trace is None or session.trace.start is None or session.running:
        return gr.skip()
    return replay_value(session.trace, run=session.run_id)


def committed_text(trace: Trace) -> str:
    """The run's text for the Committed text box: with a thinking channel, the thoughts and the
    answer apart (the decoded text glues the channel's name and thoughts to the answer)."""
    split = thoughts_and_answer(trace)
    if split is None:
        return trace.end.text if trace.end else ""
    thoughts, answer = split
    return f"[thinking channel]\n{thoughts}\n\n[answer]\n{answer}"


def finish_run(session: RunSession):
    """After a run: (committed text, message)."""
    if session.error:
        return gr.skip(), session.error
    trace = session.trace
    return (committed_text(trace) if trace is not None and trace.end else gr.skip()), (end_message(trace) if trace else "")


def sharded_health():
    """(message, Generate button) once the sharded model can run no more; nothing changes while it can."""
    problem = app_run.sharded_problem()
    if problem is None:
        return gr.skip(), gr.skip()
    return problem, gr.Button(interactive=False)


def stop_run(session: RunSession) -> str:
    if session.running:
        session.stop.set()
        return "Stopping at the next step..."
    return ""


def show_frame(index, palette, layout_kind, session: RunSession):
    """Any recorded frame of this session's run rendered on the server, for API clients (the
    browser replays from the log it already has): (canvas HTML, status line, panel HTML)."""
    if session.trace is None or not session.trace.steps:
        return gr.skip(), "No run yet: press Generate.", gr.skip()
    try:
        index = _int(index, "frame")
    except ValueError as exc:
        return gr.skip(), str(exc), gr.skip()
    return render_view(session.trace, index, palette, layout_kind)


# ---- the "why" views: answered from the session's trace, never in the model's queue -------------
def no_trace_message(session: RunSession) -> str:
    if session.trace is None or not session.trace.steps:
        return "No run yet: press Generate or load a trace."
    return ""


DROP_STALE_JS = "() => { window.dvLiveView && window.dvLiveView.dropStale(); }"


def _message_html(text: str) -> str:
    return f'<div class="dv-why-message" style="font-size:13px;opacity:.8">{html.escape(text)}</div>'


def inspect_token(frame, position, session: RunSession) -> str:
    """A token's alternatives at the step of frame `frame` and at its commit step (HTML); where the run
    recorded layers, the lens rank of the token its block committed there, per layer and step (SVG)."""
    if no_trace_message(session):
        return _message_html(no_trace_message(session))
    try:
        frame, position = _int(frame, "frame"), _int(position, "position")
    except (TypeError, ValueError) as exc:
        return _message_html(str(exc))
    trace = session.trace
    html = alternatives_html(trace, frame, position) + trajectory_html(trace, frame, position)
    if recorded_layers(trace):
        try:
            block, _ = frame_position(trace, frame)
        except AlternativesError:  # alternatives_html said why already
            return html
        html += f'<div class="dv-lens-rank">{lens_rank_svg(trace, block, position, width=WHY_CHART_WIDTH)}</div>'
    return html


def layers_view(frame, session: RunSession) -> str:
    """The per-layer RMS heatmaps (steps x positions, one per recorded layer, one colour scale) of the
    block of frame `frame` (SVG); "" where there is nothing to show (no run, no layers recorded): the
    panel is hidden then."""
    trace = session.trace
    if trace is None or not trace.steps or not recorded_layers(trace):
        return ""
    try:
        block, _ = frame_position(trace, _int(frame, "frame"))
    except (TypeError, ValueError, AlternativesError) as exc:
        return _message_html(str(exc))
    return layer_rms_svg(trace, block, width=WHY_CHART_WIDTH)


def step_budget_view(frame, session: RunSession) -> str:
    """Why the step of frame `frame` accepted what it did: the sampler's rule, drawn (SVG)."""
    if no_trace_message(session):
        return _message_html(no_trace_message(session))
    try:
        frame = _int(frame, "frame")
    except (TypeError, ValueError) as exc:
        return _message_html(str(exc))
    return accept_budget_svg(session.trace, frame, width=WHY_CHART_WIDTH)


def structure_view(session: RunSession) -> str:
    """The structure-first figure of the session's finished run (SVG)."""
    if no_trace_message(session):
        return _message_html(no_trace_message(session))
    if session.running or not session.trace.finished:
        return _message_html("Structure first is measured once the run has finished.")
    return structure_first_svg(session.trace, width=WHY_CHART_WIDTH)


@dataclass(frozen=True)
class WhyView:
    """One "why" view, declared once: `build_app` gives it a panel the live view fills on its event,
    and an API of its own (`wire_why_views`)."""

    api_name: str  # `/alternatives`, ...
    view: Callable  # view(*args, session) -> HTML
    args: tuple[str, ...]  # the live event's data keys, also the API's parameters
    event: str | None = None  # the live view's `trigger(event, {...})` that asks for it; None: API only
    panel: str | None = None  # its panel's name under the live view; None: none
    label: str = ""  # the panel's label
    hint: str = ""  # what the panel says before the first answer
    hide_empty: bool = False  # the panel starts hidden and shows only while the view has something ("")


WHY_VIEWS = (
    WhyView("alternatives", inspect_token, ("frame", "position"), "inspect", "inspector", "Token inspector", INSPECTOR_HINT),
    WhyView("accept_budget", step_budget_view, ("frame",), "budget", "budget", "Accept budget", BUDGET_HINT),
    WhyView("layers", layers_view, ("frame",), "layers", "layer_rms", "Inside the network: RMS of each recorded layer's output",
            hide_empty=True),
    WhyView("structure_first", structure_view, ()),  # the live view draws it itself from the run's end line
)


def _event_view(view, names, hide_empty: bool = False, hint: str = ""):
    """A handler for the live view's custom events: their data (`trigger(name, {...})`) as arguments;
    with `hide_empty`, the panel is shown only when the view has something to show.

    The browser sends each ask with its run's token (the start line's "run"): an ask about an earlier run,
    answered once a new run began, gets the panel's hint (or hides it), never that run's answer.  Not
    `gr.skip()`: the page then shows the panel's last value from the server again, the old answer, over
    the hint the browser set when Generate was pressed."""
    def handler(session: RunSession, event: gr.EventData):
        run = getattr(event, "run", None)
        html = view(*(getattr(event, n, None) for n in names), session)  # EventData's keys are its attributes
        stale = "" if hide_empty else _message_html(hint)
        if run and run != session.run_id:  # checked after the answer: a run that began meanwhile counts
            html = stale
        html = _asked_in(getattr(event, "epoch", None), html, stale)
        return gr.HTML(html, visible=True if html else HIDDEN) if hide_empty else html
    return handler


def _asked_in(epoch, html: str, stale: str) -> str:
    """An answer marked with the live view's ask epoch (bumped when Generate is pressed or a new run begins),
    carrying what to show instead once that epoch is over: an answer computed before Generate was pressed but
    delivered after it (the server saw no new run yet) is shown as the hint (live_view.js `dropStale`)."""
    if not html or not isinstance(epoch, int) or isinstance(epoch, bool):
        return html
    return (f'<div class="dv-asked" data-epoch="{epoch}"><div class="dv-answer">{html}</div>'
            f'<div class="dv-stale">{stale}</div></div>')


def picked_position(event: gr.EventData):
    """A token clicked on the canvas (not one the pointer rests on): its position, for *Pin text here*;
    only the first block takes pins."""
    if getattr(event, "picked", False) and getattr(event, "block", None) == 0:
        return getattr(event, "position", None)
    return gr.skip()


def add_pin(position, text, pins, session: RunSession) -> tuple:
    """Add `POS=TEXT` to the pins box (replacing a pin at that position): (pins box, note, its accordion). Refused in one
    line when the position is not one of the canvas (the session's run's, where it has one) or the text
    is empty; the backend checks the rest (the text's tokens must fit) when the run starts."""
    try:
        position = _int(position, "the position to pin")
        canvas = session.trace.canvas_length if session.trace is not None and session.trace.start else None
        if position < 0 or (canvas is not None and position >= canvas):
            upper = f" to {canvas - 1}" if canvas else ""
            raise ValueError(f"the position to pin must be from 0{upper} (got {position}): click a token of the first block")
        if not text:
            raise ValueError("type the text to pin there first")
        if "\n" in text or "\r" in text:
            raise ValueError("a pin's text is one line: add another pin for the next line")
        kept = [line for line in str(pins or "").splitlines()
                if line.strip() and line.partition("=")[0].strip() != str(position)]
        kept.append(f"{position}={text}")
        pins = "\n".join(kept)
        KNOBS["pins"].from_text(pins)  # a hand-typed line that is no pin is named before the run
    except ValueError as exc:
        return gr.skip(), str(exc), gr.skip()
    note = f"Pinned {text!r} at position {position}: the next *Generate* holds it there (see *Layers and pins*)."
    return pins, note, gr.Accordion(open=True)


def settings_from_widgets(values: dict, reads) -> GenerationSettings:
    """The settings of the knobs' widget values; a knob this run does not read (`reads`) is not read
    here either (recorded as None), except layers or pins given to a run that does not take them: a
    ValueError, never a silent stock run. An empty box is None (the model's default) where None is a value."""
    settings = {}
    for knob in APP_KNOBS:
        value = values.get(knob.name)
        if knob.from_text is not None and knob.name not in reads and knob.from_text(value):  # never dropped silently
            raise ValueError(f"this model's {values.get('sampler') or 'default'} sampler does not take {knob.label}: "
                             f"empty the {knob.label} box (Layers and pins) or pick another sampler")
        if knob.name not in reads or (knob.optional and (value is None or value == "")):
            continue
        if knob.from_text is not None:  # layers, pins: ValueError in one line when the text is not one
            settings[knob.name] = knob.from_text(value)
        elif knob.kind is bool:
            settings[knob.name] = bool(value)
        elif knob.kind is str:
            settings[knob.name] = value
        else:
            settings[knob.name] = (_int if knob.kind is int else _float)(value, knob.label)
    return GenerationSettings(**settings)


def _int(value, name: str) -> int:
    number = _float(value, name)
    if number != int(number):
        raise ValueError(f"{name} must be a whole number (got {value})")
    return int(number)


def _float(value, name: str) -> float:
    """A knob's value as a finite float, or ValueError with a message (API callers send anything)."""
    if value is None or value == "":
        raise ValueError(f"{name} is empty")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number (got {str(value)[:40]!r})") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number (got {value})")
    return number


# ---- export, save, load, compare -----------------------------------------------------------------
def save_trace(session: RunSession):
    """The session's run as a JSON file to download."""
    if session.trace is None or session.running:
        return None, "Nothing to save yet: generate a run (and let it finish) first."
    return [str(save_download(session.trace, session.files.name))], ""


LOAD_OUTPUTS = ("live", "final_text", "message", "session")  # and the `/load_trace` API's answer


def load_trace_file(path, session: RunSession, request: gr.Request) -> dict:
    """Replay an uploaded (or example) trace in the live view, from the frames a live run would
    have sent.  The session is an output too: Gradio keeps a State's time-to-live only for values
    a handler returned.  An API client that only loads traces loads no page and never generates,
    so it is registered here, to be released when it goes (sessions.py)."""
    SESSIONS.register(session, request)
    if path is None:
        return {"session": session}
    if session.running:
        return {"message": "Stop the current run before loading another one.", "session": session}
    try:
        trace = load_upload(path)
    except TraceError as exc:
        return {"message": str(exc), "session": session}
    session.show(trace)
    return {"live": replay_value(trace, run=session.run_id), "final_text": committed_text(trace), "message": "", "session": session}


PIN_OUTPUTS = ("compare_note", "compare_canvas", "compare_slider", "session")  # and the `/pin_a`, `/pin_b` APIs' answer


def pin_run(which: int, palette, layout_kind, session: RunSession) -> dict:
    """Use the session's current run as run A (0) or B (1)."""
    if session.trace is None or not session.trace.steps or session.running:
        return {"compare_note": "No finished run to compare yet.", "session": session}
    session.compare[which] = session.trace
    settings = session.trace.settings
    note = f"Run {'AB'[which]}: {session.trace.prompt[:60]!r}, seed {settings.seed}, sampler {settings.sampler or 'default'}"
    html, slider = show_compare(0, palette, layout_kind, session)
    return {"compare_note": note, "compare_canvas": html, "compare_slider": slider, "session": session}


def show_compare(step, palette, layout_kind, session: RunSession):
    """Both pinned runs at global step `step`: (HTML, slider)."""
    a, b = session.compare
    if a is None or b is None:
        return "", gr.skip()
    last = len(align(a, b)) - 1
    palette, layout_kind = view_options(palette, layout_kind)
    html = compare_html(a, b, step, palette=palette, layout=layout_kind)
    return html, gr.Slider(maximum=max(last, 1), value=min(int(step), last), interactive=True)


def export_compare(palette, layout_kind, session: RunSession, progress=gr.Progress()):
    a, b = session.compare
    if a is None or b is None:
        return None, "Pin two runs first."
    try:
        animation = build_compare_animation(
            a, b, AnimationOptions(palette=palette, layout=layout_kind),
            progress=lambda done, total: progress((done, total), desc="Rendering"),
        )
        path = save_gif(animation, f"{session.files.name}/compare.gif")
    except (AnimationError, OSError) as exc:
        return None, str(exc)
    return [str(path)], ""


# ---- the UI --------------------------------------------------------------------------------------
def build_app(initial_model: str | None = None, hosting_mode: Hosting | None = None) -> gr.Blocks:
    """The UI for a server in `hosting_mode` (default: as the environment says, see hosting.py): the
    panels laid out (controls beside the live view, files and compare under it), then wired."""
    own_gradio_temp_dir()  # before any component caches a file: no other app can delete this one's
    mode = hosting_mode or Hosting.from_environment()
    handlers = Handlers(mode)
    initial = handlers.choice_for(initial_model) if initial_model else mode.choices[0]
    # Hosted: Gradio deletes its copies of uploads and downloads an hour after they were made.
    delete_cache = (900, 3600) if mode.hosted else None
    with gr.Blocks(title="DiffusionGemma denoising visualizer", fill_width=True, delete_cache=delete_cache) as demo_app:
        # an instance, not the class: a callable would get a load event of Gradio's racing SESSIONS.register (sessions.py)
        ui = {"session": gr.State(RunSession(), time_to_live=SESSION_TTL_S, delete_callback=RunSession.close),
              "current_model": gr.State(initial.label)}
        gr.Markdown(INTRO)
        if mode.hosted:
            gr.Markdown(hosting.hosted_note(mode.limits), elem_id="dv-hosted-note")
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                ui |= controls_panel(mode, initial)
            with gr.Column(scale=4):
                ui |= live_panel()
                with gr.Accordion("Save, load and export", open=False):
                    ui |= files_panel()
                with gr.Accordion("Compare two runs", open=False):
                    ui |= compare_panel()
        wire_model_and_run(demo_app, ui, handlers, mode)
        wire_why_views(ui)
        wire_files_and_compare(ui, handlers)
    return demo_app


# ---- the panels: each lays out its components and returns them by name ---------------------------
def controls_panel(mode: Hosting, initial: ModelChoice) -> dict:
    """The model and its sampler, the prompt, the knobs, the view's options, Generate and Stop."""
    ui = {"model_picker": gr.Dropdown(
        choices=[c.label for c in mode.choices], value=initial.label, label="Model",
        info=("The one model this server runs." if mode.only_listed else "The models this server offers."
              if mode.hosted else "Pick one, or type a hub id or a local folder."),
        allow_custom_value=not mode.closed,
    )}
    ui["model_info"] = gr.Markdown()
    # the second choice: the sampler (with its note); the backend that runs it follows
    knobs = {"sampler": knob_widget(KNOBS["sampler"], mode.limits)}
    ui["sampler_note"] = gr.Markdown(visible=False)
    ui["demo_picker"] = gr.Dropdown(choices=[d.title for d in DEMOS], value=None, label="Demo prompt")
    with gr.Accordion("What the built-in model knows", open=False, elem_id="dv-builtin-guide"):
        gr.Markdown(guide_markdown())
    ui["watch_for"] = gr.Markdown()
    ui["prompt"] = gr.Textbox(label="Prompt", lines=4, value=DEMOS[0].prompt)
    with gr.Accordion("Knobs (defaults: the checkpoint's generation config)", open=False):
        # one widget per knob of the table, shown where the model's sampler reads it (`knob_updates`)
        knobs |= {knob.name: knob_widget(knob, mode.limits) for knob in APP_KNOBS
                  if knob.name != "sampler" and knob.from_text is None}
        ui["count_thoughts"] = gr.Checkbox(
            False, label="Count thought tokens in the commit order",
            info="Off: tau_b, the panel and structure first measure the answer only.",
        )
    with gr.Accordion("Layers and pins (docs/layers-and-pins.md)", open=False) as ui["pins_box"]:
        # the structured knobs: recorded layers (watching only) and pinned tokens (an intervention)
        knobs |= {knob.name: knob_widget(knob, mode.limits) for knob in APP_KNOBS if knob.from_text is not None}
    ui["knobs"] = {knob.name: knobs[knob.name] for knob in APP_KNOBS}  # the table's order: the API's parameter order
    ui |= ui["knobs"]
    with gr.Row():
        ui["palette"] = gr.Radio(["standard", "colorblind"], value="standard", label="Palette")
        ui["layout_kind"] = gr.Radio([("Grid", "grid"), ("Text (after the run)", "text")], value="grid", label="Layout")
    with gr.Row():
        ui["generate_btn"] = gr.Button("Generate", variant="primary")
        ui["stop_btn"] = gr.Button("Stop", variant="stop")
    ui["message"] = gr.Markdown(elem_id="dv-message")
    return ui


def live_panel() -> dict:
    """The live view, the why-views' panels under it, the committed text."""
    # The live view: canvas, replay slider and commit-order panel, drawn in the browser by
    # visualizer/static/live_view.js from the live log.  gr.HTML runs that code as its `js_on_load` (it
    # defines window.dvLiveView once, then mounts on this element); the template never depends on the
    # value, so Gradio never re-renders it and the script owns the DOM inside.
    ui = {"live": gr.HTML(
        [], html_template='<div class="dv-live"></div>', elem_id="dv-live", palette="standard",
        js_on_load=LIVE_VIEW_JS + "\nwindow.dvLiveView.mount(element, props, watch, trigger);",
    )}
    # the "why" views the live view asks for (full width: the chart's text stays legible)
    for why in WHY_VIEWS:
        if why.panel:
            ui[why.panel] = gr.HTML("" if why.hide_empty else _message_html(why.hint), label=why.label,
                                    elem_id=f"dv-{why.panel}", padding=True, visible=HIDDEN if why.hide_empty else True)
        if why.panel == "inspector":  # a clicked token's position, to pin a text there for the next run
            with gr.Row(elem_id="dv-pin-row"):
                ui["pin_position"] = gr.Number(None, precision=0, minimum=0, label="Position to pin (first block)",
                                               scale=1, min_width=160)
                ui["pin_text"] = gr.Textbox(label="Text to pin there", placeholder="e.g. moon", scale=2, elem_id="dv-pin-text")
                ui["pin_btn"] = gr.Button("Pin text here", scale=1, min_width=140)
            ui["pin_note"] = gr.Markdown(PIN_HINT, elem_id="dv-pin-note")
    ui["final_text"] = gr.Textbox(label="Committed text", lines=6, interactive=False, elem_id="dv-final-text")
    return ui


def files_panel() -> dict:
    """Load a trace (or an example), save the run, export animations."""
    ui = {}
    with gr.Row():
        ui["trace_upload"] = gr.File(label="Load a trace (.json)", file_types=[".json"], type="filepath")
        ui["downloads"] = gr.File(label="Downloads", file_count="multiple", interactive=False)
    examples = [[str(p)] for p in example_traces()]
    if examples:
        gr.Examples(examples, inputs=ui["trace_upload"], label="Recorded runs: replay without a model")
    ui["save_btn"] = gr.Button("Save trace (.json)")
    with gr.Row():
        ui["export_options"] = [
            gr.CheckboxGroup(["gif", "mp4", "webp"], value=["gif"], label="Formats"),
            gr.Textbox(label="Blocks (e.g. 1,3; empty: all)"),
            gr.Number(value=150, precision=0, label="ms per step"),
            gr.Number(value=2500, precision=0, label="hold last frame (ms)"),
            gr.Number(value=None, precision=0, label="width px (empty: natural)"),
            gr.Checkbox(value=True, label="show the prompt"),
        ]  # in `Handlers.export_run`'s order
    ui["export_btn"] = gr.Button("Export animation")
    ui["preview"] = gr.Image(label="GIF", type="filepath", interactive=False)
    return ui


def compare_panel() -> dict:
    """Two pinned runs side by side, stepped together."""
    ui = {}
    with gr.Row():
        ui["pin_a"], ui["pin_b"] = gr.Button("Use this run as A"), gr.Button("Use this run as B")
    ui["compare_note"] = gr.Markdown()
    ui["compare_canvas"] = gr.HTML()
    ui["compare_slider"] = gr.Slider(0, 1, value=0, step=1, label="Both runs at step", interactive=False)
    ui["compare_btn"] = gr.Button("Export comparison GIF")
    return ui


# ---- the wiring ------------------------------------------------------------------------------------
def wire_model_and_run(demo_app: gr.Blocks, ui: dict, handlers: Handlers, mode: Hosting) -> None:
    """Sessions, the model and sampler pickers, Generate and Stop, the frames a browser asks for again,
    the view's options (drawn in the browser) and `/show_frame` for API clients."""
    named = functools.partial(_by_name, ui)
    session, model_picker, current_model, knobs = ui["session"], ui["model_picker"], ui["current_model"], ui["knobs"]
    # every tab registers when its page loads, so closing it releases what it holds (sessions.py)
    demo_app.load(SESSIONS.register, session, None, api_visibility="private", show_progress="hidden", concurrency_limit=None)
    demo_app.unload(SESSIONS.release)
    demo_app.load(**named(handlers.select_model, MODEL_OUTPUTS), inputs=[model_picker, current_model], api_name="load_model")
    model_picker.change(**named(handlers.select_model, MODEL_OUTPUTS), inputs=[model_picker, current_model], api_visibility="private")
    ui["demo_picker"].change(pick_demo, ui["demo_picker"], [ui["prompt"], ui["watch_for"]], api_visibility="private")
    knobs["sampler"].input(**named(handlers.select_sampler, (*KNOB_OUTPUTS, "message")), inputs=[knobs["sampler"], current_model],
                           api_visibility="private")
    # A new run or trace: the why-views go back to their hints, never showing the previous run's
    # answers.  Set in the browser and registered before the run's own handler: Gradio's front
    # end runs the handlers of one trigger in order, each after the one before has finished, so
    # a hint registered after `generate` would land when the run ends, over the new answers.
    panels = [why for why in WHY_VIEWS if why.panel and not why.hide_empty]
    # (first the live view stops asking about the run on screen: an ask sent after the click would answer over a hint)
    hints = f"() => {{ window.dvLiveView && window.dvLiveView.runComing(); return {json.dumps([_message_html(why.hint) for why in panels])}; }}"
    hidden = [ui[why.panel] for why in WHY_VIEWS if why.hide_empty]  # shown again once the new run has something
    for starts in (ui["generate_btn"].click, ui["trace_upload"].change):
        starts(None, None, [ui[why.panel] for why in panels], js=hints)
        starts(lambda: {panel: gr.HTML(visible=HIDDEN) for panel in hidden}, None, hidden, api_visibility="private",
               concurrency_limit=None, show_progress="hidden")  # {component: update}: one output takes a list as its value
    ui["generate_btn"].click(
        _naming_knobs(handlers.generate),
        [ui["prompt"], model_picker, session],
        ui["live"],
        inputs_kwargs=knobs,  # the API's parameters are named as the knob table names them
        api_name="generate",
        concurrency_limit=1,
        concurrency_id="model",
        show_progress="minimal",
        validator=generate_validator(  # outside the queue: a bad model id never waits in it
            mode, list(knobs), register_session=SESSIONS.register, loaded=MODELS.loaded,
        ),
    ).then(finish_run, session, [ui["final_text"], ui["message"]], api_name="run_message", concurrency_limit=None,
           show_progress="hidden")
    ui["live"].need_frames(all_frames, session, ui["live"], api_visibility="private", concurrency_limit=None, show_progress="hidden")
    ui["stop_btn"].click(stop_run, session, ui["message"], api_name="stop", concurrency_limit=None)
    if app_run.LEADER is not None:  # a sharded model: every open tab learns within seconds that a rank stopped
        gr.Timer(HEALTH_TICK_S).tick(sharded_health, None, [ui["message"], ui["generate_btn"]], api_name="sharded_health",
                                     concurrency_limit=None, show_progress="hidden")
    # palette and layout are the browser's business: no server round trip
    ui["palette"].change(None, ui["palette"], None, js="(name) => { window.dvLiveView.setPalette(name); }")
    ui["layout_kind"].change(None, ui["layout_kind"], None, js="(kind) => { window.dvLiveView.setLayout(kind); }")
    ui["count_thoughts"].change(None, ui["count_thoughts"], None, js="(flag) => { window.dvLiveView.setIncludeThought(flag); }")
    with gr.Row(visible=False):  # server-side frames for API clients (`/show_frame`)
        api_frame, api_canvas, api_status, api_panel, api_button = gr.Number(0, precision=0), gr.HTML(), gr.Markdown(), gr.HTML(), gr.Button()
    api_button.click(show_frame, [api_frame, ui["palette"], ui["layout_kind"], session], [api_canvas, api_status, api_panel],
                     api_name="show_frame", concurrency_limit=None, show_progress="hidden")


def wire_why_views(ui: dict) -> None:
    """Each why-view of WHY_VIEWS, from its one declaration: answered to the live view's event into its
    panel, and as an API of its own over hidden inputs (API clients cannot send a custom event's data).
    Both outside the model's queue."""
    session = ui["session"]
    # "always_last": an ask made while the previous one is in flight is answered after it, never
    # dropped (Gradio's default for custom events, "once", would leave the previous step's chart)
    quiet = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden", trigger_mode="always_last")
    with gr.Row(visible=False):
        # text inputs, one per argument name, so that any input gets a one-line answer
        args = {name: gr.Textbox() for name in dict.fromkeys(name for why in WHY_VIEWS for name in why.args)}
        for why in WHY_VIEWS:
            answer, ask = gr.HTML(), gr.Button()
            ask.click(why.view, [args[name] for name in why.args] + [session], answer, api_name=why.api_name,
                      concurrency_limit=None, show_progress="hidden")
            if why.event:  # the live view asks with `trigger(event, {...})`; then, in the browser, an answer to an
                # ask of an earlier epoch gives way to its hint (it was computed before Generate was pressed)
                getattr(ui["live"], why.event)(_event_view(why.view, why.args, why.hide_empty, why.hint), session, ui[why.panel],
                                               **quiet).then(None, js=DROP_STALE_JS)
    # a clicked token's position goes to *Pin text here*, which adds POS=TEXT to the pins box
    ui["live"].inspect(picked_position, None, ui["pin_position"], **quiet)
    ui["pin_btn"].click(add_pin, [ui["pin_position"], ui["pin_text"], ui["pins"], session],
                        [ui["pins"], ui["pin_note"], ui["pins_box"]], api_visibility="private", concurrency_limit=None,
                        show_progress="hidden")


def wire_files_and_compare(ui: dict, handlers: Handlers) -> None:
    """Load, save and export; pin two runs and step them together."""
    named = functools.partial(_by_name, ui)
    session, palette, layout_kind = ui["session"], ui["palette"], ui["layout_kind"]
    ui["trace_upload"].change(**named(load_trace_file, LOAD_OUTPUTS), inputs=[ui["trace_upload"], session], api_name="load_trace")
    ui["save_btn"].click(save_trace, session, [ui["downloads"], ui["message"]], api_name="save_trace")
    ui["export_btn"].click(
        handlers.export_run, [session, *ui["export_options"], palette, layout_kind],
        [ui["downloads"], ui["preview"], ui["message"]], api_name="export",
    )
    for which, button in enumerate((ui["pin_a"], ui["pin_b"])):
        pin = functools.partial(pin_run, which)
        button.click(**named(pin, PIN_OUTPUTS), inputs=[palette, layout_kind, session], api_name=f"pin_{'ab'[which]}")
    ui["compare_slider"].input(show_compare, [ui["compare_slider"], palette, layout_kind, session],
                               [ui["compare_canvas"], ui["compare_slider"]], api_name="compare_step", show_progress="hidden")
    ui["compare_btn"].click(export_compare, [palette, layout_kind, session], [ui["downloads"], ui["message"]], api_name="export_compare")


def _naming_knobs(handler):
    """`handler(prompt, model, session, **knobs)` as a generator whose signature names every knob of the
    table, keyword-only with None as default: Gradio reads it for the `/generate` API's parameter names
    and makes a knob whose widget starts empty (editing threshold) optional, None meaning the model's default."""
    def fn(prompt, model, session, **knobs):
        yield from handler(prompt, model, session, **knobs)

    keyword = inspect.Parameter.KEYWORD_ONLY
    fn.__signature__ = inspect.signature(fn).replace(parameters=[
        *list(inspect.signature(fn).parameters.values())[:3],
        *(inspect.Parameter(knob.name, keyword, default=None) for knob in APP_KNOBS),
    ])
    fn.__doc__ = handler.__doc__
    return fn


def _by_name(ui: dict, handler, names: tuple[str, ...]) -> dict:
    """`fn` and `outputs` for an event whose `handler` returns {name: update}: `fn` hands Gradio the
    same as {component: update}, and `outputs` are the named components, in the API's order."""
    @functools.wraps(handler)  # Gradio reads the wrapped signature (gr.Request, gr.Progress, ...)
    def fn(*args):
        return {ui[name]: update for name, update in handler(*args).items()}

    return {"fn": fn, "outputs": [ui[name] for name in names]}


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
                  "and the idle app costs more CPU (see app.queue_app)")
    for name, seconds in intervals.items():
        if name not in missing:
            setattr(queue, name, seconds)
    return demo_app


@functools.cache
def _say_once(message: str) -> None:
    _LOG.warning(message)


def main(argv=None) -> None:
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
        signal.signal(signal.SIGTERM, functools.partial(_end_on_sigterm, demo_app, leader))
        threading.Thread(target=_restart_when_out_of_step, args=(demo_app, leader), name="sharded-restart",
                         daemon=True).start()
    launched = False
    try:
        queue_app(demo_app).launch(
            server_name=args.host, server_port=args.port, css=CSS, theme=gr.themes.Soft(),
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


def _end_on_sigterm(demo_app: gr.Blocks, leader, signum, frame) -> None:
    """torchrun's SIGTERM: a rank stopped (torchrun ends the others within its 0.1 s monitor interval),
    or the job is being shut down. Runs and later requests end with the reason, open tabs see it on
    their next health tick, then the server closes (and `main` says goodbye to any followers left)."""
    lost = leader.lost(wait=0.5)  # the followers still there linger in their collective: they are not the lost one
    problem = lost or "This server is shutting down (torchrun sent SIGTERM)."
    leader.end(problem)
    print(f"error: {problem}" if lost else problem, file=sys.stderr, flush=True)
    time.sleep(TERM_GRACE_S)
    demo_app.close()


def _restart_when_out_of_step(demo_app: gr.Blocks, leader) -> None:
    """A run failed on rank 0 alone and torchrun has restarts left (`Leader.restarting`): once open tabs
    had time to read why, close the app; `main` then exits 1 and torchrun restarts every rank."""
    while not leader.restarting.wait(0.5):
        if leader.closing:
            return
    print(f"error: {leader.problem()}", file=sys.stderr, flush=True)
    time.sleep(TERM_GRACE_S)
    demo_app.close()


if __name__ == "__main__":
    main()
