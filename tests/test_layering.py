"""The layering contract (pyproject.toml, [tool.importlinter]) holds, and each of its contracts can fail.

`lint-imports` builds the import graph statically (nothing is imported), so the second test copies
the project's packages to a temporary folder, adds one forbidden import there, and checks that the
contract meant to catch it reports it broken.
"""

import re
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


@pytest.fixture
def project_copy(tmp_path):
    for name in PACKAGES:
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


# Each forbidden import and the contract meant to catch it. They are all added to one copy and checked in one
# lint-imports run (each run costs seconds): a contract's report names every import that breaks it, with its line,
# so each added line is found in its own contract's report whatever the others do.
FORBIDDEN = [
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
    ("cli/record.py", "from backends.mlx_backend import MLXBackend", "only backends/ names a backend module"),
    ("training/evaluate.py", "import backends.transformers_backend", "only backends/ names a backend module"),
]
# The circles: the acyclic report names the dependency to cut, not the added line, so these two (one circle per
# package) get a run of their own, where nothing else could close a circle.
CIRCLES = [("webapp/sessions.py", "from webapp import app", "webapp"), ("cli/common.py", "from cli import record", "cli")]


def add_imports(folder: Path, cases) -> dict:
    """Appends each case's import to its module; returns each case's (module name, line number) as lint-imports
    writes them."""
    added = {}
    for module, line, _ in cases:
        path = folder / module
        text = path.read_text(encoding="utf-8") + f"\n{line}  # added by the test\n"
        path.write_text(text, encoding="utf-8")
        added[module, line] = (module.removesuffix(".py").replace("/", "."), len(text.splitlines()))
    return added


def broken_reports(stdout: str) -> dict:
    """Each broken contract's name and its report (the text under its underlined name, up to the next one)."""
    _, _, broken = stdout.partition("Broken contracts\n----------------\n")
    parts = re.split(r"\n(.+)\n-+\n", "\n" + broken)
    return dict(zip(parts[1::2], parts[2::2]))


def test_each_contract_fails_on_a_forbidden_import(project_copy):
    added = add_imports(project_copy, FORBIDDEN)
    result = lint_imports(project_copy)
    assert result.returncode != 0
    reports = broken_reports(result.stdout)
    for module, line, contract in FORBIDDEN:
        (report,) = [text for name, text in reports.items() if name.startswith(contract)] or [""]
        source, number = added[module, line]
        caught = re.search(rf"^[- ]+{re.escape(source)} -> \S+ \(l\.{number}\)", report, re.MULTILINE)
        assert caught, (module, line, contract, result.stdout)


def test_the_acyclic_contract_fails_on_a_circle(project_copy):
    add_imports(project_copy, CIRCLES)
    result = lint_imports(project_copy)
    assert result.returncode != 0
    (report,) = [text for name, text in broken_reports(result.stdout).items() if name.startswith("no import circles")]
    for _, _, package in CIRCLES:
        assert f"No cycles are allowed in {package}." in report, result.stdout


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
