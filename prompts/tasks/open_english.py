"""Open-ended English families: describe X, explain Y in one sentence, a short poem about Z.

Subjects and sentences come from subjects.py; prompts are built with the grammar, so the same
request arrives in many wordings.  Subjects beyond the table (EXTRA_SUBJECTS) are answered in
their kind's sentences alone, which teaches the model to carry whatever subject it is asked
about into fluent sentences instead of falling back to a memorised topic.  No checker: these
are scored by reading them.

    task = make_describe(random.Random(0))
"""

from __future__ import annotations

import random

from .grammar import choose
from .paraphrase import _polite
from .subjects import KIND_SENTENCES, POEM_LINES, SUBJECTS
from .types import Task

EXTRA_SUBJECTS = {
    "animal": ("giraffes", "koalas", "sharks", "eagles", "bears", "deer", "camels", "octopuses", "zebras", "tigers",
               "hedgehogs", "swans"),
    "place": ("a castle", "a harbor", "a farm", "a cave", "a lighthouse", "a jungle", "a zoo", "a hospital",
              "an airport", "a bakery"),
    "nature": ("the tides", "fog", "lightning", "waterfalls", "the northern lights", "the dawn", "sunsets"),
    "thing": ("a lamp", "a camera", "a ladder", "a backpack", "a watch", "a violin", "a boat", "a train", "a robot"),
    "food": ("pasta", "strawberries", "oranges", "ice cream", "noodles", "cake", "tomatoes", "carrots"),
    "idea": ("art", "courage", "patience", "language", "money", "education", "freedom", "memory", "curiosity"),
}


def _subject(rng: random.Random, *, known_only: bool = False) -> tuple[str, str, str | None]:
    """(kind, subject, its definition or None)."""
    kind = rng.choice(tuple(SUBJECTS))
    if not known_only and rng.random() < 0.3:
        return kind, rng.choice(EXTRA_SUBJECTS[kind]), None
    subject = rng.choice(tuple(SUBJECTS[kind]))
    return kind, subject, SUBJECTS[kind][subject]


def _fill(line: str, subject: str) -> str:
    bare = subject.split(" ", 1)[1] if subject.startswith(("a ", "an ", "the ")) else subject
    return line.format(x=subject, X=subject[0].upper() + subject[1:], x_bare=bare)


_DESCRIBE = (
    "{Describe|Tell me about|Write a few sentences about|Write a short description of|Give me a short paragraph"
    " about|Talk a little about} $x{.|}",
    "What can you tell me about $x?",
    "{I'd like|I want} {to know|to hear} {a bit |something }about $x.",
    "{Could|Can} you describe $x{ for me|}?",
)
_EXPLAIN = (
    "{Explain|Define|Describe} $x in {one|a single} sentence{.|}",
    "What is $x? {Answer|Reply|Explain} in one sentence.",
    "In one sentence, {what is|explain|describe} $x{?|.}",
    "{Give me|Write} a one-sentence {explanation|definition|description} of $x{.|}",
    "{Briefly|Quickly}, what {is|are} $x{?|}",
)
_POEM = (
    "{Write|Compose|Give me} a {short |little |}poem about $x{.|}",
    "{A|A short} poem about $x{, please|}.",
    "{Can|Could} you write a {short |}poem {about|on} $x?",
    "Write {four|4} lines of {verse|poetry} about $x{.|}",
    "{I'd love|I want} a {short |}poem about $x.",
)


def make_describe(rng: random.Random) -> Task:
    kind, subject, definition = _subject(rng)
    prompt = _polite(rng, choose(rng, _DESCRIBE, x=subject))
    extra = rng.sample(KIND_SENTENCES[kind], 2 if definition else 3)
    sentences = ([definition] if definition else []) + [_fill(s, subject) for s in extra]
    return Task("describe", prompt, " ".join(sentences), None)


def make_explain(rng: random.Random) -> Task:
    _, subject, definition = _subject(rng, known_only=True)
    prompt = _polite(rng, choose(rng, _EXPLAIN, x=subject))
    return Task("explain", prompt, definition, None)


def make_poem(rng: random.Random) -> Task:
    kind, subject, _ = _subject(rng)
    lines = POEM_LINES[kind]  # two couplets: lines 0-3, or the closing couplet 4-5 then 2-3
    chosen = lines[0:4] if rng.random() < 0.6 else [*lines[4:6], *lines[2:4]]
    prompt = _polite(rng, choose(rng, _POEM, x=subject))
    return Task("poem", prompt, "\n".join(_fill(line, subject) for line in chosen), None)


GENERATORS = {"describe": make_describe, "explain": make_explain, "poem": make_poem}
