"""Watch DiffusionGemma denoise: the Gradio app.

    python app.py                      # the built-in model, on http://127.0.0.1:7860
    python app.py --model FOLDER_OR_ID --port 7861
    python app.py --hosted             # as on a public Space (automatic where SPACE_ID is set)

Thin on purpose: the backend yields step records, `visualizer` turns them into frames; the
handlers here only adapt between the two and Gradio.  Each browser session keeps its own run in
a `gr.State`; generations share the model through one queue (one run at a time, queue position
shown); replaying a recorded step never touches the model.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import logging
import math
import tempfile
import threading
from pathlib import Path

import hosting  # first: on ZeroGPU it imports `spaces` before anything imports torch
import gradio as gr

from backends import BackendError, ModelChoice, default_model
from hosting import MODELS, Hosting, generate_validator
from sessions import SessionRegistry
from prompts.builtin_guide import guide_markdown
from prompts.demos import DEMOS
from visualizer.animation import AnimationError, AnimationOptions, parse_blocks
from visualizer.charts import commit_panel_html, token_details
from visualizer.compare import align, build_compare_animation, compare_html
from visualizer.alternatives import alternatives_html
from visualizer.export import ExportError, export_to_folder, save_gif
from visualizer.insight_charts import accept_budget_svg, structure_first_svg
from visualizer.layout import grid_layout, text_layout
from visualizer.live_stream import LiveEncoder, LiveRing, batches, replay_value
from visualizer.palette import PALETTES, get_palette
from visualizer.render_html import frame_caption, render_frame_html
from visualizer.settings import DEFAULT_RECORD_TOPK, MAX_RECORD_TOPK, SAMPLER_ENTROPY_BOUND, GenerationSettings
from visualizer.states import frame_refs, frame_state
from visualizer.thinking import thoughts_and_answer
from visualizer.replay import example_traces, load_upload, save_download
from visualizer.trace import Trace, TraceError

# At most ~6 live updates a second: each costs Gradio a few ms of server CPU whatever it carries, so at
# 25 steps/s an update carries ~4 frames (BENCHMARKS.md, "Fourth run"); the view paces them out
# (live_view.js), and a run's last frames and end line go out at once (`batches` flushes the end).
LIVE_MIN_INTERVAL_S = 0.16
LIVE_VIEW_JS = (Path(__file__).resolve().parent / "visualizer" / "static" / "live_view.js").read_text(encoding="utf-8")
HOSTING = Hosting.from_environment()  # build_app(hosting=...) replaces it; see hosting.py
SESSIONS = SessionRegistry()  # frees a session's run and files when its tab closes
SESSION_TTL_S = 3 * 3600  # an idle session's state is dropped after this (Gradio's time_to_live)
# Gradio's queue looks for work every 1 ms on Linux and for progress every 10 ms, idle or busy: the app
# cost 32-60 ms of CPU a second with a page open and nothing to do, about what a live run adds at 25
# steps/s. At 20 ms and 100 ms it costs 5-12 ms a second (BENCHMARKS.md, "Fifth run"); the price: a
# queued call may wait up to 20 ms more to start, and gr.Progress bars (exports) move 10 times a second.
QUEUE_POLL_S = 0.02
PROGRESS_POLL_S = 0.1
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
THINKING_NOTE = "Renders the chat template with `enable_thinking`: the model thinks in its own channel before answering."
NO_THINKING_NOTE = "This model's chat template has no thinking channel (`enable_thinking`)."



class RunSession:
    """One browser session's run: the trace being recorded or replayed, and its stop flag."""

    def __init__(self):
        self.trace: Trace | None = None
        self.running = False
        self.error = ""  # why the last Generate did not start, shown by finish_run
        self.stop = threading.Event()
        self.compare: list[Trace | None] = [None, None]  # runs A and B of the comparison
        self.files = tempfile.TemporaryDirectory(prefix="dv-session-")  # downloads; removed with the session

    def __deepcopy__(self, memo):  # gr.State deep-copies initial values; each session gets a fresh one
        return RunSession()

    def close(self) -> None:
        """The session ended: stop its run, drop its traces and delete its downloads folder."""
        self.stop.set()
        self.trace, self.compare = None, [None, None]
        self.files.cleanup()


# ---- pure helpers (no Gradio) --------------------------------------------------------------------
def choice_for(label_or_source: str) -> ModelChoice:
    """The picker entry (or, outside hosted mode, a typed hub id or folder); BackendError when this
    server will not load it, said in under 2 s (hosting.py)."""
    problem = HOSTING.model_problem(label_or_source)
    if problem:
        raise BackendError(problem)
    return HOSTING.choice_for(label_or_source)


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
def knob_updates(backend):
    """The knobs at the model's defaults, shown where the backend declares them (`capabilities`):
    the sampler picker where it has more than one sampler; thinking only where the chat template
    has the switch."""
    settings, caps = backend.default_settings(), backend.capabilities
    thinks = backend.supports_thinking()
    spec = caps.sampler(settings.sampler)
    pick = len(caps.samplers) > 1
    has_temperature = "temperature" in caps.knobs
    return (
        gr.Slider(value=settings.max_new_tokens),
        gr.Slider(value=settings.max_denoising_steps),
        gr.Number(value=settings.entropy_bound),
        gr.Number(value=settings.t_min),
        gr.Number(value=settings.t_max),
        gr.Dropdown(choices=[s.name for s in caps.samplers], value=spec.name, visible=pick),
        gr.Slider(value=settings.temperature if settings.temperature is not None else 1.0, visible=has_temperature),
        gr.Markdown(spec.note, visible=pick),
        gr.Checkbox(value=False, interactive=thinks, info=THINKING_NOTE if thinks else NO_THINKING_NOTE),
    )


N_KNOBS = 9  # what knob_updates returns


def select_model(label: str, previous: str):
    """Load the picked model; on failure say why and keep the previous one."""
    try:
        backend = MODELS.get(choice_for(label).source)
    except BackendError as exc:
        fallback = choice_for(previous) if previous and previous != label else choice_for(default_model())
        try:
            backend = MODELS.get(fallback.source)
        except BackendError:
            return (gr.skip(), gr.skip(), f"{exc}", *([gr.skip()] * N_KNOBS), gr.skip())
        return (gr.update(value=fallback.label), model_info_markdown(backend.info), f"{exc}", *knob_updates(backend), fallback.label)
    return (gr.skip(), model_info_markdown(backend.info), "", *knob_updates(backend), label)


def sampler_note_for(name: str, model_label: str) -> str:
    """The one-line note of the picked sampler, as the loaded model's backend declares it."""
    try:
        return MODELS.get(choice_for(model_label).source).capabilities.sampler(name).note
    except BackendError:
        return ""


def pick_demo(title: str):
    for d in DEMOS:
        if d.title == title:
            return d.prompt, f"Watch for: {d.scaffolding}."
    return gr.skip(), ""


def generate(
    prompt, model_label, max_new_tokens, steps, entropy_bound, t_min, t_max, seed, sampler, temperature,
    session: RunSession, thinking=False, record_topk=DEFAULT_RECORD_TOPK,
):
    """Run the model, streaming step deltas (`visualizer.live_stream`) to the live view.

    One small output, a `LiveRing` of the newest frame lines: Gradio sends only the slots that
    changed.  Records are read in batches of whatever arrived, so a slow connection gets fewer,
    larger updates instead of a backlog.  Errors are kept in the session for `finish_run`,
    which runs next.
    """
    session.error = ""
    try:
        choice = choice_for(model_label)
        if not MODELS.loaded(choice.source):
            gr.Info(f"Loading {choice.label} (once for everyone; later runs start at once)...")
        backend = MODELS.get(choice.source)
        knobs = backend.capabilities.knobs
        settings = GenerationSettings(
            max_new_tokens=_int(max_new_tokens, "max new tokens"),
            max_denoising_steps=_int(steps, "max denoising steps"),
            entropy_bound=_float(entropy_bound, "entropy bound"),
            t_min=_float(t_min, "t_min"),
            t_max=_float(t_max, "t_max"),
            seed=_int(seed, "seed"),
            sampler=sampler if "sampler" in knobs else None,
            temperature=_float(temperature, "temperature") if "temperature" in knobs else None,
            record_topk=_int(record_topk, "record candidates (top-k)"),
            thinking=bool(thinking),
        )
        problem = HOSTING.limits.tokens_problem(settings.max_new_tokens) or HOSTING.limits.steps_problem(settings.max_denoising_steps)
        if problem:
            raise ValueError(problem)
        records = hosting.generation_records(backend, choice.source, prompt, settings, session.stop)
        first = next(records)  # validation happens here: a bad request raises before any state changes
    except (BackendError, ValueError) as exc:
        session.error = str(exc)
        yield gr.skip()
        return
    trace = Trace(model=backend.info, prompt=prompt)
    trace.append(first)
    session.trace, session.running = trace, True
    session.stop.clear()
    encoder = LiveEncoder(trace)
    ring = LiveRing(encoder.start_line())
    try:
        yield ring.value()
        for batch in batches(records, stop=session.stop.set, min_interval=LIVE_MIN_INTERVAL_S):
            for record in batch:
                trace.append(record)
            ring.add(encoder.frame_lines() + (encoder.end_line() if trace.finished else ""))
            yield ring.value()
        yield ring.closed()
    finally:
        session.running = False
        session.stop.clear()


def all_frames(session: RunSession):
    """Every frame of the session's run, for a browser that fell too far behind to have them all."""
    if session.trace is None or session.trace.start is None or session.running:
        return gr.skip()
    return replay_value(session.trace)


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


def _message_html(text: str) -> str:
    return f'<div class="dv-why-message" style="font-size:13px;opacity:.8">{html.escape(text)}</div>'


def inspect_token(frame, position, session: RunSession) -> str:
    """A token's alternatives at the step of frame `frame` and at its commit step (HTML)."""
    if no_trace_message(session):
        return _message_html(no_trace_message(session))
    try:
        frame, position = _int(frame, "frame"), _int(position, "position")
    except (TypeError, ValueError) as exc:
        return _message_html(str(exc))
    return alternatives_html(session.trace, frame, position)


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


def _event_view(view, names):
    """A handler for the live view's custom events: their data (`trigger(name, {...})`) as arguments."""
    def handler(session: RunSession, event: gr.EventData):
        data = getattr(event, "_data", None) or {}
        return view(*(data.get(n) for n in names), session)
    return handler


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
def export_run(session: RunSession, formats, blocks, frame_ms, hold_ms, width, with_prompt, palette, layout_kind, progress=gr.Progress()):
    """Encode the session's run: (files to download, GIF preview, message)."""
    trace = session.trace
    if trace is None or not trace.steps or session.running:
        return None, None, "Export needs a finished run: generate one or load a trace."
    try:
        options = AnimationOptions(
            blocks=parse_blocks(blocks), frame_ms=_int(frame_ms, "frame duration"), hold_ms=_int(hold_ms, "hold"),
            width=_int(width, "width") if width else None, palette=palette, layout=layout_kind, prompt=bool(with_prompt),
        )
        too_many = HOSTING.limits.export_problem(trace, options.blocks)
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


def save_trace(session: RunSession):
    """The session's run as a JSON file to download."""
    if session.trace is None or session.running:
        return None, "Nothing to save yet: generate a run (and let it finish) first."
    return [str(save_download(session.trace, session.files.name))], ""


def load_trace_file(path, session: RunSession):
    """Replay an uploaded (or example) trace in the live view, from the frames a live run would
    have sent: (live-view value, committed text, message, session)."""
    skip = gr.skip()
    if path is None:
        return skip, skip, skip, session
    if session.running:
        return skip, skip, "Stop the current run before loading another one.", session
    try:
        trace = load_upload(path)
    except TraceError as exc:
        return skip, skip, str(exc), session
    session.trace = trace
    return replay_value(trace), committed_text(trace), "", session


def pin_run(which: int, palette, layout_kind, session: RunSession):
    """Use the session's current run as run A (0) or B (1): (note, comparison HTML, slider, session)."""
    if session.trace is None or not session.trace.steps or session.running:
        return "No finished run to compare yet.", gr.skip(), gr.skip(), session
    session.compare[which] = session.trace
    settings = session.trace.settings
    note = f"Run {'AB'[which]}: {session.trace.prompt[:60]!r}, seed {settings.seed}, sampler {settings.sampler or 'default'}"
    html, slider = show_compare(0, palette, layout_kind, session)
    return note, html, slider, session


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
    global HOSTING
    HOSTING = hosting_mode or HOSTING
    choices, limits = HOSTING.choices, HOSTING.limits
    initial = choice_for(initial_model) if initial_model else choices[0]
    # Hosted: Gradio deletes its copies of uploads and downloads an hour after they were made.
    delete_cache = (900, 3600) if HOSTING.hosted else None
    with gr.Blocks(title="DiffusionGemma denoising visualizer", fill_width=True, delete_cache=delete_cache) as demo_app:
        session = gr.State(RunSession, time_to_live=SESSION_TTL_S, delete_callback=RunSession.close)
        current_model = gr.State(initial.label)
        gr.Markdown(INTRO)
        if HOSTING.hosted:
            gr.Markdown(hosting.hosted_note(limits), elem_id="dv-hosted-note")
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                model_picker = gr.Dropdown(
                    choices=[c.label for c in choices], value=initial.label, label="Model",
                    info="The models this server offers." if HOSTING.hosted else "Pick one, or type a hub id or a local folder.",
                    allow_custom_value=not HOSTING.hosted,
                )
                model_info = gr.Markdown()
                demo_picker = gr.Dropdown(choices=[d.title for d in DEMOS], value=None, label="Demo prompt")
                with gr.Accordion("What the built-in model knows", open=False, elem_id="dv-builtin-guide"):
                    gr.Markdown(guide_markdown())
                watch_for = gr.Markdown()
                prompt = gr.Textbox(label="Prompt", lines=4, value=DEMOS[0].prompt)
                with gr.Accordion("Knobs (defaults: the checkpoint's generation config)", open=False):
                    max_new_tokens = gr.Slider(1, limits.max_new_tokens or 2048, value=256, step=1, label="Max new tokens")
                    steps = gr.Slider(1, limits.max_denoising_steps or 256, value=48, step=1, label="Max denoising steps per block")
                    entropy_bound = gr.Number(value=0.1, label="Entropy bound (nats accepted per step)")
                    with gr.Row():
                        t_min = gr.Number(value=0.4, label="t_min (last step)")
                        t_max = gr.Number(value=0.8, label="t_max (first step)")
                    seed = gr.Number(value=0, precision=0, label="Seed")
                    sampler = gr.Dropdown([SAMPLER_ENTROPY_BOUND], value=SAMPLER_ENTROPY_BOUND, label="Sampler", visible=False)
                    temperature = gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature (MLX; diffusers DDIM and block refinement, 0 = argmax)", visible=False)
                    sampler_note = gr.Markdown(visible=False)
                    thinking = gr.Checkbox(False, label="Thinking channel", interactive=False, info=NO_THINKING_NOTE)
                    count_thoughts = gr.Checkbox(
                        False, label="Count thought tokens in the commit order",
                        info="Off: tau_b, the panel and structure first measure the answer only.",
                    )
                    record_topk = gr.Slider(
                        0, MAX_RECORD_TOPK, value=DEFAULT_RECORD_TOPK, step=1, label="Record candidates (top-k)",
                        info="Candidates kept per position and step, for the token inspector; 0: off",
                    )
                with gr.Row():
                    palette = gr.Radio(["standard", "colorblind"], value="standard", label="Palette")
                    layout_kind = gr.Radio(
                        [("Grid", "grid"), ("Text (after the run)", "text")], value="grid", label="Layout"
                    )
                with gr.Row():
                    generate_btn = gr.Button("Generate", variant="primary")
                    stop_btn = gr.Button("Stop", variant="stop")
                message = gr.Markdown(elem_id="dv-message")
            with gr.Column(scale=4):
                # The live view: canvas, replay slider and commit-order panel, drawn in the browser
                # by visualizer/static/live_view.js from the live log.  gr.HTML runs that code as its
                # `js_on_load` (it defines window.dvLiveView once, then mounts on this element); the
                # template never depends on the value, so Gradio never re-renders it and the script
                # owns the DOM inside.
                live = gr.HTML(
                    [], html_template='<div class="dv-live"></div>', elem_id="dv-live", palette="standard",
                    js_on_load=LIVE_VIEW_JS + "\nwindow.dvLiveView.mount(element, props, watch, trigger);",
                )
                # the "why" views, asked for by the live view (full width: the chart's text stays legible)
                inspector = gr.HTML(_message_html(INSPECTOR_HINT), label="Token inspector", elem_id="dv-inspector", padding=True)
                budget = gr.HTML(_message_html(BUDGET_HINT), label="Accept budget", elem_id="dv-budget", padding=True)
                final_text = gr.Textbox(label="Committed text", lines=6, interactive=False)
                with gr.Row(visible=False):  # server-side frames for API clients (`/show_frame`)
                    api_frame = gr.Number(0, precision=0)
                    api_canvas, api_status, api_panel = gr.HTML(), gr.Markdown(), gr.HTML()
                    api_button = gr.Button()
                    # the "why" views for API clients; text inputs so that any input gets a one-line answer
                    api_at_frame, api_at_position = gr.Textbox(), gr.Textbox()
                    api_alternatives, api_budget, api_structure = gr.HTML(), gr.HTML(), gr.HTML()
                    api_alternatives_button, api_budget_button, api_structure_button = gr.Button(), gr.Button(), gr.Button()
                with gr.Accordion("Save, load and export", open=False):
                    with gr.Row():
                        trace_upload = gr.File(label="Load a trace (.json)", file_types=[".json"], type="filepath")
                        downloads = gr.File(label="Downloads", file_count="multiple", interactive=False)
                    examples = [[str(p)] for p in example_traces()]
                    if examples:
                        gr.Examples(examples, inputs=trace_upload, label="Recorded runs: replay without a model")
                    save_btn = gr.Button("Save trace (.json)")
                    with gr.Row():
                        formats = gr.CheckboxGroup(["gif", "mp4", "webp"], value=["gif"], label="Formats")
                        export_blocks = gr.Textbox(label="Blocks (e.g. 1,3; empty: all)")
                        frame_ms = gr.Number(value=150, precision=0, label="ms per step")
                        hold_ms = gr.Number(value=2500, precision=0, label="hold last frame (ms)")
                        export_width = gr.Number(value=None, precision=0, label="width px (empty: natural)")
                        with_prompt = gr.Checkbox(value=True, label="show the prompt")
                    export_btn = gr.Button("Export animation")
                    preview = gr.Image(label="GIF", type="filepath", interactive=False)
                with gr.Accordion("Compare two runs", open=False):
                    with gr.Row():
                        pin_a = gr.Button("Use this run as A")
                        pin_b = gr.Button("Use this run as B")
                    compare_note = gr.Markdown()
                    compare_canvas = gr.HTML()
                    compare_slider = gr.Slider(0, 1, value=0, step=1, label="Both runs at step", interactive=False)
                    compare_btn = gr.Button("Export comparison GIF")

        knobs = [max_new_tokens, steps, entropy_bound, t_min, t_max]
        model_outputs = [model_picker, model_info, message, *knobs, sampler, temperature, sampler_note, thinking, current_model]
        demo_app.load(select_model, [model_picker, current_model], model_outputs, api_name="load_model")
        model_picker.change(select_model, [model_picker, current_model], model_outputs, api_visibility="private")
        demo_picker.change(pick_demo, demo_picker, [prompt, watch_for], api_visibility="private")
        sampler.change(sampler_note_for, [sampler, current_model], sampler_note, api_visibility="private")
        generate_inputs = [prompt, model_picker, *knobs, seed, sampler, temperature, session, thinking, record_topk]
        # A new run or trace: the panels go back to their hints, never showing the previous run's
        # answers.  Set in the browser and registered before the run's own handler: Gradio's front
        # end runs the handlers of one trigger in order, each after the one before has finished, so
        # a hint registered after `generate` would land when the run ends, over the new answers.
        hints = f"() => {json.dumps([_message_html(INSPECTOR_HINT), _message_html(BUDGET_HINT)])}"
        for starts in (generate_btn.click, trace_upload.change):
            starts(None, None, [inspector, budget], js=hints)
        generate_btn.click(
            generate,
            generate_inputs,
            live,
            api_name="generate",
            concurrency_limit=1,
            concurrency_id="model",
            show_progress="minimal",
            validator=generate_validator(  # outside the queue: a bad model id never waits in it
                HOSTING, SESSIONS.register, generate_inputs, prompt=prompt, model=model_picker, max_new_tokens=max_new_tokens, steps=steps,
                session=session,
            ),
        ).then(finish_run, session, [final_text, message], api_name="run_message", concurrency_limit=None, show_progress="hidden")
        live.need_frames(all_frames, session, live, api_visibility="private", concurrency_limit=None, show_progress="hidden")
        demo_app.unload(SESSIONS.release)
        # the live view asks (`trigger("inspect"/"budget", {...})`); answered outside the model's queue
        # "always_last": an ask made while the previous one is in flight is answered after it, never
        # dropped (Gradio's default for custom events, "once", would leave the previous step's chart)
        quiet = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden", trigger_mode="always_last")
        live.inspect(_event_view(inspect_token, ("frame", "position")), session, inspector, **quiet)
        live.budget(_event_view(step_budget_view, ("frame",)), session, budget, **quiet)
        why = dict(concurrency_limit=None, show_progress="hidden")
        api_alternatives_button.click(inspect_token, [api_at_frame, api_at_position, session], api_alternatives, api_name="alternatives", **why)
        api_budget_button.click(step_budget_view, [api_at_frame, session], api_budget, api_name="accept_budget", **why)
        api_structure_button.click(structure_view, session, api_structure, api_name="structure_first", **why)
        stop_btn.click(stop_run, session, message, api_name="stop", concurrency_limit=None)
        api_button.click(
            show_frame, [api_frame, palette, layout_kind, session], [api_canvas, api_status, api_panel],
            api_name="show_frame", concurrency_limit=None, show_progress="hidden",
        )
        # palette and layout are the browser's business: no server round trip
        palette.change(None, palette, None, js="(name) => { window.dvLiveView.setPalette(name); }")
        layout_kind.change(None, layout_kind, None, js="(kind) => { window.dvLiveView.setLayout(kind); }")
        count_thoughts.change(None, count_thoughts, None, js="(flag) => { window.dvLiveView.setIncludeThought(flag); }")
        trace_upload.change(load_trace_file, [trace_upload, session], [live, final_text, message, session], api_name="load_trace")
        save_btn.click(save_trace, session, [downloads, message], api_name="save_trace")
        export_btn.click(
            export_run,
            [session, formats, export_blocks, frame_ms, hold_ms, export_width, with_prompt, palette, layout_kind],
            [downloads, preview, message],
            api_name="export",
        )
        compare_inputs = [compare_slider, palette, layout_kind, session]
        for which, button in enumerate((pin_a, pin_b)):
            button.click(
                lambda p, l, s, w=which: pin_run(w, p, l, s), [palette, layout_kind, session],
                [compare_note, compare_canvas, compare_slider, session], api_name=f"pin_{'ab'[which]}",
            )
        compare_slider.input(show_compare, compare_inputs, [compare_canvas, compare_slider], api_name="compare_step", show_progress="hidden")
        compare_btn.click(export_compare, [palette, layout_kind, session], [downloads, message], api_name="export_compare")
    return demo_app


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
    args = parser.parse_args(argv)
    mode = Hosting.from_environment(flag=args.hosted)
    if mode.hosted and args.model and mode.choice_for(args.model) is None:
        parser.error(f"--model {args.model} is not in the hosted allowlist; add it with {hosting.EXTRA_MODELS_ENV}")
    demo_app = build_app(args.model, mode)
    hosting.preload_for_zero_gpu(choice_for(args.model).source if args.model else mode.choices[0].source)
    queue_app(demo_app).launch(
        server_name=args.host, server_port=args.port, css=CSS, theme=gr.themes.Soft(),
        max_file_size=mode.limits.max_file_size,  # Gradio refuses a bigger upload before anything reads it
    )


if __name__ == "__main__":
    main()
