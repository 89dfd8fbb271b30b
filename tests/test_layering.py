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
PACKAGES = ("webapp", "cli", "training", "backends", "visualizer", "prompts")
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
        ("backends/base.py", "import training.data", "surfaces (webapp | cli)"),
        ("training/data.py", "from cli.common import CliError", "surfaces (webapp | cli)"),
        ("prompts/demos.py", "from visualizer.trace import Trace", "prompts/ imports none"),
        ("backends/run.py", "import gradio", "only webapp/ touches gradio"),
        ("cli/common.py", "import gradio", "only webapp/ touches gradio"),
        ("cli/record.py", "import webapp.hosting", "surfaces (webapp | cli)"),
        ("webapp/hosting.py", "from cli.common import CliError", "surfaces (webapp | cli)"),
        ("backends/cache.py", "from webapp import sessions", "surfaces (webapp | cli)"),
        ("visualizer/trace.py", "import webapp", "visualizer/ is the pure library"),
        ("webapp/app_run.py", "from backends.transformers_backend import TransformersBackend", "only backends/ names a backend module"),
        ("webapp/sessions.py", "from webapp import app", "no import circles"),
        ("cli/record.py", "from backends.mlx_backend import MLXBackend", "only backends/ names a backend module"),
        ("training/evaluate.py", "import backends.transformers_backend", "only backends/ names a backend module"),
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


# A backend's name in a comparison (`== "mlx"`) outside backends/ is the name standing in for what
# the backend can do: read its `capabilities` instead. Version-2 traces are the one exception, in
# visualizer/samplers.py, as data (a dict keyed by the names those traces recorded), not a comparison.
BACKEND_NAME_TEST = r"""[=!]=\s*["'](transformers|mlx|diffusers)["']|["'](transformers|mlx|diffusers)["']\s*[=!]="""


def test_no_backend_name_is_compared_outside_backends():
    import re

    pattern = re.compile(BACKEND_NAME_TEST)
    files = [ROOT / "app.py"] + [
        path for package in PACKAGES if package != "backends" for path in (ROOT / package).rglob("*.py")
    ]
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if pattern.search(line)
    ]
    assert not hits, "backend names compared outside backends/:\n" + "\n".join(hits)
    assert pattern.search('if backend.info.backend == "mlx":') and pattern.search("'diffusers' != kind")


def test_the_root_app_only_starts_the_web_ui():
    """The root app.py (the Space's app_file) is outside every contract, so it holds no code of its
    own: it imports the webapp package (first, for ZeroGPU's import order) and calls its main."""
    import ast

    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    modules = [alias.name for node in imports if isinstance(node, ast.Import) for alias in node.names]
    modules += [node.module for node in imports if isinstance(node, ast.ImportFrom)]
    assert modules[0] == "webapp" and all(m == "webapp" or m.startswith("webapp.") for m in modules), modules
    assert not [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def test_the_backend_module_contract_lists_what_the_registry_names():
    """The modules the "only backends/ names a backend module" contract forbids are the registry's: every
    backend's module and the helpers only it uses (a new backend's entry says which)."""
    import tomllib

    from backends.registry import BACKENDS

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    (listed,) = [c["forbidden_modules"] for c in contracts if c["id"] == "backend-modules"]
    assert sorted(listed) == sorted(m for entry in BACKENDS.values() for m in (entry.module, *entry.helpers))
