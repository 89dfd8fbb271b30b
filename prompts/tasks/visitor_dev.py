"""The visitor development set: JSON, arithmetic and acrostic tasks in visitors' words, for choosing.

Choosing between trained models (a third stage, a checkpoint, a mix) needs a score that moves as
the evaluation set's does, without ever looking at the evaluation set.  Held-out tasks of the
training generators do not: their JSON keys are mostly made-up words (`ribbon_ratio`), where a
visitor asks for `name` and `price`, and on them two models 10 points apart on the evaluation set's
JSON (83% and 73%) scored 22 and 23 of 30 (experiments/2026-11-25-shift-correction/).  So this set is written a
third time, apart from both the training generators (prompts/tasks/paraphrase.py) and the
evaluation set (prompts/tasks/paraphrase_eval.py): its own sentence frames, everyday keys of its
own, its own things, stories, words and topics (only the mechanics are shared: number words, key lists,
schemas, the draw of distinct prompts).  Like the evaluation set it is held out (`prompts.tasks.split_of`)
and never trained on (tests/test_paraphrase.py).

    tasks = visitor_dev_set()                        # list[Task], 60 per family, fixed
    python -m training.evaluate --visitor-set dev    # scored beside the template tasks
"""

from __future__ import annotations

import functools
import random

from .paraphrase import number_words
from .paraphrase_eval import distinct_tasks, listed, schema_of
from .types import Task

PER_FAMILY = 60
_SEED = 271828

# ---- JSON: everyday records, asked for in a developer's own words -----------------------------
_JSON_ASKS = (
    "Can you give me a sample {thing} as JSON? Fields: {keys}.",
    "Generate JSON describing a {thing} with {keys}.",
    "I need mock data for a {thing}. Output a JSON object with {keys}.",
    "Return only a JSON object for a {thing} (fields {keys}).",
    "Example {thing} in JSON, please. It should have {keys}.",
    "Show me a JSON record of a {thing}, with {keys}.",
    "Create a {thing} object in JSON. Required fields: {keys}.",
    "Here is the schema: {skeleton}. Return one filled-in example for a {thing}.",
    "Using this template {skeleton}, write JSON for a {thing}.",
    "JSON only: a {thing} with {keys}",
    "Write some test JSON for a {thing}; include {keys}.",
    "Please output a {thing} as a JSON object containing {keys}.",
)
_THINGS = ("student", "book", "movie", "restaurant", "recipe", "car", "flight", "employee", "customer", "song",
           "phone", "apartment", "plant", "event", "pet", "course", "album", "sports team", "bakery", "user account")
# (key, type, how the type is written): everyday keys the evaluation set does not ask for.
_JSON_FIELDS = (
    ("first_name", "string", "a string"), ("last_name", "string", "string"), ("score", "integer", "an integer"),
    ("color", "string", "text"), ("pages", "integer", "int"), ("author", "string", "a string"),
    ("duration", "integer", "integer"), ("language", "string", "string"), ("is_vegan", "boolean", "a boolean"),
    ("ingredients", "array", "a list of strings"), ("model", "string", "text"), ("speed", "number", "a number"),
    ("phone", "string", "string"), ("address", "string", "a string"), ("quantity", "integer", "a whole number"),
    ("is_available", "boolean", "true or false"), ("release_year", "integer", "an integer"),
    ("temperature", "number", "a decimal"), ("skills", "array", "array of strings"), ("level", "integer", "int"),
    ("brand", "string", "string"), ("in_stock", "boolean", "bool"), ("description", "string", "text"),
    ("distance_km", "number", "float"), ("id", "integer", "integer"), ("status", "string", "a string"),
)
_SPELLINGS = (
    lambda k, w: f'"{k}" ({w})', lambda k, w: f"{k} as {w}", lambda k, w: f'"{k}": {w}',
    lambda k, w: f"{k} - {w}", lambda k, w: f"{k} = {w}",
)
_SLOT = {"string": '"..."', "integer": "0", "number": "0.0", "boolean": "false", "array": '["..."]'}


def _json_item(rng: random.Random) -> Task:
    fields = rng.sample(_JSON_FIELDS, rng.choice((1, 2, 2, 3, 3, 4)))
    spell = rng.choice(_SPELLINGS)
    keys = listed([spell(k, w) for k, _, w in fields])
    skeleton = "{" + ", ".join(f'"{k}": {_SLOT[t]}' for k, t, _ in fields) + "}"
    prompt = rng.choice(_JSON_ASKS).format(keys=keys, thing=rng.choice(_THINGS), skeleton=skeleton)
    return Task("json_paraphrase", prompt, "", schema_of(fields))


# ---- arithmetic: quick questions, homework phrasing, errands; digits and words ---------------
def _in_words(n: int) -> str:
    return number_words(n).replace("-", " ")  # "twenty nine", as visitors type it


_MATH_ASKS = {
    "+": ("Add {a} to {b}.", "{a} plus {b} equals what?", "Quick one: {a} + {b}", "Sum of {a} and {b}?",
          "What do {a} and {b} make together?", "I walked {a} km on Monday and {b} km on Tuesday. How far in total?",
          "There are {a} red balloons and {b} blue ones. How many balloons?"),
    "-": ("{a} minus {b} is?", "Work out {a} - {b}.", "Take {b} away from {a}.",
          "What's the difference between {a} and {b}?",
          "I had {a} dollars and spent {b}. How much do I have now?",
          "A class has {a} pupils and {b} are absent. How many are in class today?"),
    "*": ("{a} times {b}?", "Multiply {a} and {b}.", "What is the product of {a} and {b}?",
          "Each box holds {b} eggs. How many eggs are in {a} boxes?"),
    "/": ("Divide {a} by {b}.", "{a} / {b} = ?", "What's {a} split into {b} equal parts?",
          "{a} apples go into bags of {b}. How many bags?"),
}


def _math_item(rng: random.Random) -> Task:
    op = rng.choice("++--*/")
    if op == "+":
        a, b = rng.randint(3, 48), rng.randint(3, 48)
        answer = a + b
    elif op == "-":
        a = rng.randint(12, 60)
        b = rng.randint(2, a - 2)
        answer = a - b
    elif op == "*":
        a, b = rng.randint(2, 10), rng.randint(2, 10)
        answer = a * b
    else:
        b, answer = rng.randint(2, 10), rng.randint(2, 10)
        a = b * answer
    show = _in_words if rng.random() < 0.25 else str
    prompt = rng.choice(_MATH_ASKS[op]).format(a=show(a), b=show(b))
    return Task("math_paraphrase", prompt[0].upper() + prompt[1:], "", answer)


# ---- acrostics: a word, its letters, or the line openings ------------------------------------
_ACROSTIC_ASKS = (
    "Acrostic poem, word: {word}, subject: {topic}.",
    "Write a poem about {topic} where the first letters of the lines spell {word}.",
    "Could you write me an acrostic using the letters {commas}? Topic: {topic}.",
    "Lines starting with {spaced}, about {topic}, please.",
    "I'd like an acrostic of the word {word} on the theme of {topic}.",
    "Make a short acrostic ({word}) about {topic}.",
    "Spell {word} down the side of a poem about {topic}.",
    "Write a {n}-line acrostic, first letters {commas}.",
)
_ACROSTIC_WORDS = ("SUN", "LAKE", "SONG", "LEAF", "WIND", "BIRD", "HOME", "PEACE", "HEART", "SPRING", "STORM",
                   "FROST", "BLOOM", "MAPLE", "CANDLE", "SILVER", "WINTER", "BREAD", "SHORE", "GOLD")
_TOPICS = ("mountains", "a childhood memory", "the harvest", "travel", "a quiet morning", "the wind", "birds",
           "home", "the stars", "a rainy day", "books", "the garden", "an old friend", "the river", "snowfall")


def _acrostic_item(rng: random.Random) -> Task:
    word = rng.choice(_ACROSTIC_WORDS)
    prompt = rng.choice(_ACROSTIC_ASKS).format(
        word=word, topic=rng.choice(_TOPICS), commas=", ".join(word), spaced=" ".join(word), n=len(word))
    return Task("acrostic_paraphrase", prompt, "", word)


_MAKERS = {"json_paraphrase": _json_item, "math_paraphrase": _math_item, "acrostic_paraphrase": _acrostic_item}


@functools.cache
def _dev_set() -> tuple[Task, ...]:
    return distinct_tasks(_MAKERS.values(), PER_FAMILY, _SEED)


def visitor_dev_set(per_family: int = PER_FAMILY) -> list[Task]:
    """The first `per_family` fixed development tasks of each family (no reference responses: the
    checkers score them).  The set is a fixed PER_FAMILY a family, all of it held out."""
    if not 0 < per_family <= PER_FAMILY:
        raise ValueError(f"the visitor development set has 1 to {PER_FAMILY} tasks a family, not {per_family}")
    return [task for family in _MAKERS for task in [t for t in _dev_set() if t.family == family][:per_family]]


def dev_prompts() -> frozenset[str]:
    """Every prompt that must stay out of training."""
    return frozenset(task.prompt for task in _dev_set())
