"""Animation frames of a run: which frames, how long each shows, and the images themselves.

An animation shows every frame of the chosen blocks (each denoising step, then the block's
commit), drawn by the Pillow renderer (`render_frame_image`, through the cached
`FrameRenderer`) with a caption of prompt, model, step and tau_b, in one shared small palette.
Frames identical to the one before are merged into it (its duration grows), and the last frame
is held so a viewer can read the result.  The encoders in `visualizer.export` write the files.

    options = AnimationOptions(frame_ms=150, hold_ms=2000, palette="colorblind")
    animation = build_animation(trace, options, progress=lambda done, total: ...)
    animation.frames[0].size, animation.durations_ms[:3]

Block numbers are 0-based here and 1-based wherever a person types them (CLI, app).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, replace

import numpy as np
from PIL import Image

from .knobs import is_int
from .layout import Layout, final_tokens, grid_layout, text_layout
from .metrics import is_defined, live_readout
from .palette import PALETTES, get_palette
from .render_cache import FrameRenderer, IndexedColors
from .render_image import frame_size
from .states import FrameRef, frame_refs, frame_state
from .trace import Trace

LAYOUTS = ("text", "grid")
MIN_FONT_SIZE, MAX_FONT_SIZE = 6, 48
MIN_FRAME_MS, MAX_FRAME_MS = 20, 10_000  # browsers show GIF frames shorter than 20 ms at 100 ms
MAX_HOLD_MS = 60_000
MAX_WIDTH = 4096
PROMPT_LINES = 3  # a caption's prompt wraps onto at most this many lines


@dataclass(frozen=True)
class AnimationOptions:
    blocks: tuple[int, ...] | None = None  # 0-based blocks to show (each step of them); None: all
    frame_ms: int = 150  # how long each step shows; rounded to 10 ms, the GIF time unit
    hold_ms: int = 2500  # extra time on the last frame, to read the result
    width: int | None = None  # output width in pixels: picks the largest font that fits, pads the rest
    font_size: int = 13  # used when `width` is None
    palette: str = "standard"  # or "colorblind" (Okabe-Ito hues)
    layout: str = "text"  # "text": the final text's lines (finished runs; else grid); "grid": 16 per row
    prompt: bool = True  # show the prompt as the first caption line
    caption: bool = True  # show the status line: model, block, step, accepted, tau_b
    antialias: bool = False  # smooth glyph edges; off: crisp pixel text and ~40 % smaller GIFs

    def problems(self) -> list[str]:
        """Human-readable reasons these options cannot be used; empty when they can."""
        out = []
        if self.blocks is not None and (not self.blocks or any(not is_int(b) or b < 0 for b in self.blocks)):
            out.append("blocks must be a non-empty list of block indexes (0-based)")
        if not is_int(self.frame_ms) or not MIN_FRAME_MS <= self.frame_ms <= MAX_FRAME_MS:
            out.append(f"frame duration must be from {MIN_FRAME_MS} to {MAX_FRAME_MS} ms (got {self.frame_ms!r})")
        if not is_int(self.hold_ms) or not 0 <= self.hold_ms <= MAX_HOLD_MS:
            out.append(f"hold on the last frame must be from 0 to {MAX_HOLD_MS} ms (got {self.hold_ms!r})")
        if self.width is not None and (not is_int(self.width) or not 1 <= self.width <= MAX_WIDTH):
            out.append(f"width must be from 1 to {MAX_WIDTH} pixels (got {self.width!r})")
        if not is_int(self.font_size) or not MIN_FONT_SIZE <= self.font_size <= MAX_FONT_SIZE:
            out.append(f"font size must be from {MIN_FONT_SIZE} to {MAX_FONT_SIZE} (got {self.font_size!r})")
        if self.palette not in PALETTES:
            out.append(f"palette must be one of {', '.join(PALETTES)} (got {self.palette!r})")
        if self.layout not in LAYOUTS:
            out.append(f"layout must be one of {', '.join(LAYOUTS)} (got {self.layout!r})")
        return out


@dataclass
class Animation:
    frames: list[Image.Image]  # mode "P", all the same size and palette
    durations_ms: list[int]  # how long each frame shows, multiples of 10 ms
    frame_indexes: list[int]  # frame_refs index (compare: global step) of each frame, the first of merged ones
    colors: IndexedColors  # the shared palette of every frame
    options: AnimationOptions = field(default_factory=AnimationOptions)

    @property
    def size(self) -> tuple[int, int]:
        return self.frames[0].size

    @property
    def total_ms(self) -> int:
        return sum(self.durations_ms)


class AnimationError(ValueError):
    """Options or a trace an animation cannot be made from; the message says why."""


def parse_blocks(text: str | None) -> tuple[int, ...] | None:
    """Blocks as people type them, counted from 1 ("2", "1,3", "" for all) -> 0-based tuple or None."""
    if text is None or not str(text).strip():
        return None
    try:
        numbers = [int(part) for part in str(text).replace(" ", ",").split(",") if part.strip()]
    except ValueError:
        raise AnimationError(f"blocks are numbers separated by commas, like 1,3 (got {text!r})") from None
    if min(numbers) < 1:
        raise AnimationError(f"blocks are counted from 1 (got {text!r})")
    return tuple(sorted({n - 1 for n in numbers}))


def build_animation(trace: Trace, options: AnimationOptions = AnimationOptions(), *, progress=None) -> Animation:
    """Render the animation of a trace; `progress(done, total)` is called after each frame."""
    problems = options.problems()
    if problems:
        raise AnimationError("; ".join(problems))
    refs = frame_refs(trace)
    if not refs:
        raise AnimationError("the run has no denoising steps to animate")
    blocks = _blocks(trace, refs, options.blocks)
    chosen = [i for i, ref in enumerate(refs) if ref.block in blocks]
    layout = select_blocks(animation_layout(trace, options.layout), blocks)
    palette = get_palette(options.palette)
    captions = {index: wrap_caption(caption(trace, refs, index, options), layout.columns) for index in chosen}
    caption_lines = max(len(lines) for lines in captions.values())
    font_size = _font_size(layout, options, caption_lines)
    colors = IndexedColors(palette)
    renderer = FrameRenderer(
        trace, layout, palette, font_size=font_size, caption_lines=caption_lines, antialias=options.antialias, colors=colors
    )
    width = options.width or renderer.size[0]

    def images():
        for done, index in enumerate(chosen, 1):
            frame = frame_state(trace, index, refs)
            lines = captions[index]
            yield index, _pad(renderer.render(frame, lines + [""] * (caption_lines - len(lines))), width, colors)
            if progress is not None:
                progress(done, len(chosen))

    return assemble(images(), colors, options)


def assemble(images, colors: IndexedColors, options: AnimationOptions) -> Animation:
    """An Animation from (index, image) pairs in order: a frame identical to the one before only
    makes that one last longer, and the last frame is held `options.hold_ms` more."""
    frames, durations, indexes = [], [], []
    frame_ms = _round10(options.frame_ms)
    for index, image in images:
        if frames and image.tobytes() == frames[-1].tobytes():
            durations[-1] += frame_ms
        else:
            frames.append(image)
            durations.append(frame_ms)
            indexes.append(index)
    durations[-1] += _round10(options.hold_ms)
    return Animation(frames, durations, indexes, colors, options)


# ---- captions ---------------------------------------------------------------------------------
def caption(trace: Trace, refs: list[FrameRef], index: int, options: AnimationOptions) -> list[str]:
    """The caption lines of frame `index`: the prompt and the status line, as the options say."""
    return ([prompt_line(trace)] if options.prompt else []) + ([status_line(trace, refs, index)] if options.caption else [])


def wrap_caption(lines: list[str], columns: int) -> list[str]:
    """Caption lines wrapped at the frame's width, so none is cut off on the right: the prompt at spaces, up to
    PROMPT_LINES lines (then an ellipsis; the trace holds all of it), the status line between its " · " parts."""
    out = []
    for line in lines:
        if line.startswith("Prompt: "):
            wrapped = textwrap.wrap(line, columns) or [""]
            if len(wrapped) > PROMPT_LINES:
                wrapped = wrapped[:PROMPT_LINES]
                wrapped[-1] = wrapped[-1][: columns - 1] + "…"
            out += wrapped
            continue
        current = ""
        for part in line.split(" · "):
            joined = f"{current} · {part}" if current else part
            if len(joined) <= columns or not current:
                current = joined
            else:
                out.append(current)
                current = part
        out += textwrap.wrap(current, columns) or [""]  # a part wider than the frame wraps at its spaces
    return out


def prompt_line(trace: Trace) -> str:
    return "Prompt: " + " ".join(trace.prompt.split())


def status_line(trace: Trace, refs: list[FrameRef], index: int) -> str:
    """Block, step, accepted count, tau_b and model at frame `index`, in one line (the model last: a long
    name is what wraps onto the next line when the line is wider than the frame)."""
    ref = refs[index]
    parts = [f"block {ref.block + 1}/{max(trace.max_blocks, ref.block + 1)}"]
    if ref.kind == "commit":
        parts.append("committed")
    else:
        step = trace.steps[ref.index]
        budget = trace.start.settings.get("max_denoising_steps") if trace.start else None
        parts.append(f"step {step.step + 1}" + (f"/{budget}" if budget else ""))
        parts.append(f"accepted {int(np.count_nonzero(step.accepted))}")
    tau = caption_tau_b(trace, refs, index)
    parts.append(f"tau_b {tau:+.2f}" if tau is not None else "tau_b n/a")
    parts.append(trace.model.name)
    return " · ".join(parts)


def caption_tau_b(trace: Trace, refs: list[FrameRef], index: int) -> float | None:
    """The live tau_b of the frame's block, as the app's readout shows it
    (`visualizer.metrics.live_readout`); None where it is undefined."""
    tau = live_readout(trace, index, refs=refs).tau_b
    return tau if is_defined(tau) else None


# ---- layout and size --------------------------------------------------------------------------
def select_blocks(layout: Layout, blocks: set[int]) -> Layout:
    """The layout with only `blocks`, their rows moved up to close the gaps."""
    starts = sorted(row for _, row in layout.headers)
    ranges = {block: (row, next((r for r in starts if r > row), layout.rows)) for block, row in layout.headers}
    shift, offset = {}, 0
    for block, row in sorted(layout.headers, key=lambda h: h[1]):
        first, end = ranges[block]
        if block in blocks:
            shift[block] = first - offset
            offset += end - first
    cells = tuple(replace(c, row=c.row - shift[c.block]) for c in layout.cells if c.block in blocks)
    headers = tuple((b, row - shift[b]) for b, row in layout.headers if b in blocks)
    return replace(layout, cells=cells, headers=headers, rows=offset)


def animation_layout(trace: Trace, kind: str) -> Layout:
    """Text layout needs the final tokens: an unfinished run is shown in the grid."""
    if kind == "text" and trace.finished and final_tokens(trace):
        return text_layout(trace)
    return grid_layout(trace.max_blocks, trace.canvas_length)


def _blocks(trace: Trace, refs: list[FrameRef], wanted) -> set[int]:
    recorded = sorted({ref.block for ref in refs})
    if wanted is None:
        return set(recorded)
    missing = sorted(set(wanted) - set(recorded))
    if missing:
        shown = ", ".join(str(b + 1) for b in missing)
        raise AnimationError(f"block(s) {shown} not in this run; it has block(s) 1 to {recorded[-1] + 1}")
    return set(wanted)


def _font_size(layout: Layout, options: AnimationOptions, caption_lines: int) -> int:
    if options.width is None:
        return options.font_size
    fitting = [s for s in range(MIN_FONT_SIZE, MAX_FONT_SIZE + 1)
               if frame_size(layout, font_size=s, caption_lines=caption_lines)[0] <= options.width]
    if not fitting:
        smallest = frame_size(layout, font_size=MIN_FONT_SIZE, caption_lines=caption_lines)[0]
        raise AnimationError(f"width {options.width} px is too narrow for this layout; it needs at least {smallest} px")
    return fitting[-1]


def _pad(image: Image.Image, width: int, colors: IndexedColors) -> Image.Image:
    """Centre a frame on a background of `width` pixels (scaling would blur the text)."""
    if image.width == width:
        return image
    out = colors.blank((width, image.height))
    out.paste(image, ((width - image.width) // 2, 0))
    return out


def _round10(ms: int) -> int:
    return int(round(ms / 10.0)) * 10
