"""What the app shows of a run, as plain values (no Gradio): a model's info line, a frame drawn on the
server (for API clients and replays), a run's end message and its committed text.

    html, status, panel = render_view(trace, index, "standard", "grid")
"""

from __future__ import annotations

from visualizer.charts import commit_panel_html, token_details
from visualizer.layout import grid_layout, text_layout
from visualizer.live_stream import stopped_line
from visualizer.palette import PALETTES, get_palette
from visualizer.records import FINISH_CANCELLED
from visualizer.render_html import frame_caption, render_frame_html
from visualizer.states import frame_refs, frame_state
from visualizer.trace import Trace


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
    if index == len(refs) - 1 and trace.end is not None and trace.end.finish_reason == FINISH_CANCELLED:
        status = f"Frame {index + 1}/{len(refs)} · {stopped_line(trace)}"  # not the budget it had left, as the browser says
    elif frame.kind == "step":
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


