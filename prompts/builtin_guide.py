"""What the built-in 10.0M-parameter model was trained to answer, with example prompts, for the app.

The model knows only its training families (prompts/tasks and the corpora of training/); the app
shows this next to the demo picker so a visitor asks something it can do.

    print(guide_markdown())
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    title: str
    note: str
    examples: tuple[str, ...]


GUIDE: tuple[Family, ...] = (
    Family("Acrostic poems", "any word or letters, about a familiar topic",
           ("Write an acrostic poem about the ocean for the word WAVE.",
            "Write a poem about winter whose lines start with S, N, O, W.")),
    Family("Arithmetic", "+, -, x, / with numbers up to about 50, as a question or a small story",
           ("What is 18 plus 24?", "Sam has 12 apples and gives 5 to Mia. How many apples are left?")),
    Family("JSON", "an object with the keys and types you name",
           ('Return a JSON object describing a book with the keys "title" (string) and "year" (integer).',)),
    Family("Python functions", "small functions, with docstrings and doctests",
           ("Write a Python function is_palindrome(s) with a docstring and 1 doctest example.",)),
    Family("Facts and lists", "capitals, chemical symbols, animals, planets, continents",
           ("What is the capital of Peru?", "List the eight planets of the solar system, one per line, each with a fun fact.")),
    Family("Shaped writing", "exactly N sentences, stories that end where they begin, haiku",
           ("Why is the sky blue? Answer in exactly three sentences.",
            "Write a haiku about machine learning, then explain its 5-7-5 syllable structure.")),
    Family("Everyday English", "describe, explain in one sentence, a short poem, why and how questions, what a word "
           "means: animals, places, food, ideas",
           ("Describe the ocean.", "Explain gravity in one sentence.", "Write a short poem about autumn.",
            "How does a bridge work?")),
)

# Python's glossary and FAQ are in the training mix too, but questions about them come out as word salad
# (checked at seeds 0 and 1 on the shipped model, 2026-11-26), so the guide does not offer them.
INTRO = ("A 10.0M-parameter model trained here on a small task mix: it answers these kinds of prompts, and "
         "anything else only loosely (questions about Python itself come out garbled). Think-then-answer "
         "(Gemma 4's thought channel) is trained too, with `enable_thinking=True` in the chat template.")


def guide_markdown() -> str:
    lines = [INTRO, ""]
    for family in GUIDE:
        examples = " · ".join(f"`{e}`" for e in family.examples)
        lines.append(f"- **{family.title}** ({family.note}): {examples}")
    return "\n".join(lines)
