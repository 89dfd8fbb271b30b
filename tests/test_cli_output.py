"""What the CLI prints, run in-process through `cli.main.main`: refusals, the committed text, progress, help."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from backends.lookup import forget_answers
from cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}],
                         ids=["offline", "hub-unreachable"])
def test_an_unknown_model_is_refused_in_one_line_before_loading(env, monkeypatch, capsys, tmp_path):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    forget_answers()  # another test may have asked about this id with the hub reachable
    out = tmp_path / "x.json"
    assert main(["record", "--prompt", "hi", "--model", "nonexistent/foo", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(error_lines(err)) == 1 and "nonexistent/foo" in error_lines(err)[0], err
    assert "Retrying" not in err and not out.exists()
    forget_answers()


def test_record_prints_the_committed_text_and_a_line_per_block_when_piped(no_eos_model_dir, capsys, tmp_path):
    from visualizer.thinking import committed_text
    from visualizer.trace import Trace

    run = tmp_path / "run.json"
    argv = ["record", "--prompt", "Count to ten.", "--model", str(no_eos_model_dir), "--seed", "0", "--steps", "3",
            "--max-new-tokens", "512", "--out", str(run)]
    assert main(argv) == 0
    out, err = capsys.readouterr()  # pytest's capture is no terminal: the piped form
    trace = Trace.load(run)
    assert len(trace.blocks) == 2 and committed_text(trace)
    assert out == committed_text(trace) + "\n"
    blocks = [line for line in err.splitlines() if line.startswith("block ")]
    assert blocks == [f"block {b.block + 1}/2 committed after {b.steps_used} steps ({b.stop_reason})" for b in trace.blocks]
    assert "\r" not in err and max(map(len, err.splitlines())) < 200

    assert main([*argv, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out == committed_text(trace) + "\n" and not any(line.startswith("block ") for line in err.splitlines())


class Terminal(io.StringIO):
    """stderr as a terminal would be: tqdm draws its bar there."""

    def isatty(self) -> bool:
        return True


def test_record_draws_a_bar_per_block_on_a_terminal(no_eos_model_dir, monkeypatch, capsys, tmp_path):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["record", "--prompt", "Count to ten.", "--model", str(no_eos_model_dir), "--steps", "3",
                 "--max-new-tokens", "512", "--out", str(tmp_path / "run.json")]) == 0
    redrawn = terminal.getvalue().split("\n")
    bars = [line for line in redrawn if "step/s" in line]
    assert len(bars) == 2 and all("\r" in line for line in bars)  # one bar per block, redrawn in place
    assert "block 1/2 committed after 3 steps" in bars[0] and "3/3" in bars[0]


def test_the_registry_names_each_backends_samplers_as_its_capabilities_do():
    from backends.registry import BACKENDS

    for entry in BACKENDS.values():
        if entry.available():
            assert list(entry.samplers) == [spec.name for spec in entry.capabilities.samplers], entry.name


def sampler_help(capsys) -> str:
    with pytest.raises(SystemExit) as end:
        main(["record", "--help"])
    assert end.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse's wrapping undone
    start = text.index("--sampler SAMPLER how")  # its entry, not the usage line
    return text[start:text.index("--temperature", start)]


def test_sampler_help_lists_what_the_app_offers_the_model(monkeypatch, capsys):
    from backends import default_model, sampler_backends

    shown = sampler_help(capsys).replace("- ", "-")  # a name wrapped at its hyphen
    checkpoint = shown[:shown.index("mlx loads") if "mlx loads" in shown else None]
    for name, backend in sampler_backends(default_model()).items():  # the app's picker for the built-in model
        assert f"{name} ({backend}" in checkpoint
    assert "confidence-threshold" not in checkpoint

    monkeypatch.setattr("backends.registry.mlx_installed", lambda: False)
    assert "confidence-threshold" not in sampler_help(capsys)


def test_export_defaults_to_the_apps_grid_layout(tmp_path, capsys):
    from PIL import Image

    from visualizer.animation import AnimationOptions, build_animation
    from visualizer.trace import Trace

    shipped = str(ROOT / "assets" / "traces" / "acrostic.json")  # a finished run: the text layout would apply to it
    gif = tmp_path / "run.gif"
    assert main(["export", shipped, "--gif", str(gif), "--quiet"]) == 0
    trace = Trace.load(shipped)
    grid, text = (build_animation(trace, AnimationOptions(layout=kind)).size for kind in ("grid", "text"))
    assert Image.open(gif).size == grid != text
