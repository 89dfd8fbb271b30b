"""The "why" views: answers about the session's run (a token's alternatives, a step's accept budget,
the layers' RMS, structure first), each declared once (`WHY_VIEWS`) for its live event and its API,
and the inspector's pin row (a clicked token's position, *Pin text here*).

    html = inspect_token(frame, position, session)        # any view: its args, then the session -> HTML
    handler = event_view(why.view, why.args, why.hide_empty, why.hint)   # for the live view's event

They read the session's trace only, never the model, so they run outside the model's queue; a bad
argument gets a one-line message in the panel.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from visualizer.alternatives import AlternativesError, alternatives_html, frame_position
from visualizer.insight_charts import accept_budget_svg, structure_first_svg
from visualizer.layer_charts import layer_rms_svg, lens_rank_svg, recorded_layers
from visualizer.readout import trajectory_html
from visualizer.settings import KNOBS

from .knob_widgets import whole_number
from .sessions import RunSession

INSPECTOR_HINT = "Click a token on the canvas (or rest the pointer on one) for the alternatives the model weighed there."
WHY_CHART_WIDTH = 720  # the accept-budget and structure-first charts: wide enough for their one-line titles
BUDGET_HINT = "Move the replay slider: the step on screen's accept budget appears here."
HIDDEN = "hidden"  # Gradio's visible="hidden": in the page, not shown and taking no space
PIN_HINT = "Click a token of the first block, type a text and press *Pin text here*: the next run holds it there."


def no_trace_message(session: RunSession) -> str:
    if session.trace is None or not session.trace.steps:
        return "No run yet: press Generate or load a trace."
    return ""


DROP_STALE_JS = "() => { window.dvLiveView && window.dvLiveView.dropStale(); }"


def message_html(text: str) -> str:
    return f'<div class="dv-why-message" style="font-size:13px;opacity:.8">{html.escape(text)}</div>'


def inspect_token(frame, position, session: RunSession) -> str:
    """A token's alternatives at the step of frame `frame` and at its commit step (HTML); where the run
    recorded layers, the lens rank of the token its block committed there, per layer and step (SVG)."""
    if no_trace_message(session):
        return message_html(no_trace_message(session))
    try:
        frame, position = whole_number(frame, "frame"), whole_number(position, "position")
    except (TypeError, ValueError) as exc:
        return message_html(str(exc))
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
        block, _ = frame_position(trace, whole_number(frame, "frame"))
    except (TypeError, ValueError, AlternativesError) as exc:
        return message_html(str(exc))
    return layer_rms_svg(trace, block, width=WHY_CHART_WIDTH)


def step_budget_view(frame, session: RunSession) -> str:
    """Why the step of frame `frame` accepted what it did: the sampler's rule, drawn (SVG)."""
    if no_trace_message(session):
        return message_html(no_trace_message(session))
    try:
        frame = whole_number(frame, "frame")
    except (TypeError, ValueError) as exc:
        return message_html(str(exc))
    return accept_budget_svg(session.trace, frame, width=WHY_CHART_WIDTH)


def structure_view(session: RunSession) -> str:
    """The structure-first figure of the session's finished run (SVG)."""
    if no_trace_message(session):
        return message_html(no_trace_message(session))
    if session.running or not session.trace.finished:
        return message_html("Structure first is measured once the run has finished.")
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


def event_view(view, names, hide_empty: bool = False, hint: str = ""):
    """A handler for the live view's custom events: their data (`trigger(name, {...})`) as arguments;
    with `hide_empty`, the panel is shown only when the view has something to show.

    The browser sends each ask with its run's token (the start line's "run"): an ask about an earlier run,
    answered once a new run began, gets the panel's hint (or hides it), never that run's answer.  Not
    `gr.skip()`: the page then shows the panel's last value from the server again, the old answer, over
    the hint the browser set when Generate was pressed."""
    def handler(session: RunSession, event: gr.EventData):
        run = getattr(event, "run", None)
        html = view(*(getattr(event, n, None) for n in names), session)  # EventData's keys are its attributes
        stale = "" if hide_empty else message_html(hint)
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
        position = whole_number(position, "the position to pin")
        canvas = session.trace.canvas_length if session.trace is not None and session.trace.start else None
        if position < 0 or (canvas is not None and position >= canvas):
            upper = f" to {canvas - 1}" if canvas else ""
            raise ValueError(f"the position to pin must be from 0{upper} (got {position}): click a token of the first block")
        if not text:
            raise ValueError("type the text to pin there first")
        if "\n" in text or "\r" in text:
            raise ValueError("a pin's text is one line: add another pin for the next line")
        form = KNOBS["pins"].form  # the box's grammar; a hand-typed line that is no pin is named before the run
        pins = form.format((*(pin for pin in form.parse(pins) if pin[0] != position), (position, text)))
    except ValueError as exc:
        return gr.skip(), str(exc), gr.skip()
    note = f"Pinned {text!r} at position {position}: the next *Generate* holds it there (see *Layers and pins*)."
    return pins, note, gr.Accordion(open=True)
