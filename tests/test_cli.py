"""The CLI through its entry point: record a trace, render a frame, refuse bad input in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tests.command_line import ROOT, cli, cli_process
from visualizer.trace import Trace


@pytest.mark.processes
def test_the_command_line_as_its_own_process(tmp_path):
    """The smoke test of `python -m visualizer` itself (every other test runs the commands in-process): a
    command's output and exit status 0, and bad input as one line and exit status 2, never a traceback."""
    old = ROOT / "tests" / "data" / "trace_v1.json"
    out = cli_process("frame", old, "--out", tmp_path / "frame.png")
    assert out.returncode == 0, out.stderr
    assert Image.open(tmp_path / "frame.png").mode == "RGB"
    out = cli_process("frame", tmp_path / "missing.json", "--out", tmp_path / "f.png")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: ")



@pytest.mark.processes
def test_a_reader_that_leaves_early_gets_no_traceback():
    """`metrics run.json | head -1`: the pipe's reader is gone before the command writes (its read end closed
    at once, so the write fails every time, not only when the output outgrows the pipe's buffer)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        out = subprocess.run([sys.executable, "-m", "visualizer", "metrics", ROOT / "assets" / "traces" / "sky.json"],
                             stdout=writer, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(writer)
    assert out.returncode == 1 and out.stderr == "", out.stderr

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


def test_alternatives_budget_and_structure_from_the_command_line(random_model_dir, tmp_path):
    run = tmp_path / "run.json"
    out = cli("record", "--demo", "acrostic", "--model", random_model_dir, "--steps", "4", "--topk", "3",
              "--entropy-bound", "20", "--out", run, "--quiet")
    assert out.returncode == 0, out.stderr
    trace = Trace.load(run)
    assert trace.settings.record_topk == 3 and trace.steps[0].topk == 3 and not trace.settings.thinking

    out = cli("alternatives", run, "--position", "4", "--step", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("block 1, position 4, step 2:") and len([x for x in lines if x.startswith("  1. ")]) == 2
    assert "commit step" in out.stdout and ("almost chose" in out.stdout or "not committed" in out.stdout)

    svg = tmp_path / "budget.svg"
    out = cli("budget", run, "--step", "1", "--svg", svg)
    assert out.returncode == 0, out.stderr
    assert "fit the entropy bound of 20 nats" in out.stdout and "rank" in out.stdout
    assert svg.read_text().startswith("<svg")

    chart = tmp_path / "structure.svg"
    out = cli("metrics", run, "--no-positions", "--svg", chart)
    assert out.returncode == 0, out.stderr
    import json

    data = json.loads(out.stdout)
    assert data["structure_first"]["family"] == "lines" and data["structure_first"]["measured"] == "answer tokens only"
    assert "Structure first" in chart.read_text()
    both = json.loads(cli("metrics", run, "--no-positions", "--include-thought", "--family", "generic").stdout)
    assert both["structure_first"]["include_thought"] is True and both["structure_first"]["family"] == "generic"
    assert data["measured"].startswith("answer tokens only") and both["measured"].startswith("answer and thought tokens")
    assert "measured_positions" not in both["blocks"][0]  # --no-positions leaves the position lists out


def without_thinking(model_dir: Path, tmp_path: Path) -> Path:
    """A copy of a project model whose chat template no longer reads `enable_thinking` (the project's
    own template has a thinking channel since the built-in model learned one)."""
    folder = tmp_path / "no-thinking"
    shutil.copytree(model_dir, folder)
    template = folder / "chat_template.jinja"
    template.write_text(template.read_text().replace("enable_thinking", "thinking_is_not_offered"))
    return folder


def test_insight_commands_refuse_bad_input_in_one_line(random_model_dir, tmp_path):
    old = ROOT / "tests" / "data" / "trace_v1.json"  # a version-1 trace: no candidates
    cases = [
        (("alternatives", old, "--position", "3"), "recorded no candidates"),
        (("alternatives", old, "--position", "99999"), "--position must be from 0"),
        (("alternatives", old, "--position", "3", "--step", "0"), "counts from 1"),
        (("budget", old, "--step", "999"), "--step 999: step 1:999 is outside this run: block 1 has steps 1 to "),
        (("budget", old, "--step", "7:1"), "block 7 is outside this run: it has block 1 only"),
        (("frame", old, "--step", "five", "--out", tmp_path / "f.png"), "a step is BLOCK:STEP or STEP"),
        (("budget", old, "--step", "1", "--block", "0"), "counts from 1"),
        (("record", "--prompt", "hi", "--model", without_thinking(random_model_dir, tmp_path), "--thinking", "--out",
          tmp_path / "t.json"), "no thinking mode"),
        (("record", "--prompt", "hi", "--topk", "99", "--out", tmp_path / "t.json"), "record top-k must be"),
    ]
    for args, expected in cases:
        out = cli(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr and expected in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1


def test_a_sampler_picks_its_backend_and_the_record_says_so(random_model_dir, tmp_path):
    """`record --sampler discrete-ddim` with no --backend runs on diffusers (the model's own backend,
    transformers, has no such sampler); a sampler no backend runs on this model is one line naming who has it."""
    run = tmp_path / "ddim.json"
    out = cli("record", "--prompt", "hi", "--model", random_model_dir, "--sampler", "discrete-ddim", "--steps", "3",
              "--corrector-steps", "1", "--max-new-tokens", "256", "--quiet", "--out", run)
    assert out.returncode == 0, out.stderr
    assert "the discrete-ddim sampler runs on the diffusers backend" in out.stderr
    trace = Trace.load(run)
    assert trace.model.backend == "diffusers" and trace.settings.sampler == "discrete-ddim"
    assert trace.settings.corrector_steps == 1 and trace.settings.entropy_bound is None
    for args, expected in [
        (("--sampler", "confidence-threshold"), "error: this model cannot run the confidence-threshold sampler (it runs on the mlx backend"),
        (("--backend", "transformers", "--sampler", "block-refinement"), "error: the transformers backend has no block-refinement sampler; the diffusers backend runs it"),
    ]:
        out = cli("record", "--prompt", "hi", "--model", random_model_dir, *args, "--out", tmp_path / "x.json")
        assert out.returncode == 2 and out.stderr.startswith(expected) and out.stderr.count("\n") == 1, out.stderr


def test_compiled_with_layers_says_its_tokens_can_differ_from_stock(tmp_path):
    """A compiled graph with taps rounds otherwise in bf16 (visualizer/settings.py): the command says so before
    it runs, and a run without one of the two says nothing."""
    from visualizer.settings import COMPILED_LAYERS_NOTE

    out = cli("record", "--prompt", "hi", "--compiled", "--layers", "0", "--model", tmp_path / "nope", "--out", tmp_path / "x.json")
    assert out.returncode == 2 and f"note: {COMPILED_LAYERS_NOTE}" in out.stderr
    out = cli("record", "--prompt", "hi", "--layers", "0", "--model", tmp_path / "nope", "--out", tmp_path / "x.json")
    assert out.returncode == 2 and "note:" not in out.stderr
