"""Watch DiffusionGemma denoise: the Gradio UI, laid out and wired (`python app.py` serves it: serve.py).

    demo = build_app()                            # the built-in model, this server's mode (hosting.py)
    serve.queue_app(demo).launch(**page_style())  # as `python app.py` launches it (its css, head and theme)

Thin on purpose: the backend yields step records, `visualizer` turns them into frames; the
handlers here only adapt between the two and Gradio.  Each browser session keeps its own run in
a `gr.State`; generations share the model through one queue (one run at a time, queue position
shown); replaying a recorded step never touches the model.  Its rooms: the panels (panels.py) and how the
page looks (page.py), the knob widgets (knob_widgets.py), the why-views and the pin row (why_views.py), forks and
warm starts (fork_panel.py), comparing two runs (compare_runs.py), what a run shows as plain values (views.py),
serving (serve.py).
"""

from __future__ import annotations

import functools
import inspect
import json

import gradio as gr

from backends import BackendError, ModelChoice, backend_for, default_model, sampler_backends
from prompts.demos import DEMOS
from visualizer.animation import AnimationError, AnimationOptions, parse_blocks
from visualizer.export import ExportError, export_to_folder
from visualizer.live_stream import replay_value
from visualizer.settings import KNOBS
from visualizer.replay import load_upload, save_download
from visualizer.thinking import committed_text
from visualizer.trace import Trace, TraceError

from . import app_run, fork_panel, hosting
from .app_run import LIVE_MIN_INTERVAL_S, MODELS, live_values, run_live
from .compare_runs import PIN_OUTPUTS, export_compare, pin_run, show_compare
from .gradio_temp import own_gradio_temp_dir
from .hosting import Hosting, generate_validator
from .knob_widgets import APP_KNOBS, KNOB_OUTPUTS, SHOWN_WHILE, knob_updates, settings_from_widgets, shown_while, whole_number
from .page import INTRO
from .panels import (compare_panel, controls_panel, files_panel, inspector_panel, knows_the_demos, live_panel,
                     run_panel)
from .run_card import cli_line, client_call, run_card_html, trace_card
from .sessions import RunSession, SessionRegistry
from .views import end_message, model_info_markdown, render_view
from .why_views import DROP_STALE_JS, HIDDEN, PIN_HINT, WHY_VIEWS, add_pin, event_view, message_html, picked_position

SESSIONS = SessionRegistry()  # frees a session's run and files when its tab closes (every app in this process)
SESSION_TTL_S = 3 * 3600  # an idle session's state is dropped after this (Gradio's time_to_live)
# A sharded model (torchrun): each open tab asks this often whether every rank still runs (one cheap
# event, only on a sharded server).
HEALTH_TICK_S = 2.0

# ---- handlers ------------------------------------------------------------------------------------
# Handlers that update several components return {component name: update}; `build_app` maps the
# names to its components (`_by_name`), so no list of outputs has to agree with a tuple's order.
MODEL_OUTPUTS = ("model_picker", "model_info", "model_message", *KNOB_OUTPUTS, "current_model")  # and the `/load_model` API's answer
# Each message beside what caused it (issue 58): a run's refusal, error or stop under Generate and Stop; a model or
# sampler that cannot load under the Model box; an upload, load or save under the upload box; an export under its button.
MESSAGES = ("message", "model_message", "files_message", "export_message")


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

    def kind_for_run(self, choice: ModelChoice, sampler) -> str | None:
        """The backend (None: the model's own) that runs `choice` with `sampler`; BackendError for a sampler it lacks here."""
        samplers = self.samplers_for(choice)
        if sampler and sampler not in samplers:
            raise BackendError(f"the sampler must be one of {', '.join(samplers)}, the ones this model runs here "
                               f"(got {str(sampler)[:40]!r})")
        return samplers.get(sampler) if sampler else None

    def backend_for_run(self, choice: ModelChoice, sampler) -> tuple[str | None, object]:
        """(backend name or None, the loaded backend) that runs `choice` with `sampler` (None or empty: the default)."""
        kind = self.kind_for_run(choice, sampler)
        if not MODELS.loaded(choice.source, kind):
            gr.Info(f"Loading {choice.label} (once for everyone; later runs start at once)...")
        return kind, MODELS.get(choice.source, kind)

    def loaded_model_problem(self, prompt, model, knobs: dict) -> tuple[str, str] | None:
        """What only the model can judge (a sampler it lacks, the prompt against its context in tokens, a layer past
        its depth, a pin off its canvas): (the input that caused it, its one line), or None.  Asked by the generate
        event's validator once every value passed on its own, so that an API client gets the line as the error of its
        `/generate` call and the page draws it at that input, once.  Only a model in memory is asked (the validator
        runs outside the queue and never loads one); a run that must load its model first says it in `/run_message`."""
        choice, sampler = self.mode.choice_for(model), knobs.get("sampler") or None
        try:
            kind = self.kind_for_run(choice, sampler)
        except BackendError as exc:
            return "sampler", str(exc)
        if not MODELS.loaded(choice.source, kind):
            return None
        backend = MODELS.get(choice.source, kind)
        try:
            settings = settings_from_widgets(knobs, backend.capabilities.knobs_for(sampler))
        except ValueError as exc:  # layers or pins for a sampler that does not take them
            return "sampler", str(exc)
        for name, knob in KNOBS.items():
            value = getattr(settings, name, None)
            if value and knob.form is not None and knob.form.model_problem is not None and (problem := knob.form.model_problem(value, backend.info)):
                return name, problem
        for name, check in (("pins", backend.pinned_ids), ("prompt", lambda settings: backend.check(prompt, settings))):
            try:
                check(settings)
            except BackendError as exc:
                return name, str(exc)
        return None

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
                return {"model_message": f"{exc}"}
            return {"model_picker": gr.update(value=choice.label), "model_info": model_info_markdown(backend.info),
                    "model_message": f"{exc}", **knob_updates(backend, None, self.samplers_for(choice)), "current_model": choice.label}
        return {"model_info": model_info_markdown(backend.info), "model_message": "",
                **knob_updates(backend, None, self.samplers_for(choice)), "current_model": label}

    def demo_notes(self, label: str):
        """(Watch for, the built-in model's guide) shown or hidden for the model that runs now (`knows_the_demos`)."""
        choice = self.mode.choice_for(label)
        shown = choice is None or knows_the_demos(choice.source)
        return gr.Markdown(visible=shown), gr.Accordion(visible=shown)

    def select_sampler(self, sampler: str, current_model: str) -> dict:
        """The picked sampler: the model on the backend that runs it (loaded if needed), the knobs that sampler reads."""
        try:
            choice = self.choice_for(current_model)
            _, backend = self.backend_for_run(choice, sampler)
            # the model line names the backend that now runs it (block refinement: diffusers, not the model's own)
            return {**knob_updates(backend, sampler, self.samplers_for(choice), values=False), "model_message": "",
                    "model_info": model_info_markdown(backend.info)}
        except BackendError as exc:
            return {"model_message": f"{exc}"}

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
            # what only the model judges, when it had to be loaded first (the validator never loads one): the page says
            # it in its message box (`finish_run`, chained), an API client gets the same line as its call's error, not
            # a quiet stream; visible=False: no second copy of the line as a toast on the page (issue 58)
            session.error = str(exc)
            raise gr.Error(session.error, visible=False, print_exception=False) from None
        session.show(trace)
        yield from live_values(session, trace, batches, min_interval_s=LIVE_MIN_INTERVAL_S)

    def export_run(self, session: RunSession, formats, blocks, frame_ms, hold_ms, width, with_prompt, palette, layout_kind,
                   progress=gr.Progress()):
        """Encode the session's run: (files to download, GIF preview, message)."""
        trace = session.trace
        if trace is None or not trace.steps or session.running:
            return None, None, "Export needs a finished run: generate one or load a trace."
        try:
            options = AnimationOptions(
                blocks=parse_blocks(blocks), frame_ms=whole_number(frame_ms, "frame duration"), hold_ms=whole_number(hold_ms, "hold"),
                width=whole_number(width, "width") if width else None, palette=palette, layout=layout_kind, prompt=bool(with_prompt),
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
        index = whole_number(index, "frame")
    except ValueError as exc:
        return gr.skip(), str(exc), gr.skip()
    return render_view(session.trace, index, palette, layout_kind)


# ---- save and load (export is `Handlers.export_run`, compare is compare_runs.py) ------------------
def save_trace(session: RunSession):
    """The session's run as a JSON file to download."""
    if session.trace is None or session.running:
        return None, "Nothing to save yet: generate a run (and let it finish) first."
    return [str(save_download(session.trace, session.files.name))], ""


LOAD_OUTPUTS = ("live", "final_text", "files_message", "session")  # and the `/load_trace` API's answer


def load_trace_file(path, session: RunSession, request: gr.Request) -> dict:
    """Replay an uploaded (or example) trace in the live view, from the frames a live run would
    have sent.  The session is an output too: Gradio keeps a State's time-to-live only for values
    a handler returned.  An API client that only loads traces loads no page and never generates,
    so it is registered here, to be released when it goes (sessions.py)."""
    SESSIONS.register(session, request)
    session.loaded_now = False
    # Gradio's front end sends the file box's change again when its Clear is pressed, with the file it
    # held (or, racing an upload right after, the new one twice): the trace on screen is not replayed again
    if path is None or (session.trace is not None and str(path) == session.shown_file):
        return {"session": session}
    if session.running:
        return {"files_message": "Stop the current run before loading another one.", "session": session}
    try:
        trace = load_upload(path)
    except TraceError as exc:
        return {"files_message": str(exc), "session": session}
    session.show(trace, file=str(path))
    session.loaded_now = True
    return {"live": replay_value(trace, run=session.run_id), "final_text": committed_text(trace), "files_message": "", "session": session}


AFTER_LOAD_OUTPUTS = ("run_card", "reproduce", "prompt", "demo_picker", "watch_for", "preview", "downloads",
                      "pin_note", "compare_canvas", "compare_note", "run_picker")


def after_load(session: RunSession) -> dict:
    """What belonged to the last run goes (preview, downloads, panes, pin note); the loaded run's card,
    its reproduce lines and its prompt come in its place (issue 58)."""
    trace = session.trace
    if trace is None or session.running or not session.loaded_now:
        return {"run_card": gr.skip()}  # not {}: Gradio reads an empty dict as one value for ten outputs
    return {"run_card": trace_card(trace), "reproduce": reproduce_lines(trace), "prompt": trace.prompt, "demo_picker": None,
            "watch_for": "", "preview": None, "downloads": None, "pin_note": PIN_HINT, "compare_canvas": "", "compare_note": "",
            "run_picker": fork_panel.run_choices(session)}


def reproduce_lines(trace: Trace) -> str:
    """The CLI line and the gradio_client call that run `trace` again."""
    settings = trace.settings.to_dict()
    return f"{cli_line(trace.prompt, trace.model.source, settings)}\n\n{client_call(trace.prompt, trace.model.name, settings)}"


def live_run_card(session: RunSession):
    """(card, reproduce lines) of the run that started: asked by the live view when a new run's start line arrives,
    so the card shows what the model runs (its settings as recorded), never a request that was then refused (issue
    58); after the run, again, with its steps and blocks counted."""
    trace = session.trace
    if trace is None or trace.start is None or session.error:
        return gr.skip(), gr.skip()  # refused before it started: the card of the run before stays
    parent = fork_panel.parent_name(session)  # a branch's card names the run it forked
    if session.running:
        card = run_card_html(trace.prompt, trace.model.name, trace.settings.to_dict(), branch=trace.branch, parent=parent,
                             warm_start=trace.warm_start)
    else:
        card = trace_card(trace, parent=parent)
    return card, reproduce_lines(trace)


# ---- the UI --------------------------------------------------------------------------------------
def build_app(initial_model: str | None = None, hosting_mode: Hosting | None = None) -> gr.Blocks:
    """The UI for a server in `hosting_mode` (default: as the environment says, see hosting.py): the
    panels laid out (the prompt, Generate and the token inspector beside the live view, the model and
    knobs under them; files and compare under the live view), then wired."""
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
        with gr.Row(elem_id="dv-main"):
            with gr.Column(scale=1, min_width=320):
                ui |= run_panel(initial)
                ui |= inspector_panel()
                ui |= controls_panel(mode, initial)
            with gr.Column(scale=3, min_width=320):
                ui |= live_panel()
                with gr.Accordion("Save, load and export", open=False):
                    ui |= files_panel()
                with gr.Accordion("Fork this run: change what the model sees from a step on", open=False,
                                  elem_id="dv-fork-box"):
                    ui |= fork_panel.fork_panel()
                with gr.Accordion("Compare two runs", open=False, elem_id="dv-compare-box") as ui["compare_box"]:
                    ui |= compare_panel()
        wire_model_and_run(demo_app, ui, handlers, mode)
        wire_why_views(ui)
        wire_files_and_compare(ui, handlers)
        fork_panel.wire_fork(ui, handlers, generate_validator(  # the warm start checks what /generate checks
            mode, list(ui["knobs"]), register_session=SESSIONS.register, loaded=MODELS.loaded,
            model_judges=handlers.loaded_model_problem))
    return demo_app


# ---- the wiring ------------------------------------------------------------------------------------
def wire_model_and_run(demo_app: gr.Blocks, ui: dict, handlers: Handlers, mode: Hosting) -> None:
    """Sessions and the pickers, what each new run clears, then Generate and Stop: in this order, since Gradio
    runs one trigger's handlers in the order they were registered (`wire_run_resets` says why it matters)."""
    wire_sessions_and_pickers(demo_app, ui, handlers)
    wire_run_resets(ui)
    wire_generate(ui, handlers, mode)


def wire_sessions_and_pickers(demo_app: gr.Blocks, ui: dict, handlers: Handlers) -> None:
    """Sessions registered and released with their tab, the model and sampler pickers, the demo picker and the knobs
    shown only while another knob makes them mean something."""
    named = functools.partial(_by_name, ui)
    session, model_picker, current_model, knobs = ui["session"], ui["model_picker"], ui["current_model"], ui["knobs"]
    # every tab registers when its page loads, so closing it releases what it holds (sessions.py)
    demo_app.load(SESSIONS.register, session, None, api_visibility="private", show_progress="hidden", concurrency_limit=None)
    demo_app.unload(SESSIONS.release)
    demo_app.load(**named(handlers.select_model, MODEL_OUTPUTS), inputs=[model_picker, current_model], api_name="load_model")
    # `input`, not `change`: a failed load puts the previous model back in the box, which must not count as the
    # visitor picking it (that second call cleared the failure's message at once, issue 58)
    model_picker.input(**named(handlers.select_model, MODEL_OUTPUTS), inputs=[model_picker, current_model], api_visibility="private")
    # the model that runs now (a failed load keeps the previous one): the demos' notes only where they mean something
    current_model.change(handlers.demo_notes, current_model, [ui["watch_for"], ui["guide_box"]], api_visibility="private",
                         concurrency_limit=None, show_progress="hidden")
    for knob_name, by in SHOWN_WHILE.items():  # corrector k only while there are corrector steps (a visitor's edit)
        knobs[by].input(shown_while, knobs[by], knobs[knob_name], api_visibility="private", concurrency_limit=None,
                        show_progress="hidden")
    ui["demo_picker"].change(pick_demo, ui["demo_picker"], [ui["prompt"], ui["watch_for"]], api_visibility="private")
    knobs["sampler"].input(**named(handlers.select_sampler, (*KNOB_OUTPUTS, "model_message", "model_info")),
                           inputs=[knobs["sampler"], current_model],
                           api_visibility="private")


def wire_run_resets(ui: dict) -> None:
    """What a new run, branch, start, switched-to run or uploaded trace clears, in the browser: every message, and the
    why-views back to their hints."""
    # A new run or trace: the why-views go back to their hints, never showing the previous run's
    # answers.  Set in the browser and registered before the run's own handler: Gradio's front
    # end runs the handlers of one trigger in order, each after the one before has finished, so
    # a hint registered after `generate` would land when the run ends, over the new answers.
    panels = [why for why in WHY_VIEWS if why.panel and not why.hide_empty]
    # (first the live view stops asking about the run on screen: an ask sent after the click would answer over a hint)
    # (and a trace file opens at its first frame, where a run follows to its last: `runComing(replay)`)
    hint_html = json.dumps([message_html(why.hint) for why in panels])
    def hints(replay: str) -> str:
        return f"() => {{ window.dvLiveView && window.dvLiveView.runComing({replay}); return {hint_html}; }}"
    hidden = [ui[why.panel] for why in WHY_VIEWS if why.hide_empty]  # shown again once the new run has something
    # a message belongs to the action that caused it: the next run, upload or prompt edit clears every one (in the browser)
    for clears in (ui["generate_btn"].click, ui["trace_upload"].change, ui["prompt"].input, ui["fork_btn"].click,
                   ui["warm_btn"].click):
        clears(None, None, [ui[name] for name in MESSAGES], js=f"() => {json.dumps([''] * len(MESSAGES))}", api_visibility="private")
    for starts, replay in ((ui["generate_btn"].click, "false"), (ui["trace_upload"].change, "true"),
                           (ui["fork_btn"].click, "false"), (ui["warm_btn"].click, "false"),
                           (ui["run_picker"].select, "true")):
        starts(None, None, [ui[why.panel] for why in panels], js=hints(replay))
        starts(lambda: {panel: gr.HTML(visible=HIDDEN) for panel in hidden}, None, hidden, api_visibility="private",
               concurrency_limit=None, show_progress="hidden")  # {component: update}: one output takes a list as its value


def wire_generate(ui: dict, handlers: Handlers, mode: Hosting) -> None:
    """Generate (its validator outside the queue) and Stop, the run card, the frames a browser asks for again, the
    sharded health tick, the view's options (drawn in the browser) and `/show_frame` for API clients."""
    session, model_picker, knobs = ui["session"], ui["model_picker"], ui["knobs"]
    ui["live"].run_started(live_run_card, session, [ui["run_card"], ui["reproduce"]], api_visibility="private",
                           concurrency_limit=None, show_progress="hidden")
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
            mode, list(knobs), register_session=SESSIONS.register, loaded=MODELS.loaded, model_judges=handlers.loaded_model_problem,
        ),
        preprocess=False,  # the validator checks every value, in one line an API client reads (hosting.py says why)
    ).then(finish_run, session, [ui["final_text"], ui["message"]], api_name="run_message", concurrency_limit=None,
           show_progress="hidden").then(live_run_card, session, [ui["run_card"], ui["reproduce"]], api_visibility="private",
                                        concurrency_limit=None, show_progress="hidden")
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
                getattr(ui["live"], why.event)(event_view(why.view, why.args, why.hide_empty, why.hint), session, ui[why.panel],
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
    ui["trace_upload"].change(**named(load_trace_file, LOAD_OUTPUTS), inputs=[ui["trace_upload"], session], api_name="load_trace").then(
        **named(after_load, AFTER_LOAD_OUTPUTS), inputs=[session], api_visibility="private", show_progress="hidden")
    ui["save_btn"].click(save_trace, session, [ui["downloads"], ui["files_message"]], api_name="save_trace")
    ui["export_btn"].click(
        handlers.export_run, [session, *ui["export_options"], palette, layout_kind],
        [ui["downloads"], ui["preview"], ui["export_message"]], api_name="export",
    )
    for which, button in enumerate((ui["pin_a"], ui["pin_b"])):
        pin = functools.partial(pin_run, which)
        button.click(**named(pin, PIN_OUTPUTS), inputs=[palette, layout_kind, session], api_name=f"pin_{'ab'[which]}")
    ui["compare_slider"].input(show_compare, [ui["compare_slider"], palette, layout_kind, session],
                               [ui["compare_canvas"], ui["compare_slider"]], api_name="compare_step", show_progress="hidden")
    ui["compare_btn"].click(export_compare, [palette, layout_kind, session],
                            [ui["compare_file"], ui["compare_preview"], ui["compare_message"]], api_name="export_compare")


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
