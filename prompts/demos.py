"""The six structured demo prompts (from the visualizer post, seeds/004_*).

Each one has structure that shows up early as scaffolding while the model denoises: the
acrostic's line-start letters, the three sentence boundaries, the def/docstring/doctest skeleton,
one line per planet, a story's first sentence and sentence ends, the haiku's three lines.

    from prompts.demos import DEMOS, demo_prompt
    demo_prompt("acrostic")
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Demo:
    name: str  # short id used by the CLI (--demo NAME) and the app
    title: str  # label in the app's picker
    prompt: str
    scaffolding: str  # what to watch for: shown next to the picker


DEMOS: tuple[Demo, ...] = (
    Demo(
        "acrostic",
        "Acrostic ocean poem (O, C, E, A, N, S)",
        "Write a six-line poem about the ocean where the lines start with the letters O, C, E, A, N, S in that order.",
        "The six line-start letters, before the lines",
    ),
    Demo(
        "sky",
        "Why is the sky blue? In exactly three sentences",
        "Why is the sky blue? Answer in exactly three sentences.",
        "Sentence boundaries: the three-sentence shape",
    ),
    Demo(
        "palindrome",
        "is_palindrome(s) with a docstring + a doctest",
        # one doctest, not three: the built-in model writes a doctest's expected value without running the
        # code, and of three at least one came out wrong on seeds 0-3; one passes on seeds 0, 1, 2 and 6 of 0-7
        "Write a Python function is_palindrome(s) with a docstring and 1 doctest example.",
        "def / docstring / >>> skeleton before the bodies",
    ),
    Demo(
        "planets",
        "Eight planets, one per line, each with a fun fact",
        "List the eight planets of the solar system, one per line, each with a fun fact.",
        "List markers across the whole block at once",
    ),
    Demo(
        "story",
        "100-word story asked to begin and end with the same sentence",
        "Write a 100-word story that begins and ends with the same sentence.",
        # the built-in model starts and ends the story but does not copy its first sentence to the end (0 of
        # 13 seeds, 0 of 12 runs of 3 rephrasings), so the caption promises the order, not the copy
        "The first sentence and the sentence ends, before the middle (the built-in model's two ends differ)",
    ),
    Demo(
        "haiku",
        "Haiku about machine learning + its 5-7-5 structure",
        "Write a haiku about machine learning, then explain its 5-7-5 syllable structure.",
        "The three-line haiku shape",
    ),
)

DEMO_NAMES = tuple(d.name for d in DEMOS)


def demo(name: str) -> Demo:
    for d in DEMOS:
        if d.name == name:
            return d
    raise KeyError(f"unknown demo {name!r}; choose one of: {', '.join(DEMO_NAMES)}")


def demo_prompt(name: str) -> str:
    return demo(name).prompt
