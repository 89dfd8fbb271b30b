"""Two runs side by side, stepped together: two seeds, two entropy bounds, two backends, ...

Runs are aligned by global step index k (the k-th denoising step of the run, all blocks counted):
at k each side shows the frame of its own k-th step; a run with fewer steps holds its last frame
(its final commit) while the other goes on.  The last position, k = max(steps), shows both final
frames.  Each side carries its own caption: what differs between the runs, block, step and tau_b.

    aligned = align(trace_a, trace_b)                      # [AlignedStep(k, frame_a, frame_b), ...]
    html = compare_html(trace_a, trace_b, k)               # for the app
    image = compare_image(trace_a, trace_b, k)             # PNG for a post
    animation = build_compare_animation(trace_a, trace_b)  # both runs as one GIF (visualizer.export)
    changes = branch_changes(parent, branch)               # a fork (docs/lab.md): what changed after its point

A branch (a trace with `branch`, written by `fork`) is labelled with its fork point and interventions, and its
side's caption says "fork point" at the step the interventions started.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from PIL import Image

from .metrics.commits import block_commits
from .animation import Animation, AnimationError, AnimationOptions, animation_layout, assemble, status_line
from .palette import get_palette
from .render_cache import FrameRenderer, IndexedColors
from .render_html import render_frame_html
from .render_image import render_frame_image
from .states import frame_refs, frame_state
from .trace import Trace

GAP = 16  # pixels between the two images
PANE_MIN_PX = 340  # a compare pane's least width in the app: two fit side by side in the canvas column at 1280 px


@dataclass(frozen=True)
class AlignedStep:
    step: int  # global step index k, 0-based; == max(steps) for the final position
    frame_a: int  # index into frame_refs(trace_a) shown at k
    frame_b: int
    holding_a: bool  # run A has no step k: it shows its last frame
    holding_b: bool


def step_frames(trace: Trace) -> list[int]:
    """The frame index of each step record, in order (commit frames left out)."""
    return [i for i, ref in enumerate(frame_refs(trace)) if ref.kind == "step"]


def align(trace_a: Trace, trace_b: Trace) -> list[AlignedStep]:
    """What each run shows at every global step index, holding the shorter run on its last frame."""
    frames_a, frames_b = step_frames(trace_a), step_frames(trace_b)
    if not frames_a or not frames_b:
        raise AnimationError("both runs need at least one denoising step to be compared")
    last_a, last_b = len(frame_refs(trace_a)) - 1, len(frame_refs(trace_b)) - 1
    out = []
    for k in range(max(len(frames_a), len(frames_b)) + 1):
        hold_a, hold_b = k >= len(frames_a), k >= len(frames_b)
        out.append(AlignedStep(k, last_a if hold_a else frames_a[k], last_b if hold_b else frames_b[k], hold_a, hold_b))
    return out


TITLE_PROMPT_CHARS = 40  # a pane's title keeps the prompt's start: two titles fit side by side


def run_title(trace: Trace) -> str:
    """What a run is, in one short line: its prompt (shortened), seed and sampler.

    The comparison panes and GIF are titled with it (a run card can replace it when one exists)."""
    prompt = " ".join(trace.prompt.split())
    if len(prompt) > TITLE_PROMPT_CHARS:
        prompt = prompt[: TITLE_PROMPT_CHARS - 1].rstrip() + "…"
    settings = trace.settings
    return f"{prompt!r}, seed {settings.seed}, sampler {settings.sampler or 'default'}"


def run_labels(trace_a: Trace, trace_b: Trace) -> tuple[str, str]:
    """Each run's title, then what else differs between the two runs (knobs, then model and backend)."""
    sa, sb = trace_a.start.settings if trace_a.start else {}, trace_b.start.settings if trace_b.start else {}
    in_title = {"seed", "sampler"}
    differ = [name for name in sorted(set(sa) | set(sb)) if sa.get(name) != sb.get(name) and name not in in_title]
    parts_a = [f"{name.replace('_', ' ')} {_shown(sa.get(name))}" for name in differ]
    parts_b = [f"{name.replace('_', ' ')} {_shown(sb.get(name))}" for name in differ]
    for field in ("name", "backend", "device", "dtype"):
        va, vb = getattr(trace_a.model, field), getattr(trace_b.model, field)
        if va != vb:
            parts_a.append(str(va))
            parts_b.append(str(vb))
    parts_a, parts_b = [*_branch_label(trace_a), *parts_a], [*_branch_label(trace_b), *parts_b]
    label_a = "A: " + run_title(trace_a) + "".join(f"; {part}" for part in parts_a)
    label_b = "B: " + run_title(trace_b) + "".join(f"; {part}" for part in parts_b)
    return label_a, label_b


def _branch_label(trace: Trace) -> list[str]:
    """"branch at 1:10 (forbid 11=moon)" for a branch; nothing for any other run."""
    if trace.branch is None:
        return []
    return [f"branch at {trace.branch.block}:{trace.branch.step} ({', '.join(trace.branch.interventions) or 'no intervention'})"]


def fork_step(trace: Trace) -> int | None:
    """The global step index (0-based, as `align` counts) of a branch's fork point; None for another run."""
    if trace.branch is None:
        return None
    at = (trace.branch.block - 1, trace.branch.step - 1)
    return next((k for k, s in enumerate(trace.steps) if (s.block, s.step) == at), None)


@dataclass(frozen=True)
class BranchChanges:
    """What a branch changed against its parent, from its fork point on (positions as (block, position), from 0)."""

    fork_step: int  # the fork point's global step index
    tokens: tuple[tuple[int, int], ...]  # positions whose committed token differs (a block one side lacks: all of it)
    commit_steps: tuple[tuple[int, int], ...]  # positions first accepted at another step


def branch_changes(parent: Trace, branch: Trace) -> BranchChanges | None:
    """The positions whose final token or commit step changed in `branch` against `parent`; None when `branch` is
    not a branch (it records no fork point)."""
    at = fork_step(branch)
    if at is None:
        return None
    canvas, tokens, commits = branch.canvas_length, [], []
    for block in range(max(len(parent.blocks), len(branch.blocks))):
        if block >= len(parent.blocks) or block >= len(branch.blocks):
            tokens += [(block, p) for p in range(canvas)]
            continue
        differ = parent.blocks[block].tokens != branch.blocks[block].tokens
        tokens += [(block, int(p)) for p in differ.nonzero()[0]]
        moved = block_commits(parent, block).commit_step != block_commits(branch, block).commit_step
        commits += [(block, int(p)) for p in moved.nonzero()[0]]
    return BranchChanges(at, tuple(tokens), tuple(commits))


def side_captions(trace_a: Trace, trace_b: Trace, at: AlignedStep) -> tuple[list[str], list[str]]:
    """Each side's caption lines at one aligned step: its label, then its status line."""
    label_a, label_b = run_labels(trace_a, trace_b)
    fork_a, fork_b = (" (fork point)" if fork_step(t) == at.step else "" for t in (trace_a, trace_b))
    return (
        [label_a + (" (finished)" if at.holding_a else ""), status_line(trace_a, frame_refs(trace_a), at.frame_a) + fork_a],
        [label_b + (" (finished)" if at.holding_b else ""), status_line(trace_b, frame_refs(trace_b), at.frame_b) + fork_b],
    )


def compare_html(trace_a: Trace, trace_b: Trace, step: int, *, palette: str = "standard", layout: str = "grid",
                 marked=frozenset()) -> str:
    """Both runs at global step `step` (clamped to the last) as one HTML fragment, side by side; the (block,
    position)s in `marked` outlined on both (a branch's changes against its parent: `branch_changes`)."""
    at = _at(trace_a, trace_b, step)
    captions = side_captions(trace_a, trace_b, at)
    colors = get_palette(palette)
    sides = []
    for trace, frame, lines in ((trace_a, at.frame_a, captions[0]), (trace_b, at.frame_b, captions[1])):
        body = render_frame_html(
            trace, frame_state(trace, frame), animation_layout(trace, layout), colors, caption=lines[1], marked=marked
        )
        sides.append(
            f'<div class="dv-compare-side" style="flex:1 1 {PANE_MIN_PX}px;min-width:0">'
            f'<div class="dv-compare-label" style="font-weight:600;margin:0 0 4px 0">{escape(lines[0])}</div>{body}</div>'
        )
    # side by side while both get PANE_MIN_PX, else B under A; a pane narrower than 16 cells a row lays its canvas
    # out 8 a row in glyphs that fit (the app's container query, webapp/app.py HEAD): no sideways scroll
    return (
        f'<div class="dv-compare" style="display:flex;flex-wrap:wrap;gap:{GAP}px;align-items:flex-start">'
        f'{"".join(sides)}</div>'
    )


def compare_image(
    trace_a: Trace, trace_b: Trace, step: int, *, palette: str = "standard", layout: str = "grid", font_size: int = 13
) -> Image.Image:
    """Both runs at global step `step` (clamped to the last) as one RGB image, side by side."""
    at = _at(trace_a, trace_b, step)
    captions = side_captions(trace_a, trace_b, at)
    colors = get_palette(palette)
    images = [
        render_frame_image(trace, frame_state(trace, frame), animation_layout(trace, layout), colors,
                           font_size=font_size, caption=lines)
        for trace, frame, lines in ((trace_a, at.frame_a, captions[0]), (trace_b, at.frame_b, captions[1]))
    ]
    return _side_by_side(images, lambda size: Image.new("RGB", size, colors.background))


def build_compare_animation(
    trace_a: Trace, trace_b: Trace, options: AnimationOptions = AnimationOptions(), *, progress=None
) -> Animation:
    """Both runs stepped together as one animation (write it with `visualizer.export.save_gif`).

    Uses the options' frame duration, hold, font size, palette and layout; the captions are
    always the runs' labels and status lines.  `blocks` and `width` apply to single runs only.
    """
    problems = options.problems()
    if options.blocks is not None or options.width is not None:
        problems.append("a comparison shows whole runs at their font size: leave blocks and width unset")
    if problems:
        raise AnimationError("; ".join(problems))
    aligned = align(trace_a, trace_b)
    palette = get_palette(options.palette)
    colors = IndexedColors(palette)
    renderers = [
        FrameRenderer(trace, animation_layout(trace, options.layout), palette,
                      font_size=options.font_size, caption_lines=2, antialias=options.antialias, colors=colors)
        for trace in (trace_a, trace_b)
    ]

    def images():
        for done, at in enumerate(aligned, 1):
            captions = side_captions(trace_a, trace_b, at)
            sides = [
                renderers[0].render(frame_state(trace_a, at.frame_a), captions[0]),
                renderers[1].render(frame_state(trace_b, at.frame_b), captions[1]),
            ]
            yield at.step, _side_by_side(sides, colors.blank)
            if progress is not None:
                progress(done, len(aligned))

    return assemble(images(), colors, options)


def _shown(value) -> str:
    return "n/a" if value is None else str(value)  # None: a knob this run's backend does not have


def _at(trace_a: Trace, trace_b: Trace, step: int) -> AlignedStep:
    aligned = align(trace_a, trace_b)
    return aligned[max(0, min(int(step), len(aligned) - 1))]


def _side_by_side(images: list[Image.Image], blank) -> Image.Image:
    """Images next to each other, top-aligned, on `blank((width, height))`."""
    width = sum(image.width for image in images) + GAP * (len(images) - 1)
    height = max(image.height for image in images)
    out = blank((width, height))
    x = 0
    for image in images:
        out.paste(image, (x, 0))
        x += image.width + GAP
    return out
