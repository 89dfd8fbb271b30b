"""What the CLI prints, run in-process through `cli.main.main`: refusals, the committed text, progress, help."""

from __future__ import annotations

import pytest

from backends.lookup import forget_answers
from cli.main import main


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
