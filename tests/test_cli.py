"""The CLI through its entry point: record a trace, render a frame, refuse bad input in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from PIL import Image

from visualizer.trace import Trace

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "visualizer", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_record_then_frame(random_model_dir, tmp_path):
    run = tmp_path / "run.json"
    out = cli("record", "--demo", "acrostic", "--model", random_model_dir, "--seed", "0", "--steps", "5", "--out", run)
    assert out.returncode == 0, out.stderr
    trace = Trace.load(run)
    assert trace.prompt.startswith("Write a six-line poem")
    assert trace.settings.seed == 0 and trace.settings.max_denoising_steps == 5
    assert len(trace.steps) >= 5 and trace.end is not None

    png = tmp_path / "frame.png"
    out = cli("frame", run, "--step", "2", "--out", png)
    assert out.returncode == 0, out.stderr
    image = Image.open(png)
    assert image.size[0] > 500 and image.mode == "RGB"
    last = tmp_path / "last.png"
    assert cli("frame", run, "--out", last, "--layout", "text", "--palette", "colorblind").returncode == 0
    assert Image.open(last).size != image.size  # the text layout has its own (fixed) geometry


def test_bad_input_is_one_line_and_exit_status_2(random_model_dir, tmp_path):
    cases = [
        ("record", "--prompt", " ", "--model", random_model_dir, "--out", tmp_path / "x.json"),
        ("record", "--demo", "sonnet", "--out", tmp_path / "x.json"),
        ("record", "--prompt", "hi", "--model", tmp_path / "nope", "--out", tmp_path / "x.json"),
        ("record", "--prompt", "hi", "--steps", "0", "--out", tmp_path / "x.json"),
        ("record", "--prompt", "hi", "--out", tmp_path / "no-such-dir" / "x.json"),
        ("frame", tmp_path / "missing.json", "--out", tmp_path / "f.png"),
    ]
    for args in cases:
        out = cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr
        assert out.stderr.strip().splitlines()[-1].startswith("error: ")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "diffusion-visualizer-trace", "version": 1}')
    out = cli("frame", bad, "--out", tmp_path / "f.png")
    assert out.returncode == 2 and "missing 'model'" in out.stderr
