"""A tiny template grammar: templates of templates, resolved with a random.Random.

    expand(rng, "{Please |}{give|show} me $what[ now]", what="a JSON object")

`{a|b|c}` picks one alternative (alternatives nest: "{x {y|z}|w}"), `[text]` keeps `text`
half of the time (`[a|b]`: nothing, a or b), and `$name` slots are filled last (string.Template), so slot values may hold
braces and brackets (a JSON skeleton) without being read as grammar.  Each alternative is
itself a template, so a handful of lines gives thousands of distinct sentences.
"""

from __future__ import annotations

import random
import string


def _split_alternatives(body: str) -> list[str]:
    """Split "a|b{c|d}|e" at top-level bars only."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return parts


def _matching(text: str, start: int) -> int:
    """Index of the bracket closing the one at `start`."""
    opening, closing = text[start], {"{": "}", "[": "]"}[text[start]]
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced {opening!r} in template {text!r}")


def _resolve(rng: random.Random, text: str) -> str:
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch in "{[":
            end = _matching(text, i)
            body = text[i + 1:end]
            if ch == "{":
                out.append(_resolve(rng, rng.choice(_split_alternatives(body))))
            elif rng.random() < 0.5:  # "[a|b]": nothing, or one of the alternatives
                out.append(_resolve(rng, rng.choice(_split_alternatives(body))))
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def expand(rng: random.Random, template: str, **slots: str) -> str:
    """One random sentence of `template`, slots filled, runs of spaces collapsed."""
    text = string.Template(_resolve(rng, template)).substitute(slots)
    lines = (" ".join(word for word in line.split(" ") if word) for line in text.split("\n"))
    return "\n".join(lines).strip()


def choose(rng: random.Random, templates: tuple[str, ...], **slots: str) -> str:
    """`expand` on one of several templates."""
    return expand(rng, rng.choice(templates), **slots)
