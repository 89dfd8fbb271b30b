"""The page's panels: each lays out its components and returns them by name (`build_app` in app.py places them,
the wiring there connects them)."""

from __future__ import annotations

from importlib.resources import files

import gradio as gr

from backends import RANDOM_MODEL_DIR, ModelChoice
from prompts.builtin_guide import guide_markdown
from prompts.demos import DEMOS
from visualizer.replay import example_traces
from visualizer.settings import KNOBS

from .hosting import Hosting
from .knob_widgets import APP_KNOBS, knob_widget
from .why_views import HIDDEN, PIN_HINT, WHY_VIEWS, message_html

LIVE_VIEW_JS = files("visualizer").joinpath("static", "live_view.js").read_text(encoding="utf-8")  # package data (pyproject)

def knows_the_demos(source: str) -> bool:
    """Whether the demos' "Watch for" notes and the built-in model's guide mean anything for this model: not for the
    tiny random one, which was never trained (issue 58)."""
    return source != str(RANDOM_MODEL_DIR)


def run_panel(initial: ModelChoice) -> dict:
    """What a visitor needs first, above the fold: a demo prompt, the prompt, Generate and Stop, their message."""
    ui = {"demo_picker": gr.Dropdown(choices=[d.title for d in DEMOS], value=None, label="Demo prompt", elem_id="dv-demo-picker")}
    ui["watch_for"] = gr.Markdown(visible=knows_the_demos(initial.source), elem_id="dv-watch-for")
    ui["prompt"] = gr.Textbox(label="Prompt", lines=3, value=DEMOS[0].prompt, elem_id="dv-prompt")
    with gr.Row():
        # side by side in the narrow column (Gradio's default min width would stack them, pushing the inspector down)
        ui["generate_btn"] = gr.Button("Generate", variant="primary", elem_id="dv-generate", scale=2, min_width=100)
        ui["stop_btn"] = gr.Button("Stop", variant="stop", elem_id="dv-stop", scale=1, min_width=80)
    ui["message"] = message_box("dv-message")
    return ui


def message_box(elem_id: str) -> gr.Markdown:
    """One place's message (MESSAGES): empty until its cause says something."""
    return gr.Markdown(elem_id=elem_id, elem_classes=["dv-message"])


def controls_panel(mode: Hosting, initial: ModelChoice) -> dict:
    """The model and its sampler, the knobs, the view's options."""
    ui = {"model_picker": gr.Dropdown(
        choices=[c.label for c in mode.choices], value=initial.label, label="Model",
        info=("The one model this server runs." if mode.only_listed else "The models this server offers."
              if mode.hosted else "Pick one, or type a hub id or a local folder."),
        allow_custom_value=not mode.closed, elem_id="dv-model-picker",
    )}
    ui["model_message"] = message_box("dv-model-message")  # a model that cannot load says so here, until the next pick
    ui["model_info"] = gr.Markdown(elem_id="dv-model-info")
    # the second choice: the sampler (with its note); the backend that runs it follows
    knobs = {"sampler": knob_widget(KNOBS["sampler"], mode.limits)}
    ui["sampler_note"] = gr.Markdown(visible=False)
    with gr.Accordion("What the built-in model knows", open=False, elem_id="dv-builtin-guide",
                      visible=knows_the_demos(initial.source)) as ui["guide_box"]:
        gr.Markdown(guide_markdown())
    with gr.Accordion("Knobs (defaults: the checkpoint's generation config)", open=False):
        # one widget per knob of the table, shown where the model's sampler reads it (`knob_updates`)
        knobs |= {knob.name: knob_widget(knob, mode.limits) for knob in APP_KNOBS
                  if knob.name != "sampler" and knob.form is None}
        ui["count_thoughts"] = gr.Checkbox(
            False, label="Count thought tokens in the commit order",
            info="Off: tau_b, the panel and structure first measure the answer only.",
        )
    with gr.Accordion("Layers and pins", open=False) as ui["pins_box"]:  # (no file path in a visitor's label)
        # the structured knobs: recorded layers (watching only) and pinned tokens (an intervention)
        knobs |= {knob.name: knob_widget(knob, mode.limits) for knob in APP_KNOBS if knob.form is not None}
    ui["knobs"] = {knob.name: knobs[knob.name] for knob in APP_KNOBS}  # the table's order: the API's parameter order
    ui |= ui["knobs"]
    with gr.Row():
        ui["palette"] = gr.Radio(["standard", "colorblind"], value="standard", label="Palette")
        ui["layout_kind"] = gr.Radio([("Grid", "grid"), ("Text (after the run)", "text")], value="grid", label="Layout")
    return ui


def why_panel(why) -> gr.HTML:
    """A why-view's panel: its hint until there is an answer, or hidden until then (`hide_empty`)."""
    return gr.HTML("" if why.hide_empty else message_html(why.hint), label=why.label, elem_id=f"dv-{why.panel}",
                   padding=True, visible=HIDDEN if why.hide_empty else True)


def inspector_panel() -> dict:
    """A clicked token's inspector, beside the canvas; its position goes to the pin row, to pin a text there for the next run."""
    ui = {"inspector": why_panel(next(why for why in WHY_VIEWS if why.panel == "inspector"))}
    with gr.Row(elem_id="dv-pin-row"):
        ui["pin_position"] = gr.Number(None, precision=0, minimum=0, label="Position to pin (first block)",
                                       scale=1, min_width=140)
        ui["pin_text"] = gr.Textbox(label="Text to pin there", placeholder="e.g. moon", scale=2, min_width=140, elem_id="dv-pin-text")
    ui["pin_btn"] = gr.Button("Pin text here", size="sm")
    ui["pin_note"] = gr.Markdown(PIN_HINT, elem_id="dv-pin-note")
    return ui


def live_panel() -> dict:
    """The live view, the why-views' panels under it (the inspector's is beside it: `inspector_panel`), the committed text."""
    # The live view: canvas, replay slider and commit-order panel, drawn in the browser by
    # visualizer/static/live_view.js from the live log.  gr.HTML runs that code as its `js_on_load` (it
    # defines window.dvLiveView once, then mounts on this element); the template never depends on the
    # value, so Gradio never re-renders it and the script owns the DOM inside.
    ui = {"run_card": gr.HTML("", elem_id="dv-run-card")}
    ui["live"] = gr.HTML(
        [], html_template='<div class="dv-live"></div>', elem_id="dv-live", palette="standard",
        js_on_load=LIVE_VIEW_JS + "\nwindow.dvLiveView.mount(element, props, watch, trigger);",
    )
    # the other "why" views the live view asks for (full width: the chart's text stays legible)
    ui |= {why.panel: why_panel(why) for why in WHY_VIEWS if why.panel and why.panel != "inspector"}
    ui["final_text"] = gr.Textbox(label="Committed text", lines=6, interactive=False, elem_id="dv-final-text",
                                  buttons=["copy"])
    with gr.Accordion("Reproduce this run", open=False, elem_id="dv-reproduce-box"):
        ui["reproduce"] = gr.Code(language="python", label="The CLI line and the gradio_client call", elem_id="dv-reproduce")
    return ui


def files_panel() -> dict:
    """Load a trace (or an example), save the run, export animations."""
    ui = {}
    with gr.Row(equal_height=False):
        with gr.Column(min_width=200):  # a file that is not a trace says so right under the upload box
            ui["trace_upload"] = gr.File(label="Load a trace (.json)", file_types=[".json"], type="filepath", elem_id="dv-trace-upload")
            ui["files_message"] = message_box("dv-files-message")
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
    ui["export_message"] = message_box("dv-export-message")
    ui["preview"] = gr.Image(label="GIF", type="filepath", interactive=False)
    return ui


def compare_panel() -> dict:
    """Two pinned runs side by side, stepped together."""
    ui = {}
    with gr.Row():
        ui["pin_a"], ui["pin_b"] = gr.Button("Use this run as A"), gr.Button("Use this run as B")
    ui["compare_note"] = gr.HTML(elem_id="dv-compare-cards")  # each side's run card
    ui["compare_canvas"] = gr.HTML()
    ui["compare_slider"] = gr.Slider(0, 1, value=0, step=1, label="Both runs at step", interactive=False)
    with gr.Row(equal_height=False):  # the exported file right beside its button, not in "Downloads"
        with gr.Column(scale=1, min_width=200):
            ui["compare_btn"] = gr.Button("Export comparison GIF")
            ui["compare_message"] = gr.Markdown()
        ui["compare_file"] = gr.File(label="Comparison GIF", interactive=False, scale=1, elem_id="dv-compare-file")
        ui["compare_preview"] = gr.Image(label="Comparison preview", type="filepath", interactive=False, scale=2,
                                         elem_id="dv-compare-preview")
    return ui
