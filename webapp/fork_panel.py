"""Fork the session's run in the app (issue 55, docs/lab.md "In the app"): the Fork panel, its checks before the
model queue, the branch streamed live like a run, and the session's runs as a tree to switch between.

    ui |= fork_panel()                                  # laid out by build_app, under the live view
    wire_fork(ui, handlers, mode)                       # `/run_branch`, `/show_run`, the canvas clicks

The fork point is the step the replay slider shows (the live view's `budget` ask carries its frame:
`visualizer.run_tree.fork_point`); a clicked token's position starts the intervention's argument.  Interventions
are written as the `fork` command writes them ("forbid 11=moon"), one a line, and parsed and checked with
`visualizer.interventions`' public functions.  The branch runs on the app's model through
`backends.interventions.fork_records`; every refusal that needs no model is made by the event's validator,
outside the queue, and a refusal changes nothing the session holds.
"""

from __future__ import annotations

import functools
import inspect
from typing import NamedTuple

import gradio as gr

from backends import BACKENDS, BackendError, backend_for
from backends.interventions import fork_records, knob_problem, no_fork_reason, start_placement, token_problem, \
    warm_start_records, warm_starts
from backends.known import on_zero_gpu
from visualizer.compare import fork_step
from visualizer.interventions import FORK_KNOBS, KINDS, InterventionError, content_hash, parse_intervention, parse_spec, \
    plan_problems
from visualizer.live_stream import replay_value
from visualizer.run_tree import branch_cap_refusal, fork_point
from visualizer.step_names import StepNameError, locate_step, parse_step
from visualizer.thinking import committed_text
from visualizer.trace import Trace
from visualizer.warm_start import WarmStart, accepted_tokens, parse_start_text

from . import app_run
from .app_run import LIVE_MIN_INTERVAL_S, MODELS, live_values
from .knob_widgets import APP_KNOBS, settings_from_widgets
from .compare_runs import compare_note, parent_of, show_compare
from .run_card import trace_card
from .sessions import RunSession

FORK_HINT = ("Move the replay slider to the step to fork at, click a token for its position, pick what to change "
             "there, *Add* it, then *Fork here and run*.")
WARM_TEXT_LABEL = ("Text for the new run's first canvas, POS=TEXT a line, not held (with Fork at empty: "
                   "from this text alone)")
POSITION_KINDS = {"set": "{}=", "forbid": "{}=", "nudge": "{}=", "remask": "{}"}  # a clicked position starts these


def kind_hint(kind: str) -> str:
    """What the picked kind takes and does, under its argument box."""
    spec = KINDS.get(kind)
    if spec is None:
        return ""
    extra = f" ({', '.join(FORK_KNOBS)})" if kind == "knob" else ""
    return f"`{kind} {spec.usage}`{extra}: {spec.help}."


def fork_panel() -> dict:
    """The session's runs, the fork point, the interventions being put together, and the button that runs them."""
    ui = {"run_picker": gr.Dropdown(choices=[], value=None, label="Runs of this session (a branch names its fork)",
                                    interactive=True, elem_id="dv-run-picker")}
    with gr.Row(equal_height=False):
        ui["fork_at"] = gr.Textbox(label="Fork at (block:step)", placeholder="the replay slider's step", min_width=120,
                                   scale=1, elem_id="dv-fork-at")
        ui["fork_kind"] = gr.Dropdown(list(KINDS), value="forbid", label="Intervention", min_width=120, scale=1,
                                      elem_id="dv-fork-kind")
        ui["fork_arg"] = gr.Textbox(label="Its argument", placeholder=KINDS["forbid"].usage, min_width=160, scale=2,
                                    elem_id="dv-fork-arg")
    ui["fork_hint"] = gr.Markdown(kind_hint("forbid"), elem_id="dv-fork-hint")
    with gr.Row():
        ui["fork_add"] = gr.Button("Add", size="sm", elem_id="dv-fork-add")
        ui["fork_remove"] = gr.Button("Remove the last", size="sm", elem_id="dv-fork-remove")
    ui["fork_list"] = gr.Textbox(label="Interventions, one a line (edit or delete a line to change it)", lines=3,
                                 placeholder="none: the branch repeats its parent", elem_id="dv-fork-list")
    with gr.Row():
        ui["fork_btn"] = gr.Button("Fork here and run", variant="primary", elem_id="dv-fork-run")
        # the warm start: the canvas at *Fork at* as the first canvas of a new run, with the prompt and knobs above
        ui["warm_btn"] = gr.Button("Start a new run from this canvas or text", elem_id="dv-warm-run")
    ui["warm_text"] = gr.Textbox(label=WARM_TEXT_LABEL, lines=1, placeholder="0=Ocean", elem_id="dv-warm-text")
    ui["fork_message"] = gr.Markdown(elem_id="dv-fork-message", elem_classes=["dv-message"])  # a refusal, beside its button
    ui["fork_note"] = gr.Markdown(FORK_HINT, elem_id="dv-fork-note")  # what the branch on screen is
    return ui


# ---- putting the fork together (no model, outside the queue) ----------------------------------------------------
def fork_at_shown(session: RunSession, event: gr.EventData):
    """The replay slider rested on a frame (the live view's `budget` ask): that frame's step as block:step."""
    trace, frame = session.trace, getattr(event, "frame", None)
    if trace is None or session.running or not trace.steps or not isinstance(frame, int) or isinstance(frame, bool):
        return gr.skip()
    try:
        block, step = fork_point(trace, frame)
    except ValueError:
        return gr.skip()
    return f"{block}:{step}"


def argument_from_click(kind: str, event: gr.EventData):
    """A clicked token (not one the pointer rests on): its position starts the argument of a kind that takes one."""
    position = getattr(event, "position", None)
    if not getattr(event, "picked", False) or not isinstance(position, int) or kind not in POSITION_KINDS:
        return gr.skip()
    return POSITION_KINDS[kind].format(position)


def pick_kind(kind: str):
    """(hint, argument box) for the picked kind."""
    return kind_hint(kind), gr.Textbox(placeholder=KINDS[kind].usage if kind in KINDS else "")


def add_intervention(kind, arg, listed, session: RunSession):
    """(the list with `kind arg` added, message): refused in one line when it does not parse or fit the canvas."""
    try:
        iv = parse_intervention(str(kind), str(arg or "").strip())
    except InterventionError as exc:
        return gr.skip(), str(exc)
    canvas = session.trace.canvas_length if session.trace is not None and session.trace.start else None
    lines = [*_lines(listed), iv.spec()]
    problems = plan_problems(tuple(parse_spec(line) for line in lines), canvas) if canvas else []
    if problems:
        return gr.skip(), problems[0]
    return "\n".join(lines), ""


def remove_last(listed):
    return "\n".join(_lines(listed)[:-1])


def _lines(listed) -> list[str]:
    return [line.strip() for line in str(listed or "").splitlines() if line.strip()]


class StartAsked(NamedTuple):
    """A warm start as the app's panel asks for it: a run's step (from 1; None for text alone), the (position, id)s
    that run accepted there, and the (position, text)s to place over them."""

    block: int | None
    step: int | None
    from_run: tuple[tuple[int, int], ...]
    texts: tuple[tuple[int, str], ...]


def finished_run_step(session: RunSession, at, verb: str, said: str):
    """The step `at` ("block:step", from 1) of the session's finished run, located (`locate_step`'s name), for a
    fork or a warm start (`verb`: "fork", "start from"); ValueError in one line, starting with `said` for a bad step."""
    trace = session.trace
    if trace is None or trace.start is None or not trace.steps:
        raise ValueError(f"No run to {verb} yet: generate one or load a trace.")
    if session.running or not trace.finished:
        raise ValueError(f"{verb.capitalize()} a finished run: wait for this one to end (or stop it).")
    try:
        return locate_step(trace, parse_step(at))
    except StepNameError as exc:
        raise ValueError(f"{said} {exc}") from None


def fork_request(at, listed, session: RunSession) -> tuple[int, int, tuple]:
    """(block, step, interventions) of a fork of the session's run, every check the run alone can make done
    (ValueError in one line; InterventionError is one)."""
    trace = session.trace
    at = finished_run_step(session, at, "fork", "Fork at")
    interventions = tuple(parse_spec(line) for line in _lines(listed))
    problems = plan_problems(interventions, trace.canvas_length)
    if problems:
        raise ValueError(problems[0])
    return at.block + 1, at.step + 1, interventions


def model_mismatch(parent: Trace, info) -> str | None:
    """One line when `parent` was not recorded with the model `info` describes (a loaded trace of another model)."""
    if (parent.model.name, parent.model.canvas_length, parent.model.vocab_size) == (info.name, info.canvas_length, info.vocab_size):
        return None
    return (f"This run was recorded with {parent.model.name}; the app runs {info.name} now: pick that model to "
            "fork it (a branch re-runs its parent on the same model).")


class ForkHandlers:
    """The fork's handlers for one server: `handlers` is the app's `Handlers` (its mode, its model choices)."""

    def __init__(self, handlers):
        self.handlers, self.mode = handlers, handlers.mode

    def problem(self, at, listed, model, session: RunSession) -> str | None:
        """Why this fork cannot run, in one line, or None: what the run, the server's caps and the backend's declared
        capabilities say, and the loaded model where it is in memory (never loading one)."""
        try:
            fork_request(at, listed, session)
        except ValueError as exc:
            return str(exc)
        cap = branch_cap_refusal(session.tree, self.mode.limits.max_branches)
        if cap:
            return cap
        if app_run.LEADER is not None or on_zero_gpu():
            return "Forks do not run on this server (a sharded or ZeroGPU model): fork a saved trace with the CLI's fork."
        problem = self.mode.model_problem(model, loaded=MODELS.loaded)
        if problem:
            return problem
        choice, sampler = self.mode.choice_for(model), session.trace.settings.sampler
        try:
            kind = self.handlers.kind_for_run(choice, sampler)
        except BackendError as exc:
            return str(exc)
        name = kind or backend_for(choice.source)
        if name not in BACKENDS or not _declares_forks(BACKENDS[name]):
            able = [n for n, e in BACKENDS.items() if _declares_forks(e)]
            return f"The {name} backend cannot fork a run ({no_fork_reason(name)}); forks run on: {', '.join(able)}."
        # a knob the run's sampler does not read afresh: its declared capabilities judge it, no model needed
        problem = knob_problem(BACKENDS[name], session.trace.settings, fork_request(at, listed, session)[2])
        if problem:
            return problem
        if MODELS.loaded(choice.source, kind):  # its tokenizer judges the texts here, outside the queue
            backend = MODELS.get(choice.source, kind)
            return model_mismatch(session.trace, backend.info) or token_problem(backend, fork_request(at, listed, session)[2])
        return None

    def validator(self):
        """Gradio's validator of `/run_branch`: outside the queue, one `gr.validate` per input."""
        def validate(at, listed, model, session):
            problem = self.problem(at, listed, model, session)  # drawn at the fork point's box (a refused event chains nothing)
            return [gr.validate(problem is None, problem or ""), gr.validate(True, ""), gr.validate(True, ""),
                    gr.validate(True, "")]
        return validate

    def run_branch(self, at, listed, model, session: RunSession):
        """The branch of the session's run at `at` ("block:step", from 1) with `listed` (one intervention a line),
        streamed to the live view like a run; it becomes the session's run, a branch of the run it forked."""
        session.error = ""
        parent, parent_name = session.trace, session.run_name
        try:
            problem = self.problem(at, listed, model, session)  # again: the model may have loaded since the validator
            if problem:
                raise ValueError(problem)
            block, step, interventions = fork_request(at, listed, session)
            choice = self.handlers.choice_for(model)
            _, backend = self.handlers.backend_for_run(choice, parent.settings.sampler)
            problem = model_mismatch(parent, backend.info)
            if problem:
                raise ValueError(problem)
            trace = Trace(model=backend.info, prompt=parent.prompt)
            batches = fork_records(backend, parent, content_hash(parent.to_json().encode("utf-8")), block=block, step=step,
                                   interventions=interventions, trace=trace, stop=session.stop)
            next(batches)  # RunStart: a refused plan raises here, before the session changes
        except (BackendError, ValueError) as exc:
            session.error = str(exc)
            raise gr.Error(session.error, visible=False, print_exception=False) from None
        before = session.tree, dict(session.runs)
        session.tree, name = session.tree.add_branch(parent_name, block, step, tuple(iv.spec() for iv in interventions))
        session.show(trace, name)
        session.compare = [parent, trace]
        try:
            yield from live_values(session, trace, batches, min_interval_s=LIVE_MIN_INTERVAL_S)
        except BackendError as exc:  # the re-run left its parent before the fork point: no branch of it
            session.tree, session.runs = before
            session.show(parent, parent_name)
            session.compare = [None, None]
            session.error = str(exc)
            raise gr.Error(session.error, visible=False, print_exception=False) from None


    # ---- the warm start (docs/lab.md "The warm start"), as `record --start-from` -----------------------------
    def start_request(self, at, texts, session: RunSession) -> StartAsked:
        """The warm start asked for: the canvas of the session's run at `at` ("block:step", from 1; blank: none) and
        `texts` (POS=TEXT, one a line) placed over it. ValueError in one line where the run, the texts, the server
        or the hosted cap refuses (a start from a run's canvas counts as a branch; one from text alone is a new run)."""
        try:
            placed_texts = tuple(parse_start_text(line, "Start text") for line in _lines(texts))
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        if app_run.LEADER is not None or on_zero_gpu():
            raise ValueError("Warm starts do not run on this server (a sharded or ZeroGPU model): use the CLI's "
                             "record --start-from.")
        if not str(at or "").strip():
            if not placed_texts:
                raise ValueError("Give a step to start from (Fork at, block:step) or a text to place (POS=TEXT).")
            return StartAsked(None, None, (), placed_texts)
        name = finished_run_step(session, at, "start from", "Start from")
        cap = branch_cap_refusal(session.tree, self.mode.limits.max_branches)
        if cap:
            raise ValueError(cap)
        return StartAsked(name.block + 1, name.step + 1, accepted_tokens(session.trace.steps[name.index]), placed_texts)

    def start_problem(self, at, texts, model, sampler, session: RunSession) -> str | None:
        """Why this warm start cannot run, in one line, or None (never loading a model; the texts are tokenized
        where the model is in memory)."""
        try:
            asked = self.start_request(at, texts, session)
            choice = self.mode.choice_for(model)
            name = self.handlers.kind_for_run(choice, sampler) or backend_for(choice.source)
        except (ValueError, BackendError) as exc:
            return str(exc)
        if name in BACKENDS and not _warm_starts(BACKENDS[name]):
            able = [n for n, e in BACKENDS.items() if _warm_starts(e)]
            return f"The {name} backend cannot warm-start a run ({no_fork_reason(name)}); warm starts run on: {', '.join(able)}."
        if not MODELS.loaded(choice.source):
            return None
        backend = MODELS.get(choice.source, None)
        try:
            start_placement(backend, asked.from_run, asked.texts, "Start text")
        except BackendError as exc:
            return str(exc)
        return _other_canvas(session.trace, backend.info) if asked.block is not None else None

    def warm_validator(self, generate_validator):
        """`/run_warm`'s validator: the generate event's (prompt, model and knobs, outside the queue), then the start."""
        def validate(prompt, model, session, request: gr.Request, start_at=None, start_text=None, **knobs):
            checks = generate_validator(prompt, model, session, request, **knobs)
            problem = None
            if all(check.get("is_valid", True) for check in checks):
                problem = self.start_problem(start_at, start_text, model, knobs.get("sampler") or None, session)
            return [*checks, gr.validate(problem is None, problem or ""), gr.validate(True, "")]
        return validate

    def run_warm(self, prompt, model, session: RunSession, start_at=None, start_text=None, **knobs):
        """A new run of `prompt` with `knobs` whose first canvas holds what the session's run accepted at `start_at`
        ("block:step", from 1) and the text of `start_text` (POS=TEXT a line) over it, not held (as `record
        --start-from` and `--start-from-text`), streamed like a run. Started from a run, it joins the session's tree
        under that run; from text alone it is a new root."""
        session.error = ""
        source, source_name = session.trace, session.run_name
        try:
            asked = self.start_request(start_at, start_text, session)
            choice = self.handlers.choice_for(model)
            _, backend = self.handlers.backend_for_run(choice, knobs.get("sampler"))
            settings = settings_from_widgets(knobs, backend.capabilities.knobs_for(knobs.get("sampler") or None))
            problem = next(filter(None, (self.mode.limits.knob_problem(k, v) for k, v in settings.to_dict().items())), None)
            problem = problem or (_other_canvas(source, backend.info) if asked.block is not None else None)
            if problem:
                raise ValueError(problem)
            if settings.compiled:
                raise ValueError("torch.compile is off in the app (ZeroGPU forbids it).")
            placed = start_placement(backend, asked.from_run, asked.texts, "Start text")
            trace = Trace(model=backend.info, prompt=prompt)
            batches = warm_start_records(backend, prompt, settings, placed, trace=trace, stop=session.stop)
            next(batches)  # RunStart: a bad request raises here, before the session changes
        except (BackendError, ValueError) as exc:
            session.error = str(exc)
            raise gr.Error(session.error, visible=False, print_exception=False) from None
        pinned = {p for p, _ in backend.pinned_ids(backend.resolve(settings))}
        texts = tuple(f"{p}={t}" for p, t in asked.texts)
        source_hash = content_hash(source.to_json().encode("utf-8")) if asked.block is not None else None
        trace.warm_start = WarmStart(source_hash, asked.block, asked.step, texts,
                                     tuple(sorted((p, t) for p, t in placed if p not in pinned)))
        if asked.block is None:  # from text alone: a new run, the tree starts over
            session.show(trace)
            session.compare = [None, None]
        else:
            session.tree, name = session.tree.add_start(source_name, asked.block, asked.step, texts)
            session.show(trace, name)
            session.compare = [source, trace]
        yield from live_values(session, trace, batches, min_interval_s=LIVE_MIN_INTERVAL_S)


def _other_canvas(source: Trace, info) -> str | None:
    """One line when the run started from has another canvas or vocabulary than the model that would run."""
    if (source.canvas_length, source.model.vocab_size) == (info.canvas_length, info.vocab_size):
        return None
    return (f"This run's canvas ({source.canvas_length} positions, {source.model.vocab_size} ids) does not fit "
            f"{info.name}'s ({info.canvas_length}, {info.vocab_size}): start from a run of a model with the same canvas.")


def _warm_starts(entry) -> bool:
    try:
        return warm_starts(entry.capabilities)
    except ImportError:
        return False


def _naming_knobs(handler):
    """`handler(prompt, model, session, start_at, start_text, **knobs)` with a signature naming the start and every knob,
    keyword-only (as app.py's `_naming_knobs` for `/generate`): the `/run_warm` API's parameter names."""
    def fn(prompt, model, session, **kwargs):
        yield from handler(prompt, model, session, **kwargs)

    keyword = inspect.Parameter.KEYWORD_ONLY
    fn.__signature__ = inspect.signature(fn).replace(parameters=[
        *list(inspect.signature(fn).parameters.values())[:3],
        *(inspect.Parameter(knob.name, keyword, default=None) for knob in APP_KNOBS),
        inspect.Parameter("start_at", keyword, default=None),  # last, as in the event's inputs
        inspect.Parameter("start_text", keyword, default=None),
    ])
    fn.__doc__ = handler.__doc__
    return fn


def _declares_forks(entry) -> bool:
    """The backend declares interventions (its capabilities; one whose libraries are missing cannot)."""
    try:
        return bool(entry.capabilities.interventions)
    except ImportError:
        return False


# ---- after a branch, and switching runs -------------------------------------------------------------------------
AFTER_BRANCH_OUTPUTS = ("fork_message", "fork_note", "final_text", "run_card", "run_picker", "compare_note", "compare_canvas",
                        "compare_slider", "compare_box")
SHOW_RUN_OUTPUTS = ("live", *AFTER_BRANCH_OUTPUTS)


def run_choices(session: RunSession):
    """The run dropdown: each run of the tree (label, name), the one on screen picked."""
    return gr.Dropdown(choices=list(zip(session.tree.labels(), session.tree.names())), value=session.run_name or None)


def after_branch(palette, layout_kind, session: RunSession) -> dict:
    """Once the branch's stream ended: its message and text, its card, the tree, and parent and branch compared."""
    if session.error:
        return {"fork_message": session.error}
    trace = session.trace
    return {"fork_message": "", "fork_note": branch_said(session), "final_text": committed_text(trace) if trace.end else "",
            "run_card": trace_card(trace, parent=parent_name(session)), "run_picker": run_choices(session),
            **compare_updates(palette, layout_kind, session, open_it=session.compare[0] is not None)}


def show_run(name, palette, layout_kind, session: RunSession) -> dict:
    """Switch the live view to another run of the session's tree (replayed, never re-run); a branch is compared
    with its parent."""
    if session.running:
        return {"fork_message": "Stop the current run before switching to another one."}
    if name not in session.runs:
        return {"fork_message": f"No run named {str(name)[:40]!r} in this session: pick one from the list."}
    trace = session.runs[name]
    session.show(trace, name)
    parent = parent_of(session, name)
    session.compare = [parent, trace] if parent is not None else session.compare
    return {"live": replay_value(trace, run=session.run_id), "fork_message": "", "fork_note": branch_said(session) or FORK_HINT,
            "final_text": committed_text(trace) if trace.end else "", "run_card": trace_card(trace, parent=parent_name(session)),
            "run_picker": run_choices(session),
            **(compare_updates(palette, layout_kind, session) if parent is not None else {})}


def parent_name(session: RunSession) -> str | None:
    run = next((r for r in session.tree.runs if r.name == session.run_name), None)
    return run.parent if run is not None else None


def branch_said(session: RunSession) -> str:
    """What the run on screen is, when it is a branch or a warm start: "branch 1: forbid 11=moon at 1:10, forked
    from root; 24 steps, finished: eos." ("" for a run of its own)."""
    run = next((r for r in session.tree.runs if r.name == session.run_name), None)
    start = session.trace.warm_start if session.trace is not None else None
    if run is None or (run.parent is None and start is None):
        return ""
    end = session.trace.end
    how = f"finished: {end.finish_reason}" if end else "not finished"
    if run.parent is None:  # a start from text alone
        said = f"warm start from text {'; '.join(start.texts)}"
    else:
        said = run.summary if start is not None else f"{run.summary}, forked from {run.parent}"
    return f"{run.name}: {said}; {len(session.trace.steps)} steps, {how}."


def compare_updates(palette, layout_kind, session: RunSession, open_it: bool = True) -> dict:
    """The compare view with the session's pair (parent as A, branch as B), opened at the fork point (`open_it`)."""
    branch = session.compare[1]
    canvas, slider = show_compare((fork_step(branch) if branch is not None else None) or 0, palette, layout_kind, session)
    return {"compare_note": compare_note(session), "compare_canvas": canvas, "compare_slider": slider,
            "compare_box": gr.Accordion(open=True) if open_it else gr.skip()}


# ---- the wiring -------------------------------------------------------------------------------------------------
def wire_fork(ui: dict, handlers, generate_validator=None) -> None:
    """The panel's events: the slider's step and a clicked position into the panel (no queue), `/run_branch` in the
    model's queue (its validator outside it), `/show_run` to switch runs."""
    forks = ForkHandlers(handlers)
    session, palette, layout_kind = ui["session"], ui["palette"], ui["layout_kind"]
    quiet = dict(api_visibility="private", concurrency_limit=None, show_progress="hidden")
    ui["live"].budget(fork_at_shown, session, ui["fork_at"], trigger_mode="always_last", **quiet)
    ui["live"].inspect(argument_from_click, ui["fork_kind"], ui["fork_arg"], trigger_mode="always_last", **quiet)
    ui["fork_kind"].change(pick_kind, ui["fork_kind"], [ui["fork_hint"], ui["fork_arg"]], **quiet)
    ui["fork_add"].click(add_intervention, [ui["fork_kind"], ui["fork_arg"], ui["fork_list"], session],
                         [ui["fork_list"], ui["fork_message"]], **quiet)
    ui["fork_remove"].click(remove_last, ui["fork_list"], ui["fork_list"], **quiet)
    named = functools.partial(_by_name, ui)
    ui["fork_btn"].click(
        forks.run_branch, [ui["fork_at"], ui["fork_list"], ui["model_picker"], session], ui["live"], api_name="run_branch",
        concurrency_limit=1, concurrency_id="model", show_progress="minimal", validator=forks.validator(), preprocess=False,
    ).then(**named(after_branch, AFTER_BRANCH_OUTPUTS), inputs=[palette, layout_kind, session], api_name="branch_message",
           concurrency_limit=None, show_progress="hidden")
    if generate_validator is not None:  # the warm start: the generate event's inputs and checks, and the start step
        ui["warm_btn"].click(
            _naming_knobs(forks.run_warm), [ui["prompt"], ui["model_picker"], session], ui["live"],
            inputs_kwargs={**ui["knobs"], "start_at": ui["fork_at"], "start_text": ui["warm_text"]}, api_name="run_warm", concurrency_limit=1,
            concurrency_id="model", show_progress="minimal", validator=forks.warm_validator(generate_validator),
            preprocess=False,
        ).then(**named(after_branch, AFTER_BRANCH_OUTPUTS), inputs=[palette, layout_kind, session], api_name="warm_message",
               concurrency_limit=None, show_progress="hidden")
    ui["live"].run_started(run_choices, session, ui["run_picker"], **quiet)  # a new run (root) or branch joins the list
    # `select`: a run picked from the list; `input` also fired when the open list lost its focus to a button (the
    # run on screen replayed under a new token, racing the run that button started)
    ui["run_picker"].select(**named(show_run, SHOW_RUN_OUTPUTS), inputs=[ui["run_picker"], palette, layout_kind, session],
                           api_name="show_run", concurrency_limit=None, show_progress="hidden")


def _by_name(ui: dict, handler, names: tuple[str, ...]) -> dict:
    """As app.py's: `fn` returning {component: update} from the handler's {name: update}, and the named outputs."""
    @functools.wraps(handler)
    def fn(*args):
        return {ui[name]: update for name, update in handler(*args).items()}

    return {"fn": fn, "outputs": [ui[name] for name in names]}
