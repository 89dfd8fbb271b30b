"""Animations: the cached renderer draws the reference pixels, and each format is a valid file
with the right frames, loop flag and durations (read back with Pillow and imageio)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageSequence
from scipy.stats import kendalltau

from tests.command_line import cli, cli_process
from tests.fake_records import fake_trace
from visualizer.animation import (
    AnimationError,
    AnimationOptions,
    build_animation,
    caption_tau_b,
    parse_blocks,
    select_blocks,
    status_line,
)
from visualizer.export import ExportError, export_animation, export_to_folder, mp4_timing, save_gif, save_mp4, save_webp
from visualizer.layout import grid_layout, text_layout
from visualizer.palette import COLORBLIND, STANDARD
from visualizer.render_cache import FrameRenderer, IndexedColors
from visualizer.render_image import render_frame_image
from visualizer.states import frame_refs, frame_state


@pytest.fixture
def trace():
    """Two blocks, a remask, a resample that changed, an EOS with pad after it."""
    return fake_trace(["1000", "1100", "0110", "1111"], ["0011", "1011", "1111"], canvas_length=4, changes={(2, 1): 60}, eos_at=3)


@pytest.fixture
def odd_trace():
    """Pieces that ink outside their cell or line: cut tokens, wide and stacked glyphs."""
    trace = fake_trace(["100000", "110000", "111100", "111111"], canvas_length=6)
    trace.pieces.update({10: "w" * 40, 11: "W", 12: "\ufffd", 13: "漢字", 14: "a\u0301\u0301\u0301\u0301", 15: "\n  x"})
    return trace


def frames_of(image_file) -> list[np.ndarray]:
    return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(image_file)]


# ---- the cached renderer -------------------------------------------------------------------
@pytest.fixture
def pinned_trace():
    """Pins at positions 1 and 4: rows of one geometry, one with a pin and one without, must not share a line."""
    from tests.trace_factory import inside_trace

    return inside_trace(pins=((1, 30), (4, 31)))


@pytest.mark.parametrize("layout_kind", ["grid", "text"])
@pytest.mark.parametrize("palette, antialias", [(STANDARD, True), (COLORBLIND, True), (STANDARD, False)])
@pytest.mark.parametrize("which", ["trace", "odd_trace", "pinned_trace"])
def test_cached_renderer_draws_exactly_the_reference_pixels(which, palette, antialias, layout_kind, request):
    trace = request.getfixturevalue(which)
    layout = grid_layout(trace.max_blocks, trace.canvas_length, per_row=3, cell_chars=5) if layout_kind == "grid" else text_layout(trace)
    colors = IndexedColors(palette)
    rgb = FrameRenderer(trace, layout, palette, caption_lines=2, antialias=antialias)
    indexed = FrameRenderer(trace, layout, palette, caption_lines=2, antialias=antialias, colors=colors)
    for _ in range(2):  # the second pass comes entirely from the cache
        for i in range(len(frame_refs(trace))):
            frame, caption = frame_state(trace, i), ["the prompt", f"status of frame {i} · tau_b +0.5"]
            reference = render_frame_image(trace, frame, layout, palette, caption=caption, antialias=antialias)
            assert rgb.render(frame, caption).tobytes() == reference.tobytes(), i
            assert indexed.render(frame, caption).tobytes() == colors.to_indexed(reference).tobytes(), i


def test_cached_renderer_reuses_pieces(trace):
    layout = grid_layout(trace.max_blocks, trace.canvas_length, per_row=2, cell_chars=5)
    renderer = FrameRenderer(trace, layout, STANDARD, caption_lines=1)
    for i in range(len(frame_refs(trace))):
        renderer.render(frame_state(trace, i), ["same caption"])
    drawn = len(renderer._lines) + len(renderer._cells)
    for i in range(len(frame_refs(trace))):
        renderer.render(frame_state(trace, i), ["same caption"])
    assert len(renderer._lines) + len(renderer._cells) == drawn  # nothing new was drawn


def test_indexed_colors_keep_palette_colours_and_snap_the_rest():
    colors = IndexedColors(STANDARD)
    assert len(colors.colors) < 256
    swatch = Image.new("RGB", (len(colors.colors), 1))
    swatch.putdata([tuple(int(v) for v in c) for c in colors.colors])
    mapped = colors.to_indexed(swatch)
    assert list(mapped.getdata()) == list(range(len(colors.colors)))  # every palette colour maps to itself
    odd = Image.new("RGB", (1, 1), (255, 0, 0))
    index = colors.to_indexed(odd).getpixel((0, 0))
    distances = ((colors.colors - np.array([255, 0, 0])) ** 2).sum(axis=1)
    assert index == int(distances.argmin())


# ---- animation frames ------------------------------------------------------------------------
def test_animation_has_a_frame_per_step_and_commit_and_holds_the_last(trace):
    animation = build_animation(trace, AnimationOptions(frame_ms=120, hold_ms=1000))
    assert len(animation.frames) == len(frame_refs(trace)) == 4 + 1 + 3 + 1
    assert animation.durations_ms == [120] * 8 + [1120]
    assert {f.size for f in animation.frames} == {animation.size}
    assert all(f.mode == "P" for f in animation.frames)


def test_identical_frames_are_merged_into_a_longer_one():
    trace = fake_trace(["1000", "1000", "1000", "1100"], canvas_length=4)  # step 1 new, steps 2 and 3 kept
    animation = build_animation(trace, AnimationOptions(frame_ms=100, hold_ms=0, caption=False, prompt=False))
    assert animation.durations_ms == [100, 200, 100, 100]  # step 2 shows twice as long: step 3 looks the same
    assert animation.frame_indexes == [0, 1, 3, 4]
    with_caption = build_animation(trace, AnimationOptions(frame_ms=100, hold_ms=0, prompt=False))
    assert len(with_caption.frames) == 5  # the step counter differs, so nothing is merged


def test_block_selection_shows_only_those_blocks(trace):
    both = build_animation(trace, AnimationOptions(layout="grid"))
    second = build_animation(trace, AnimationOptions(layout="grid", blocks=(1,)))
    assert len(second.frames) == 3 + 1
    assert second.size[0] == both.size[0] and second.size[1] < both.size[1]
    layout = select_blocks(grid_layout(2, 4, per_row=2), {1})
    assert {c.block for c in layout.cells} == {1} and layout.headers == ((1, 0),) and layout.rows == 3
    with pytest.raises(AnimationError, match="block\\(s\\) 3 not in this run"):
        build_animation(trace, AnimationOptions(blocks=(2,)))


def test_width_picks_the_font_and_pads_to_the_exact_width(trace):
    animation = build_animation(trace, AnimationOptions(width=700))
    assert animation.size[0] == 700
    natural = build_animation(trace, AnimationOptions())
    assert natural.size[0] != 700
    with pytest.raises(AnimationError, match="too narrow"):
        build_animation(trace, AnimationOptions(width=50))


@pytest.mark.parametrize(
    "options, message",
    [
        (AnimationOptions(frame_ms=5), "frame duration"),
        (AnimationOptions(hold_ms=-1), "hold"),
        (AnimationOptions(palette="neon"), "palette"),
        (AnimationOptions(layout="spiral"), "layout"),
        (AnimationOptions(font_size=200), "font size"),
        (AnimationOptions(width=0), "width"),
        (AnimationOptions(blocks=()), "blocks"),
    ],
)
def test_bad_options_are_refused_with_a_message(trace, options, message):
    with pytest.raises(AnimationError, match=message):
        build_animation(trace, options)


def test_caption_shows_prompt_model_step_and_tau_b(trace):
    refs = frame_refs(trace)
    line = status_line(trace, refs, 2)
    assert line.startswith("block 1/2 · step 3 · accepted 2 · tau_b ") and line.endswith("· fake")
    assert "tau_b " in line
    assert "committed" in status_line(trace, refs, 4)
    trace.start.settings["max_denoising_steps"] = 4
    assert status_line(trace, refs, 2).startswith("block 1/2 · step 3/4 ·")


def test_caption_tau_b_is_scipys_tau_b_with_pending_positions_tied_later():
    trace = fake_trace(["1000", "1100", "1110", "1111"], canvas_length=4)
    refs = frame_refs(trace)
    # after step 2 (index 1): positions 0, 1 accepted at steps 0, 1; 2 and 3 pending -> "later" = 2
    expected = kendalltau([0, 1, 2, 3], [0, 1, 2, 2], variant="b").statistic
    assert caption_tau_b(trace, refs, 1) == pytest.approx(expected)
    assert caption_tau_b(trace, refs, 4) == pytest.approx(1.0)  # the commit frame: strictly left to right
    assert caption_tau_b(trace, refs, 0) == pytest.approx(kendalltau([0, 1, 2, 3], [0, 1, 1, 1], variant="b").statistic)
    # EOS and pad are cut: with an EOS at position 2 only positions 0 and 1 count
    cut = fake_trace(["0100", "1100", "1111"], canvas_length=4, eos_at=2)
    assert caption_tau_b(cut, frame_refs(cut), 3) == pytest.approx(-1.0)
    same = fake_trace(["1111"], canvas_length=4)
    assert caption_tau_b(same, frame_refs(same), 0) is None  # all tied: undefined, shown as n/a
    assert "tau_b n/a" in status_line(same, frame_refs(same), 0)


# ---- files -------------------------------------------------------------------------------------
def test_gif_loops_forever_with_the_exact_frames_and_durations(trace, tmp_path):
    animation = build_animation(trace, AnimationOptions(frame_ms=150, hold_ms=2000))
    path = save_gif(animation, tmp_path / "run.gif")
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == len(animation.frames)
        assert gif.info["loop"] == 0
        durations = []
        for frame in ImageSequence.Iterator(gif):
            durations.append(frame.info["duration"])
        assert durations == animation.durations_ms
    with Image.open(path) as gif:
        shown = frames_of(gif)
    for got, want in zip(shown, animation.frames):
        assert np.array_equal(got, np.asarray(want.convert("RGB")))  # transparency deltas composite exactly


def test_gif_stores_small_deltas(tmp_path):
    """A change in one cell of a big frame costs a few hundred bytes, not a whole frame."""
    masks = ["1" + "0" * 63] + ["1" * k + "0" * (64 - k) for k in range(2, 41)]
    trace = fake_trace(masks, canvas_length=64)
    animation = build_animation(trace, AnimationOptions(layout="grid"))
    path = save_gif(animation, tmp_path / "run.gif")
    first = animation.frames[0]
    first.save(tmp_path / "one.gif")
    per_frame = (path.stat().st_size - (tmp_path / "one.gif").stat().st_size) / (len(animation.frames) - 1)
    assert per_frame < 0.2 * (tmp_path / "one.gif").stat().st_size


def test_webp_is_lossless_loops_and_keeps_durations(trace, tmp_path):
    animation = build_animation(trace, AnimationOptions(frame_ms=100, hold_ms=500))
    path = save_webp(animation, tmp_path / "run.webp")
    with Image.open(path) as webp:
        assert webp.format == "WEBP" and webp.n_frames == len(animation.frames)
        assert webp.info["loop"] == 0
        durations = []
        for i in range(webp.n_frames):
            webp.seek(i)
            webp.load()  # Pillow sets the frame's duration when it decodes it
            durations.append(webp.info["duration"])
            assert np.array_equal(np.asarray(webp.convert("RGB")), np.asarray(animation.frames[i].convert("RGB")))
        assert durations == animation.durations_ms


def test_mp4_repeats_frames_to_last_their_durations(trace, tmp_path):
    import imageio.v3 as iio

    animation = build_animation(trace, AnimationOptions(frame_ms=150, hold_ms=1000))
    path = save_mp4(animation, tmp_path / "run.mp4")
    fps, repeats = mp4_timing(animation.durations_ms)
    assert fps == 20 and repeats == [3] * 8 + [23]
    video = iio.imread(path, plugin="pyav") if _has_pyav() else np.stack(list(_ffmpeg_frames(path)))
    assert len(video) == sum(repeats)
    width, height = animation.size
    assert video.shape[1:3] == (height + height % 2, width + width % 2)
    for shown, frame in ((video[0], animation.frames[0]), (video[-1], animation.frames[-1])):
        want = np.asarray(frame.convert("RGB"), dtype=float)
        assert np.abs(shown[:height, :width].astype(float) - want).mean() < 4  # lossy, but the same picture


def test_mp4_timing_falls_back_to_25_fps_and_keeps_the_total():
    fps, repeats = mp4_timing([130, 130, 130, 1130])
    assert fps == 25 and sum(repeats) == round(1520 * 25 / 1000)
    assert mp4_timing([100, 100, 2100]) == (10, [1, 1, 21])


def test_export_writes_every_format_and_reports_progress(trace, tmp_path):
    seen = []
    result = export_animation(
        trace, AnimationOptions(), gif=tmp_path / "a.gif", mp4=tmp_path / "a.mp4", webp=tmp_path / "a.webp",
        progress=lambda done, total: seen.append((done, total)),
    )
    assert set(result.paths) == {"gif", "mp4", "webp"} and all(p.stat().st_size > 0 for p in result.paths.values())
    assert result.frames == len(frame_refs(trace))
    assert seen == sorted(seen) and seen[-1][0] == seen[-1][1] and len(seen) > result.frames
    assert set(result.seconds) == {"render", "gif", "mp4", "webp"}


def test_export_to_folder_names_files_after_the_run(trace, tmp_path):
    trace.prompt = "Why is the sky blue? In three sentences."
    result = export_to_folder(trace, AnimationOptions(), tmp_path, formats=("gif", "webp"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in result.paths.values())
    assert result.paths["gif"].name.startswith("anim-why-is-the-sky-blue-") and result.paths["webp"].suffix == ".webp"
    with pytest.raises(AnimationError, match="formats"):
        export_to_folder(trace, AnimationOptions(), tmp_path, formats=("avi",))


def test_blocks_as_people_type_them():
    assert parse_blocks("2") == (1,) and parse_blocks("3, 1,3") == (0, 2) and parse_blocks(" ") is None
    for bad in ("0", "two", "1;2"):
        with pytest.raises(AnimationError):
            parse_blocks(bad)


def test_export_refuses_missing_folders_and_no_target(trace, tmp_path):
    with pytest.raises(ExportError, match="does not exist"):
        export_animation(trace, gif=tmp_path / "nope" / "a.gif")
    with pytest.raises(AnimationError, match="nothing to export"):
        export_animation(trace)


def test_a_run_without_steps_cannot_be_animated():
    trace = fake_trace(["10"], canvas_length=2, finished=False)
    trace.steps.clear()
    trace.blocks.clear()
    with pytest.raises(AnimationError, match="no denoising steps"):
        build_animation(trace)


def _has_pyav() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def _ffmpeg_frames(path):
    import imageio.v2 as imageio

    with imageio.get_reader(str(path), format="FFMPEG") as reader:
        yield from reader


# ---- command line ------------------------------------------------------------------------------
# The two commands whose progress bar is read run as processes: cli/export.py's bar binds sys.stderr when the module
# loads (a default argument), so an in-process run cannot catch what it draws.
@pytest.mark.processes
def test_export_cli_writes_the_three_formats(trace, tmp_path):
    run = trace.save(tmp_path / "run.json")
    out = cli_process("export", run, "--gif", tmp_path / "b.gif", "--mp4", tmp_path / "b.mp4", "--webp", tmp_path / "b.webp",
              "--blocks", "2", "--frame-ms", "100", "--palette", "colorblind", "--layout", "grid")
    assert out.returncode == 0, out.stderr
    assert "100%" in out.stderr and "wrote" in out.stderr  # the progress bar and a summary
    with Image.open(tmp_path / "b.gif") as gif:
        assert gif.n_frames == 3 + 1 and gif.info["loop"] == 0  # block 2 only: three steps and its commit
    with Image.open(tmp_path / "b.webp") as webp:
        assert webp.n_frames == 4
    assert (tmp_path / "b.mp4").stat().st_size > 0


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "nothing to write"),
        (("--gif", "{tmp}/a.gif", "--blocks", "0"), "--blocks are counted from 1"),
        (("--gif", "{tmp}/a.gif", "--blocks", "one"), "--blocks are numbers"),
        (("--gif", "{tmp}/a.gif", "--blocks", "7"), "not in this run"),
        (("--gif", "{tmp}/a.gif", "--frame-ms", "1"), "frame duration"),
        (("--gif", "{tmp}/a.gif", "--width", "20"), "too narrow"),
        (("--gif", "{tmp}/missing/a.gif",), "does not exist"),
    ],
)
def test_export_cli_bad_input_is_one_line(trace, tmp_path, args, message):
    run = trace.save(tmp_path / "run.json")
    out = cli("export", run, *(a.format(tmp=tmp_path) for a in args))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: ") and message in out.stderr


def test_export_cli_refuses_a_bad_trace(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "diffusion-visualizer-trace", "version": 1, "model": 3}')
    out = cli("export", bad, "--gif", tmp_path / "a.gif")
    assert out.returncode == 2 and "error: " in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "a.gif").exists()


@pytest.mark.processes
def test_demos_cli_records_and_exports_each_demo(random_model_dir, tmp_path):
    from visualizer.trace import Trace

    out = cli_process("demos", "--out", tmp_path / "demos", "--model", random_model_dir, "--only", "haiku,sky", "--steps", "3", "--seed", "1")
    assert out.returncode == 0, out.stderr
    assert "[1/2] haiku" in out.stderr and "[2/2] sky" in out.stderr and "100%" in out.stderr
    for name in ("haiku", "sky"):
        trace = Trace.load(tmp_path / "demos" / f"{name}.json")
        assert trace.settings.max_denoising_steps == 3 and trace.settings.seed == 1
        with Image.open(tmp_path / "demos" / f"{name}.gif") as gif:
            assert gif.n_frames == len(frame_refs(trace))
    bad = cli("demos", "--out", tmp_path / "x", "--only", "sonnet")
    assert bad.returncode == 2 and "unknown demo(s) sonnet" in bad.stderr


def test_shipped_demo_gifs_are_small_looping_animations():
    from pathlib import Path

    from prompts.demos import DEMO_NAMES

    folder = Path(__file__).resolve().parent.parent / "assets" / "demos"
    gifs = {path.stem: path for path in folder.glob("*.gif")}
    assert set(gifs) == set(DEMO_NAMES)
    assert sum(path.stat().st_size for path in gifs.values()) < 5_000_000
    for path in gifs.values():
        with Image.open(path) as gif:
            assert gif.n_frames > 5 and gif.info["loop"] == 0
