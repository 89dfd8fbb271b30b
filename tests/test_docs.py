"""The docs stay true: every relative link resolves and every command they show parses.

The pages are README.md, docs/*.md, the experiments' index and the built-in model's Hub card.  A link or
image with a relative target must name a file of the repository (and, for a `#anchor` into a Markdown
page, one of that page's headings, slugged as GitHub does).  A command is a `python -m visualizer ...` or
`python -m training.X ...` line in a code block, or an inline code span with flags in the text: its
arguments go through the module's real parser, in-process.  `main(argv)` runs with
`ArgumentParser.parse_args` patched to stop right after parsing, so nothing is recorded or trained, and
a wrong flag or value is argparse's exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MODEL_CARD = ROOT / "assets" / "models" / "diffusiongemma-tiny-demo" / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "experiments" / "README.md", MODEL_CARD]
MAX_README_LINES = 250

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)
INLINE_CODE = re.compile(r"`[^`]+`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
COMMAND = re.compile(r"^python -m (visualizer|training\.\w+)\b")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """The text as rendered: links in code blocks, code spans and HTML comments are not links."""
    return INLINE_CODE.sub("", COMMENT.sub("", FENCE.sub("", text)))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.replace("`", "").lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(h.strip()) for h in HEADING.findall(FENCE.sub("", page.read_text()))}


def relative_links(page: Path) -> list[str]:
    targets = LINK.findall(_prose(page.read_text()))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto: are not files


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or ROOT not in (file, *file.parents):
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {_rel(file)}")
    return broken


def _shell_lines(block: str) -> list[str]:
    """A code block's commands: continuations joined, `&&` chains split, `NAME="..."` variables expanded."""
    variables: dict[str, str] = {}
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            part = part.strip()
            assignment = re.fullmatch(r'(\w+)="([^"]*)"', part)
            if assignment:
                variables[assignment[1]] = assignment[2]
                continue
            commands.append(re.sub(r"\$(\w+)", lambda m: variables.get(m[1], m[0]), part))
    return commands


def shown_commands(page: Path) -> list[str]:
    text = page.read_text()
    lines = [line for block in FENCE.findall(text) for line in _shell_lines(block)]
    spans = [span.strip("`").replace("\n", " ") for span in INLINE_CODE.findall(FENCE.sub("", text))]
    lines = [line for line in lines if COMMAND.match(line)]
    # `python -m visualizer frame` in a sentence names a command; a span with flags is a command line
    return lines + [span for span in spans if COMMAND.match(span) and " -" in COMMAND.sub("", span)]


class _Parsed(Exception):
    """Raised by the patched parse_args once the arguments parsed: the command goes no further."""


def parse_error(command: str) -> str | None:
    """None when the command's arguments parse with its module's real parser, else why not."""
    argv = shlex.split(command, comments=True)
    module_name = argv[2]
    if module_name == "visualizer":
        main = importlib.import_module("cli.main").main
    else:
        main = importlib.import_module(module_name).main
    real_parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        real_parse_args(self, args, namespace)
        raise _Parsed

    stderr = io.StringIO()
    with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop), \
            contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv[3:])
        except _Parsed:
            return None
        except SystemExit as exc:
            return f"exit status {exc.code}: {stderr.getvalue().strip().splitlines()[-1:]}"
    return "its main returned without parsing arguments"


def test_readme_is_short_and_keeps_what_ci_and_the_space_read():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    assert text.startswith("---\n") and "\napp_file: app.py\n" in text.split("\n---\n", 1)[0]
    for marker in ("<!-- install-and-run -->", "<!-- test-command -->", "<!-- fast-test-command -->"):
        assert re.search(re.escape(marker) + r"\n```bash\n.+\n```", text), marker


def test_the_fast_test_command_names_only_registered_markers():
    """pytest's -m matches an unknown name to nothing, silently: a typo in the README's fast command would
    run every test, or none."""
    import tomllib

    block = re.search(r"<!-- fast-test-command -->\n```bash\n(.+)\n```", README.read_text()).group(1)
    argv = shlex.split(block)
    expression = argv[argv.index("-m", 3) + 1]
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    registered = {line.split(":")[0] for line in config["markers"]}
    named = set(re.findall(r"\w+", expression)) - {"not", "and", "or"}
    assert argv[:3] == ["python", "-m", "pytest"] and named and named <= registered, (named, registered)
    assert "--strict-markers" in config["addopts"]


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_and_image_resolves(page):
    assert relative_links(page) or page == MODEL_CARD  # the link finder works on every page that has links
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "real.md").write_text("# A heading, with `code`\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](real.md#a-heading-with-code) ![gone](missing.png) [bad](real.md#nope) `[code](x.md)`\n"
                    "```\n[in a block](y.md)\n```\n[web](https://example.com) <!-- [comment](z.md) -->\n")
    assert broken_links(page) == ["missing.png: no such file", "real.md#nope: no heading #nope in real.md"]


def _all_commands():
    return sorted({(command, _rel(page)) for page in PAGES for command in shown_commands(page)})


@pytest.mark.parametrize("command,page", _all_commands(), ids=lambda value: str(value)[:70])
def test_every_shown_command_parses(command, page):
    assert parse_error(command) is None, f"{page}: {command}"


def test_the_docs_show_the_commands_they_should():
    commands = [command for command, _ in _all_commands()]
    assert len(commands) >= 40
    for module in ("visualizer", "training.train", "training.evaluate", "training.build_tokenizer",
                   "training.corpus", "training.wordnet", "training.convert_mlx"):
        assert any(c.startswith(f"python -m {module} ") or c == f"python -m {module}" for c in commands), module
    # the retrain block's `$common` flags are expanded, not passed on as a word
    assert any("--self-correction-max-entropy 0.1" in c for c in commands if "training.train" in c)


@pytest.mark.parametrize("command", [
    "python -m visualizer record --no-such-flag --out run.json",
    "python -m visualizer frame run.json --font-size five",
    "python -m visualizer no-such-command",
    "python -m training.train --family-weights open-mix-7 --minutes",
    "python -m training.build_tokenizer --mix everything",
])
def test_a_wrong_flag_or_value_fails_to_parse(command):
    assert parse_error(command).startswith("exit status 2")


def _sync_tool():
    spec = importlib.util.spec_from_file_location("sync_model_card", ROOT / "tools" / "sync_model_card.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_model_card_is_the_docs_page_in_the_hubs_form():
    tool = _sync_tool()
    card = MODEL_CARD.read_text()
    assert card == tool.card_text(card, tool.DOCS_PAGE.read_text()), "run: python tools/sync_model_card.py"
    metadata = yaml.safe_load(tool.front_matter(card).strip("-\n"))
    assert metadata["license"] == "apache-2.0" and metadata["library_name"] == "transformers"
    assert metadata["datasets"] and "block-diffusion" in metadata["tags"]


def test_the_knob_table_is_written_from_the_declarations():
    from tools import sync_knob_table

    page = sync_knob_table.PAGE.read_text(encoding="utf-8")
    assert page == sync_knob_table.page_text(page), "run: python -m tools.sync_knob_table"
    assert "| `refine_threshold` | `--refine-threshold` | 0.95 | diffusers (block-refinement) |" in page
    assert "| `pins` | `--pin` | none | transformers, diffusers |" in page  # MLX has no pins: said, not "every sampler"
