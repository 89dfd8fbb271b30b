"""The knobs' widgets, made from their declarations (`visualizer.settings.KNOBS`), and read back.

    widget = knob_widget(KNOBS["steps"], mode.limits)       # a slider, checkbox, picker, box
    updates = knob_updates(backend, sampler)                 # {knob name: gr.update}: shown where the run reads it
    settings = settings_from_widgets(values, reads)          # the widgets' values -> GenerationSettings

`whole_number` and `finite_number` read any value an API caller sends as a number, or say why not
in one line (a ValueError); the other handlers read their numbers with them too; `widget_problem` says what is
wrong with a knob's value in one line, before a run is queued.
"""

from __future__ import annotations

import math

import gradio as gr

from visualizer.settings import KNOBS, GenerationSettings

THINKING_NOTE = "Renders the chat template with `enable_thinking`: the model thinks in its own channel before answering."
NO_THINKING_NOTE = "This model's chat template has no thinking channel (`enable_thinking`)."

APP_KNOBS = tuple(knob for knob in KNOBS.values() if knob.in_app)  # a widget and a `/generate` parameter each
KNOB_OUTPUTS = (*(knob.name for knob in APP_KNOBS), "sampler_note")  # what picking a sampler updates
# a knob that means something only while another's value is above 0: shown then only (k positions per sweep, of no sweeps)
SHOWN_WHILE = {"corrector_k": "corrector_steps"}


def knob_widget(knob, limits):
    """A knob's widget, from its declaration (`visualizer.settings.KNOBS`): a slider where it declares one
    (its maximum this server's cap, where hosted mode caps it; Gradio refuses more before the queue),
    a checkbox for a switch, a picker for the sampler, else a number box (our own message for a bad value)."""
    label = knob.label if "_" in knob.label else knob.label[:1].upper() + knob.label[1:]
    label += f" ({knob.unit})" if knob.unit else ""
    if knob.name == "sampler":  # its choices are the model's (`knob_updates`); another value gets our own message
        return gr.Dropdown([knob.default], value=knob.default, label=label, info=knob.help, visible=False,
                           allow_custom_value=True)
    if knob.form is not None:  # layers, pins: typed as text, read by the knob's own form
        return gr.Textbox("", label=label, info=knob.help, placeholder=knob.form.hint, lines=knob.form.lines,
                          max_lines=8, elem_id=f"dv-knob-{knob.name}")
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
        if knob.optional and knob.form is None and (values or not knob.every_backend):  # the model decides these: its value
            value = getattr(defaults, knob.name)
            update["value"] = knob.default if value is None else value
        updates[knob.name] = gr.update(**update)
    for knob_name, by in SHOWN_WHILE.items():  # `by`'s value is set above wherever the run reads it
        if updates[knob_name]["visible"]:
            updates[knob_name]["visible"] = shown_while(updates[by].get("value", getattr(defaults, by)))["visible"]
    picks = len(samplers) > 1
    thinks = backend.supports_thinking()
    updates["sampler"] = gr.Dropdown(choices=samplers, value=spec.name, visible=picks)
    updates["sampler_note"] = gr.Markdown(spec.note, visible=picks)
    updates["thinking"] = gr.Checkbox(interactive=thinks, info=THINKING_NOTE if thinks else NO_THINKING_NOTE,
                                      **({"value": False} if values else {}))
    return updates


def shown_while(value) -> dict:
    """The update of a knob of SHOWN_WHILE for its other knob's `value` (an edit of that box, in the browser's order)."""
    try:
        return gr.update(visible=float(value or 0) > 0)
    except (TypeError, ValueError):
        return gr.update(visible=True)  # a value the run will refuse: nothing hidden meanwhile


def settings_from_widgets(values: dict, reads) -> GenerationSettings:
    """The settings of the knobs' widget values; a knob this run does not read (`reads`) is not read
    here either (recorded as None), except a structured knob (layers, pins) given to a run that does not take
    it: a ValueError, never a silent stock run. An empty box is None (the model's default) where None is a value."""
    settings = {}
    for knob in APP_KNOBS:
        value = values.get(knob.name)
        if knob.form is not None and knob.name not in reads and knob.form.parse(value):  # never dropped silently
            raise ValueError(f"this model's {values.get('sampler') or 'default'} sampler does not take {knob.label}: "
                             f"empty the {knob.label} box (Layers and pins) or pick another sampler")
        if knob.name not in reads or (knob.optional and (value is None or value == "")):
            continue
        if knob.form is not None:  # layers, pins: ValueError in one line when the text is not one
            settings[knob.name] = knob.form.parse(value)
        elif knob.kind is bool:
            settings[knob.name] = bool(value)
        elif knob.kind is str:
            settings[knob.name] = value
        else:
            settings[knob.name] = (whole_number if knob.kind is int else finite_number)(value, knob.label)
    return GenerationSettings(**settings)


def widget_problem(knob, value) -> str | None:
    """One line when a knob's widget value (or an API caller's) is not a value of the knob, judged by its declaration
    alone (the model's own limits come later); None when it is, and for an empty value (the model's default, or a
    knob the run does not read: `settings_from_widgets` says which). Checked before the queue (`hosting.generate_validator`)."""
    if value is None or value == "" or knob.kind is str:  # a sampler's name: only the model knows its samplers
        return None
    try:
        if knob.form is not None:  # layers, pins: the text's form, then the values it gives
            value = knob.form.parse(value)
        elif knob.kind is not bool:
            value = (whole_number if knob.kind is int else finite_number)(value, knob.label)
    except ValueError as exc:
        return str(exc)
    return knob.problem(value)


def whole_number(value, name: str) -> int:
    """`finite_number`, also refusing a fraction."""
    number = finite_number(value, name)
    if number != int(number):
        raise ValueError(f"{name} must be a whole number (got {value})")
    return int(number)


def finite_number(value, name: str) -> float:
    """A widget's value as a finite float, or ValueError with a message (API callers send anything)."""
    if value is None or value == "":
        raise ValueError(f"{name} is empty")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number (got {str(value)[:40]!r})") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number (got {value})")
    return number
