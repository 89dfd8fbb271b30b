"""Export a run as an animation: GIF, and optionally MP4 and lossless animated WebP.

    result = export_animation(trace, AnimationOptions(frame_ms=150), gif="run.gif", mp4="run.mp4",
                              webp="run.webp", progress=lambda done, total: print(done, total))
    result.paths["gif"], result.frames, result.seconds
    result = export_to_folder(trace, options, tmpdir, formats=("gif", "webp"))   # named after the run

Frames come from `visualizer.animation` (the Pillow renderer, one shared small palette); this
module only encodes them.  All three files carry the same pixels (MP4 up to its lossy codec):
- GIF: loops forever (`loop=0`), one global palette, frame optimisation (each frame stores only
  the rectangle that changed, unchanged pixels in it transparent); no dithering.
- WebP: lossless, loops forever, the same per-frame durations.
- MP4: H.264 (yuv420p, plays everywhere) through imageio-ffmpeg's bundled ffmpeg.  A video has
  one frame rate, so each frame is repeated to last its duration; sizes are padded to even.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from .animation import Animation, AnimationError, AnimationOptions, build_animation
from .replay import download_name
from .trace import Trace

FORMATS = ("gif", "mp4", "webp")
MP4_MAX_FPS = 50
MP4_FALLBACK_FPS = 25  # when the durations have no common tick of 20 ms or more
MP4_CRF = 18  # x264 quality: low enough that text edges stay clean
# libwebp's lossless effort: method 4 / quality 50 is ~4x smaller than method 0 and within 4 % of
# the best size; method 6 with quality 100 took minutes for 100 frames.
WEBP_METHOD = 4
WEBP_EFFORT = 50
PROGRESS_STEPS = 1000  # `progress(done, total)` counts thousandths of the whole export


class ExportError(RuntimeError):
    """A file could not be written; the message says which and why."""


@dataclass(frozen=True)
class ExportResult:
    paths: dict[str, Path]  # format -> file written
    frames: int  # frames in the animation after merging identical ones
    size: tuple[int, int]  # width, height in pixels
    duration_ms: int  # one loop
    seconds: dict[str, float]  # wall time of "render" and of each format written


def export_animation(
    trace: Trace,
    options: AnimationOptions = AnimationOptions(),
    *,
    gif=None,
    mp4=None,
    webp=None,
    progress=None,
) -> ExportResult:
    """Render the run once and write each requested file; `progress(done, total)` as it goes
    (total is PROGRESS_STEPS; rendering and each file take equal shares).

    Raises AnimationError for options the run cannot use and ExportError when a file cannot be
    written, both with a one-line message.
    """
    targets = {name: Path(path) for name, path in (("gif", gif), ("mp4", mp4), ("webp", webp)) if path is not None}
    if not targets:
        raise AnimationError("nothing to export: give at least one of gif, mp4, webp")
    for name, path in targets.items():
        if not path.parent.is_dir():
            raise ExportError(f"cannot write {path}: folder {path.parent} does not exist")

    stages = 1 + len(targets)  # rendering, then each file; the bar gives each stage the same share

    def stage(k: int):
        def report(done: int, total: int) -> None:
            if progress is not None:
                progress(round(PROGRESS_STEPS * (k + done / max(total, 1)) / stages), PROGRESS_STEPS)

        return report

    seconds = {}
    start = time.perf_counter()
    animation = build_animation(trace, options, progress=stage(0))
    seconds["render"] = time.perf_counter() - start
    for k, (name, path) in enumerate(targets.items(), 1):
        start = time.perf_counter()
        try:
            if name == "mp4":
                save_mp4(animation, path, progress=stage(k))  # the slow one: it reports every frame
            else:
                (save_gif if name == "gif" else save_webp)(animation, path)
        except (OSError, RuntimeError, ValueError) as exc:
            raise ExportError(f"cannot write {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        seconds[name] = time.perf_counter() - start
        stage(k)(1, 1)
    return ExportResult(targets, len(animation.frames), animation.size, animation.total_ms, seconds)


def export_to_folder(
    trace: Trace, options: AnimationOptions = AnimationOptions(), folder=".", *, formats=("gif",), progress=None
) -> ExportResult:
    """`export_animation` into `folder`, each file named after the run (what the app offers as
    downloads): e.g. anim-write-a-six-line-poem-20261121-2000.gif."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise AnimationError(f"formats must be some of {', '.join(FORMATS)} (got {', '.join(unknown) or 'none'})")
    stem = "anim-" + download_name(trace).removeprefix("trace-").removesuffix(".json")
    paths = {name: Path(folder) / f"{stem}.{name}" for name in formats}
    return export_animation(trace, options, progress=progress, **paths)


def save_gif(animation: Animation, path) -> Path:
    """An endlessly looping GIF: one global palette, each frame only what changed.

    Pillow's own `optimize=True` makes unchanged pixels transparent, but for palette frames it
    does so through a per-pixel Python list (~40 ms a frame at 1000x440); the same result is
    made here with numpy: every pixel equal to the previous frame's becomes the transparent
    index, and Pillow still crops each frame to the rectangle that differs.
    """
    colors = animation.colors
    clear = len(colors.colors)  # the first free index of the palette
    palette = colors.palette_bytes + bytes(_unused_color(colors.colors))
    frames, previous = [], None
    for frame in animation.frames:
        pixels = np.asarray(frame)
        delta = pixels if previous is None else np.where(pixels == previous, np.uint8(clear), pixels)
        image = Image.fromarray(delta.astype(np.uint8, copy=False), "P")
        image.putpalette(palette)
        frames.append(image)
        previous = pixels
    first, *rest = frames
    first.save(
        path,
        format="GIF",
        save_all=True,
        append_images=rest,
        duration=animation.durations_ms,
        loop=0,
        palette=palette,  # one global table: no per-frame palettes
        transparency=clear,
        disposal=1,  # keep each frame: the next one draws only what changed
    )
    return Path(path)


def _unused_color(colors: np.ndarray) -> tuple[int, int, int]:
    """A colour not in the palette, for the transparent index (it is never shown)."""
    used = {tuple(int(v) for v in c) for c in colors}
    return next(c for c in ((255, 0, 255), (0, 255, 255), (255, 255, 0), (1, 2, 3)) if c not in used)


def save_webp(animation: Animation, path) -> Path:
    """A lossless, endlessly looping animated WebP with the same frames and durations."""
    first, *rest = animation.frames
    r, g, b = (int(v) for v in animation.colors.colors[0])
    first.save(
        path,
        format="WEBP",
        save_all=True,
        append_images=rest,
        duration=animation.durations_ms,
        loop=0,
        lossless=True,
        quality=WEBP_EFFORT,
        method=WEBP_METHOD,
        background=(r, g, b, 255),
    )
    return Path(path)


def save_mp4(animation: Animation, path, *, progress=None) -> Path:
    """An H.264 MP4; frames repeat to last their durations at one frame rate.

    `progress(done, total)` is called after each animation frame is written."""
    import imageio.v2 as imageio  # optional heavy import: only MP4 needs ffmpeg

    fps, repeats = mp4_timing(animation.durations_ms)
    width, height = animation.size
    even = (width + width % 2, height + height % 2)  # yuv420p needs even sides
    writer = imageio.get_writer(
        str(path),
        format="FFMPEG",
        fps=fps,
        codec="libx264",
        pixelformat="yuv420p",
        macro_block_size=1,  # sizes are made even here: imageio would otherwise rescale (blur)
        quality=None,
        ffmpeg_params=["-crf", str(MP4_CRF), "-tune", "stillimage", "-movflags", "+faststart"],
        ffmpeg_log_level="error",
    )
    try:
        for done, (frame, count) in enumerate(zip(animation.frames, repeats), 1):
            rgb = frame.convert("RGB")
            if rgb.size != even:
                padded = Image.new("RGB", even, tuple(int(v) for v in animation.colors.colors[0]))
                padded.paste(rgb, (0, 0))
                rgb = padded
            data = np.asarray(rgb)
            for _ in range(count):
                writer.append_data(data)
            if progress is not None:
                progress(done, len(animation.frames))
    finally:
        writer.close()
    return Path(path)


def mp4_timing(durations_ms: list[int]) -> tuple[int, list[int]]:
    """(frames per second, times each frame repeats) so every frame lasts its duration.

    The common tick of all durations gives exact timing when it makes a whole frame rate of at
    most 50 fps (a tick of 20, 25, 40, 50, 100, ... ms); otherwise 25 fps, with frame boundaries
    rounded to the nearest tick (cumulatively, so the total length stays right; a frame shorter
    than half a tick may get none).
    """
    tick = math.gcd(*durations_ms)
    fps = 1000 // tick if tick >= 1000 / MP4_MAX_FPS and 1000 % tick == 0 else MP4_FALLBACK_FPS
    repeats, start = [], 0
    for duration in durations_ms:
        end = start + duration
        repeats.append(round(end * fps / 1000) - round(start * fps / 1000))
        start = end
    return fps, repeats
