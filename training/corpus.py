"""General English from Python's own documentation, as installed by Debian's `python3-doc`.

The reST sources under /usr/share/doc/python3.*/html/_sources/ are plain English prose written
by people.  Three parts are used: the glossary (term -> definition), the FAQ (question heading ->
answer paragraph) and the tutorial, HOWTOs and "What's New"-free reference prose (section
heading -> paragraph, also from the library and language reference).  Markup is reduced to its text.  Licence: the Python documentation is
distributed under the PSF License Agreement (code examples under the Zero-Clause BSD licence),
which allows copying, modifying and redistributing it with the copyright notice kept;
training/CORPUS.md records it.  Nothing of the corpus is committed: the training text is built
from the installed package into runs/corpus/, and the training machine gets that file.

    python -m training.corpus                        # writes runs/corpus/python_docs.jsonl
    tasks = corpus_tasks(load_corpus(), 1000, seed=0)

Each record is {"kind": "glossary" | "faq" | "prose", "title": str, "text": str}.
"""

from __future__ import annotations

import argparse
import glob
import random
import re
from functools import cache
from pathlib import Path

from prompts.tasks import Task
from prompts.tasks.grammar import choose

from .jsonl import read_or_build_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "runs" / "corpus" / "python_docs.jsonl"
SOURCE_GLOB = "/usr/share/doc/python3*/html/_sources"
PROSE_PARTS = ("tutorial", "howto", "faq", "library", "reference", "using")
MAX_WORDS = 40  # two or three sentences: longer answers taught the small model documentation-flavoured word salad

_ROLE = re.compile(r":[a-z:]+:`(?:~|!)?([^`<]*?)\s*(?:<[^`>]*>)?`")  # :func:`len` / :ref:`text <target>`
_LINK = re.compile(r"`([^`<]+?)\s*<[^`>]*>`_+")  # `text <url>`_
_LITERAL = re.compile(r"``([^`]+)``")
_EMPHASIS = re.compile(r"\*{1,2}([^*\s][^*]*?)\*{1,2}")


def clean(text: str) -> str:
    """reST inline markup -> plain text, whitespace collapsed."""
    text = _ROLE.sub(lambda m: m.group(1).strip("()") + ("()" if m.group(0).startswith(":func:") else ""), text)
    text = _LINK.sub(r"\1", text)
    text = _LITERAL.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\1", text)
    text = text.replace("`", "").replace("\\", "")
    return " ".join(text.split())


def _is_prose(paragraph: str) -> bool:
    """A paragraph of sentences, not code, a directive, a table or a list."""
    first = paragraph.lstrip()
    if not first or first[0] in "*-+|=.>#0123456789" or first.startswith(("..", ":", "[")):
        return False
    if paragraph.rstrip().endswith("::") or "    " in paragraph.split("\n", 1)[0][:4]:
        return False
    words = paragraph.split()
    return 12 <= len(words) and paragraph.rstrip()[-1] in ".?!:" and sum(w[0].isalpha() for w in words) > 0.8 * len(words)


def _clip(text: str, max_words: int = MAX_WORDS) -> str:
    """Whole sentences up to about `max_words` words (at least one sentence)."""
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
    out: list[str] = []
    for sentence in sentences:
        if out and len(" ".join([*out, sentence]).split()) > max_words:
            break
        out.append(sentence)
    return " ".join(out)


def parse_glossary(source: str) -> list[dict]:
    """(term, first paragraph of its definition) pairs of a Sphinx glossary."""
    entries: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if re.match(r"^   \S", line):  # a term (3 spaces)
            entries.append((clean(line), []))
        elif entries and re.match(r"^      \S", line):  # its definition (6 spaces)
            body = entries[-1][1]
            if "" not in body:
                body.append(line.strip())
        elif entries and not line.strip() and entries[-1][1]:
            entries[-1][1].append("")  # the first paragraph ends here
    records = [{"kind": "glossary", "title": term, "text": clean(" ".join(body))} for term, body in entries]
    return [r for r in records if r["text"] and not r["title"].startswith((".", ">"))]


def parse_sections(source: str, kind: str) -> list[dict]:
    """(heading, first prose paragraph under it) pairs; a FAQ heading is a question."""
    lines = source.splitlines()
    records, heading, paragraph = [], None, []
    taken = set()

    def flush():
        text = " ".join(paragraph)
        if heading and heading not in taken and _is_prose("\n".join(paragraph)):
            records.append({"kind": kind, "title": clean(heading), "text": clean(text)})
            taken.add(heading)

    for i, line in enumerate(lines):
        underline = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and underline and len(set(underline.strip())) == 1 and underline.strip()[0] in "=-~^*" and \
                len(underline.strip()) >= len(line.strip()) - 1 and not line.startswith(" "):
            flush()
            heading, paragraph = line.strip(), []
            continue
        if not line.strip():
            flush()
            paragraph = []
        elif not line.startswith(" ") and not set(line.strip()) <= set("=-~^*"):
            paragraph.append(line.strip())
    flush()
    return records


def build_corpus(sources: str | None = None) -> list[dict]:
    """Every record from the installed documentation sources (sorted paths: deterministic)."""
    found = sorted(glob.glob(sources or SOURCE_GLOB))
    if not found:
        raise FileNotFoundError(
            "Python's documentation sources are not installed: `apt-get install python3-doc` "
            f"(looked for {sources or SOURCE_GLOB})")
    root = Path(found[-1])
    records = parse_glossary((root / "glossary.rst.txt").read_text(encoding="utf-8"))
    for part in PROSE_PARTS:
        for path in sorted((root / part).glob("*.rst.txt")):
            kind = "faq" if part == "faq" else "prose"
            records += parse_sections(path.read_text(encoding="utf-8"), kind)
    return records


def write_corpus(out: Path = DEFAULT_CORPUS, sources: str | None = None) -> Path:
    return write_jsonl(build_corpus(sources), out)


@cache
def load_corpus(path: str = str(DEFAULT_CORPUS)) -> tuple[dict, ...]:
    """The records of a corpus file; built from the installed package first if the file is missing."""
    return read_or_build_jsonl(Path(path), build_corpus)


_GLOSSARY_ASKS = (
    "{What is|What's|What does the term} $t{| mean}{ in Python|}?",
    "{Explain|Define|Describe} $t{ in Python|}{.|}",
    "{Explain|Define} $t in one sentence{.|}",
    "{What does|What do you mean by} \"$t\" {mean |}in Python?",
    "{Briefly|Quickly}, what is $t?",
)
_FAQ_ASKS = ("$t", "{Question|Python question}: $t", "{I have a question|Quick question}. $t")
_PROSE_ASKS = (
    "{Tell me about|Explain|Describe|Write a paragraph about} $t{ in Python|}{.|}",
    "{What should I know about|Can you explain} $t{ in Python|}?",
    "Continue this text: $first",
)


def corpus_task(record: dict, rng: random.Random) -> Task:
    title, text = record["title"], record["text"]
    if record["kind"] == "glossary":
        prompt = choose(rng, _GLOSSARY_ASKS, t=title)
        one = "one sentence" in prompt
        return Task("docs_glossary", prompt, _clip(text, 0 if one else 60), None)
    if record["kind"] == "faq":
        return Task("docs_faq", choose(rng, _FAQ_ASKS, t=title), _clip(text), None)
    prompt_first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)
    template = rng.choice(_PROSE_ASKS)
    if template.startswith("Continue") and len(prompt_first) == 2:
        return Task("docs_prose", choose(rng, (template,), first=prompt_first[0]), _clip(prompt_first[1]), None)
    return Task("docs_prose", choose(rng, _PROSE_ASKS[:2], t=title[0].lower() + title[1:]), _clip(text), None)


def corpus_tasks(records, count: int, *, seed: int) -> list[Task]:
    """`count` tasks drawn from the corpus's glossary and FAQ records (short definitions and answers are
    what a 10M model can learn in minutes; the reference prose, tried in the visitor stages of
    2026-11, taught it long documentation-flavoured word salad for any question it did not know)."""
    rng = random.Random(seed)
    weights = [1.0 if r["kind"] in ("glossary", "faq") else 0.0 for r in records]
    return [corpus_task(r, rng) for r in rng.choices(records, weights=weights, k=count)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sources", help=f"documentation sources folder (default: {SOURCE_GLOB})")
    args = parser.parse_args(argv)
    try:
        out = write_corpus(Path(args.out), args.sources)
    except FileNotFoundError as exc:
        parser.exit(1, f"{exc}\n")
    records = load_corpus(str(out))
    kinds = {k: sum(r["kind"] == k for r in records) for k in ("glossary", "faq", "prose")}
    print(f"wrote {len(records)} records to {out} ({kinds}; {out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
