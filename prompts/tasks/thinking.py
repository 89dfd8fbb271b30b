"""Think-then-answer: tasks asked with thinking enabled, answered in Gemma 4's thought channel format.

With `enable_thinking=True` the chat template opens a system turn with `<|think|>`, and the
model answers

    <|channel>thought\n{reasoning}<channel|>{final answer}<turn|>

(the markers of Gemma 4's chat template and of transformers' Gemma 4 response parser, ids 98,
100 and 101 in Gemma's vocabulary and in ours).  The reasoning restates what the task needs;
the final answer is the template family's own answer, so the same checker scores it.

    task = make_thinking(random.Random(0))   # task.thinking is True; task.answer = (family, answer)
"""

from __future__ import annotations

import random

from . import demo_families, paraphrase, probe_families
from .types import Task

THINK, CHANNEL_OPEN, CHANNEL_CLOSE = "<|think|>", "<|channel>", "<channel|>"
THOUGHT_HEADER = CHANNEL_OPEN + "thought\n"

_OPERATION_WORDS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide"}


def split_thought(response: str) -> tuple[str | None, str]:
    """(reasoning or None, final answer) of a response that may open with a thought block."""
    if CHANNEL_CLOSE in response:
        thought, _, answer = response.partition(CHANNEL_CLOSE)
        return thought.replace(THOUGHT_HEADER, "").replace(CHANNEL_OPEN, "").strip(), answer.strip()
    return None, response


def _math_thought(task: Task) -> tuple[str, str]:
    work, _, final = task.response.partition(" The answer is ")
    steps = work.split(". ")
    symbol = steps[0].split(" ")[1]
    first = f"I need to {_OPERATION_WORDS[symbol]} the numbers in the question."
    if len(steps) > 1:
        first = "There are two steps: multiply first, then subtract."
    return f"{first} {work}", f"The answer is {final}"


_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
               "array": "a list of strings"}


def _json_thought(task: Task) -> tuple[str, str]:
    properties = task.answer["properties"]
    parts = [f'"{key}" is {_TYPE_NAMES[spec["type"]]}'
             for key, spec in properties.items()]
    return f"The object needs {len(parts)} keys: {'; '.join(parts)}. I will fill in a value of each type.", task.response


def _acrostic_thought(task: Task) -> tuple[str, str]:
    letters = task.answer
    return (f"The lines must start with {', '.join(letters)}: {len(letters)} lines, one for each letter, in that order.",
            task.response)


_BASES = {  # family -> (generator, reasoning builder)
    "math": (probe_families.make_math, _math_thought),
    "math_paraphrase": (paraphrase.make_math_paraphrase, _math_thought),
    "json": (probe_families.make_json, _json_thought),
    "json_paraphrase": (paraphrase.make_json_paraphrase, _json_thought),
    "acrostic": (demo_families.make_acrostic, _acrostic_thought),
    "acrostic_paraphrase": (paraphrase.make_acrostic_paraphrase, _acrostic_thought),
}


def make_thinking(rng: random.Random) -> Task:
    base = rng.choice(tuple(_BASES))
    make, reason = _BASES[base]
    task = make(rng)
    thought, answer = reason(task)
    response = f"{THOUGHT_HEADER}{thought}{CHANNEL_CLOSE}{answer}"
    return Task("thinking", task.prompt, response, (task.family, task.answer), thinking=True)


def check_thinking(task: Task, response: str, check) -> bool:
    """A thought block, then a final answer that passes the base family's checker."""
    thought, answer = split_thought(response)
    family, base_answer = task.answer
    return bool(thought) and check(Task(family, task.prompt, "", base_answer), answer) is True


GENERATORS = {"thinking": make_thinking}
