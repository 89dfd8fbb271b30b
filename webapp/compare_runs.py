"""Compare two runs: pin the session's run as A or B, step both together, export them as one GIF.

    updates = pin_run(0, palette, layout_kind, session)     # run A: {"compare_note": ..., "compare_canvas": ...}
    html, slider = show_compare(step, palette, layout_kind, session)

Both runs are the session's own (`RunSession.compare`); nothing here reaches the model.
"""

from __future__ import annotations

import html

import gradio as gr

from visualizer.animation import AnimationError, AnimationOptions
from visualizer.branch_metrics import branch_deltas
from visualizer.compare import align, branch_changes, build_compare_animation, compare_html, fork_step
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
    return f'<div class="dv-compare-cards">{"".join(sides)}</div>' + deltas_html(session)


def parent_of(session: RunSession, name: str):
    """The trace of the run `name`'s parent in the session's tree (fork_panel.py); None for a root or no such run."""
    run = next((r for r in session.tree.runs if r.name == name), None)
    return session.runs.get(run.parent) if run is not None and run.parent else None


def branch_pair(session: RunSession) -> bool:
    """Whether B is a finished branch of A in the session's tree (then the view marks what it changed)."""
    a, b = session.compare
    name = next((n for n, t in session.runs.items() if t is b), None)
    return a is not None and b is not None and b.end is not None and name is not None and parent_of(session, name) is a


def branch_marks(session: RunSession) -> frozenset:
    """The (block, position)s to outline on both sides: where the branch B changed a committed token or a commit step
    against its parent A (`visualizer.compare.branch_changes`); none for any other pair."""
    changes = branch_changes(*session.compare) if branch_pair(session) else None
    return frozenset(changes.tokens + changes.commit_steps) if changes else frozenset()


def deltas_html(session: RunSession) -> str:
    """The branch's end-of-run figures against its parent's (`branch_deltas`) as a small table; "" for another pair."""
    if not branch_pair(session):
        return ""
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                   for row in branch_deltas(*session.compare))
    marked = len(branch_marks(session))
    return ('<table class="dv-branch-deltas"><thead><tr><th>metric</th><th>parent (A)</th><th>branch (B)</th>'
            f'<th>B minus A</th></tr></thead><tbody>{rows}</tbody></table>'
            f'<p class="dv-branch-marked">{marked} positions outlined: their committed token or commit step changed.</p>')


def show_compare(step, palette, layout_kind, session: RunSession):
    """Both pinned runs at global step `step`: (HTML, slider)."""
    a, b = session.compare
    if a is None or b is None:
        return "", gr.skip()
    last = len(align(a, b)) - 1
    palette, layout_kind = view_options(palette, layout_kind)
    at = fork_step(b) if branch_pair(session) else None  # a branch's fork point, named under the slider
    shown = compare_html(a, b, step, palette=palette, layout=layout_kind, marked=branch_marks(session))
    return shown, gr.Slider(maximum=max(last, 1), value=min(int(step), last), interactive=True,
                            info=f"B forks from A at {at} on this slider (its caption says fork point)" if at is not None else None)


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
