"""Two runs stepped together by global step index, the shorter one held on its last frame."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image, ImageSequence

from tests.command_line import cli
from tests.fake_records import fake_trace
from visualizer.animation import AnimationError, AnimationOptions, animation_layout
from visualizer.compare import GAP, align, build_compare_animation, compare_html, compare_image, run_labels, run_title, side_captions
from visualizer.export import save_gif
from visualizer.palette import STANDARD
from visualizer.render_image import render_frame_image
from visualizer.states import frame_state


@pytest.fixture
def short():
    """Two steps in block 1, one in block 2: five frames."""
    trace = fake_trace(["1000", "1111"], ["1111"], canvas_length=4)
    trace.start.settings.update(seed=0)
    return trace


@pytest.fixture
def long():
    trace = fake_trace(["1000", "1100", "1110", "1111"], canvas_length=4)
    trace.start.settings.update(seed=1)
    return trace


def test_align_steps_together_and_holds_the_shorter_run(short, long):
    aligned = align(short, long)
    assert [a.step for a in aligned] == [0, 1, 2, 3, 4]  # max(3, 4) steps, then the final position
    # short: frames 0, 1 (block 1 steps), 2 (block 1 commit), 3 (block 2 step), 4 (block 2 commit)
    assert [a.frame_a for a in aligned] == [0, 1, 3, 4, 4]  # its third step is frame 3; then held on 4
    assert [a.frame_b for a in aligned] == [0, 1, 2, 3, 4]
    assert [a.holding_a for a in aligned] == [False, False, False, True, True]
    assert [a.holding_b for a in aligned] == [False, False, False, False, True]


def test_labels_say_what_differs(short, long):
    label_a, label_b = run_labels(short, long)
    assert "seed 0" in label_a and "seed 1" in label_b
    assert "max new tokens 8" in label_a and "max new tokens 4" in label_b
    same_a, same_b = run_labels(long, long)  # titled by the run (prompt, seed, sampler), nothing else differs
    assert same_a == "A: " + run_title(long) and same_b == "B: " + run_title(long)
    assert repr(" ".join(long.prompt.split())[:20])[:15] in run_title(long) and "seed 1" in run_title(long)


def test_image_is_both_reference_frames_side_by_side(short, long):
    image = compare_image(short, long, 3, layout="grid")
    at = align(short, long)[3]
    captions = side_captions(short, long, at)
    left = render_frame_image(short, frame_state(short, at.frame_a), animation_layout(short, "grid"), STANDARD, caption=captions[0])
    right = render_frame_image(long, frame_state(long, at.frame_b), animation_layout(long, "grid"), STANDARD, caption=captions[1])
    assert image.size == (left.width + GAP + right.width, max(left.height, right.height))
    assert image.crop((0, 0, left.width, left.height)).tobytes() == left.tobytes()
    assert image.crop((left.width + GAP, 0, image.width, right.height)).tobytes() == right.tobytes()
    assert "(finished)" in captions[0][0] and "(finished)" not in captions[1][0]
    assert "tau_b" in captions[0][1] and "tau_b" in captions[1][1]


def test_html_has_both_runs_with_their_readouts(short, long):
    html = compare_html(short, long, 1)
    assert html.count('class="dv-frame"') == 2
    assert "seed 0" in html and "seed 1" in html
    assert len(re.findall(r"tau_b [+-]\d\.\d\d", html)) == 2
    assert compare_html(short, long, 99) == compare_html(short, long, 4)  # clamped to the last step


def test_marked_positions_are_outlined_on_both_sides_and_nowhere_else(short, long):
    outline = "inset 0 0 0 1.5px"
    assert outline not in compare_html(short, long, 1)
    html = compare_html(short, long, 1, marked=frozenset({(0, 1), (0, 3)}))
    cells = re.findall(r'<span class="dv-cell[^"]*" style="([^"]*)"', html)
    assert len(cells) == 8 + 4  # short: two blocks of 4 cells; long: one block
    outlined = [i for i, style in enumerate(cells) if outline in style]
    assert outlined == [1, 3, 9, 11]  # block 1's positions 1 and 3, in each pane


def test_compare_animation_is_a_valid_gif(short, long, tmp_path):
    animation = build_compare_animation(short, long, AnimationOptions(frame_ms=100, hold_ms=500))
    assert len(animation.frames) == len(align(short, long))
    path = save_gif(animation, tmp_path / "both.gif")
    with Image.open(path) as gif:
        assert gif.n_frames == len(animation.frames) and gif.info["loop"] == 0
        last = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(gif)][-1]
    assert np.array_equal(last, np.asarray(animation.frames[-1].convert("RGB")))
    with pytest.raises(AnimationError, match="whole runs"):
        build_compare_animation(short, long, AnimationOptions(blocks=(0,)))


def test_compare_through_the_cli(short, long, tmp_path):
    a, b = short.save(tmp_path / "a.json"), long.save(tmp_path / "b.json")
    run = lambda *args: cli("compare", *args)  # noqa: E731
    out = run(a, b, "--png", tmp_path / "end.png", "--html", tmp_path / "end.html", "--gif", tmp_path / "both.gif", "--quiet")
    assert out.returncode == 0, out.stderr
    assert Image.open(tmp_path / "end.png").size == compare_image(short, long, 4).size
    assert "dv-compare" in (tmp_path / "end.html").read_text()
    assert Image.open(tmp_path / "both.gif").n_frames == 5
    bad = run(a, b, "--png", tmp_path / "x.png", "--step", "9")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: --step")
    none = run(a, b)
    assert none.returncode == 2 and "nothing to write" in none.stderr
