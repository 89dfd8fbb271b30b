"""The layering contract (pyproject.toml, [tool.importlinter]) holds, and each of its contracts can fail.

`lint-imports` builds the import graph statically (nothing is imported), so the second test copies
the project's packages to a temporary folder, adds one forbidden import there, and checks that the
contract meant to catch it reports it broken.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cli", "training", "backends", "visualizer", "prompts")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", "pyproject.toml", "--no-cache"],
        cwd=folder, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(folder), "PATH": ""},
    )


def test_the_layering_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layers")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", folder)
    return folder


@pytest.mark.parametrize(
    "module, line, contract",
    [
        ("visualizer/states.py", "import backends", "visualizer/ is the pure library"),
        ("visualizer/layout.py", "import torch", "visualizer/ is the pure library"),
        ("visualizer/charts.py", "from prompts.demos import DEMOS", "visualizer/ is the pure library"),
        ("backends/base.py", "import training.data", "surfaces over training over backends"),
        ("training/data.py", "from cli.common import CliError", "surfaces over training over backends"),
        ("prompts/demos.py", "from visualizer.trace import Trace", "prompts/ imports none"),
        ("backends/run.py", "import gradio", "only app.py touches gradio"),
        ("cli/common.py", "from cli import record", "no import circles"),
    ],
)
def test_each_contract_fails_on_a_forbidden_import(project_copy, module, line, contract):
    path = project_copy / module
    original = path.read_text(encoding="utf-8")
    path.write_text(original + f"\n{line}  # added by the test\n", encoding="utf-8")
    try:
        result = lint_imports(project_copy)
    finally:
        path.write_text(original, encoding="utf-8")
    assert result.returncode != 0
    broken = [row for row in result.stdout.splitlines() if " BROKEN" in row]
    assert any(row.startswith(contract) for row in broken), result.stdout
