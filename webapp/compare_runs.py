"""Compare two runs: pin the session's run as A or B, step both together, export them as one GIF.

    updates = pin_run(0, palette, layout_kind, session)     # run A: {"compare_note": ..., "compare_canvas": ...}
    html, slider = show_compare(step, palette, layout_kind, session)

Both runs are the session's own (`RunSession.compare`); nothing here reaches the model.
"""

from __future__ import annotations

import html

import gradio as gr

from visualizer.animation import AnimationError, AnimationOptions
from visualizer.compare import align, build_compare_animation, compare_html
from visualizer.export import save_gif

from .run_card import trace_card
from .sessions import RunSession
from .views import view_options

PIN_OUTPUTS = ("compare_note", "compare_canvas", "compare_slider", "session")  # and the `/pin_a`, `/pin_b` APIs' answer


def pin_run(which: int, palette, layout_kind, session: RunSession) -> dict:
    """Use the session's current run as run A (0) or B (1)."""
    if session.trace is None or not session.trace.steps or session.running:
        return {"compare_note": "<p>No finished run to compare yet.</p>", "session": session}
    session.compare[which] = session.trace
    canvas, slider = show_compare(0, palette, layout_kind, session)
    return {"compare_note": compare_note(session), "compare_canvas": canvas, "compare_slider": slider, "session": session}


def compare_note(session: RunSession) -> str:
    """Each side's run card (prompt, model, sampler and knobs, seed, steps, pins, branch) side by side, so pinning B
    keeps A's card (and the other way round)."""
    sides = [f'<div class="dv-compare-card"><b>Run {side}:</b> {trace_card(trace) if trace else html.escape("not chosen yet")}</div>'
             for side, trace in zip("AB", session.compare)]
    return f'<div class="dv-compare-cards">{"".join(sides)}</div>'


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
    """The comparison GIF for the file and preview beside the button: (path, path, message); None for each path on failure."""
    a, b = session.compare
    if a is None or b is None:
        return None, None, "Pin two runs first."
    try:
        animation = build_compare_animation(
            a, b, AnimationOptions(palette=palette, layout=layout_kind),
            progress=lambda done, total: progress((done, total), desc="Rendering"),
        )
        path = save_gif(animation, f"{session.files.name}/compare.gif")
    except (AnimationError, OSError) as exc:
        return None, None, str(exc)
    return str(path), str(path), ""
