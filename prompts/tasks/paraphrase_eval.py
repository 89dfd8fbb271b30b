"""The paraphrase evaluation set: JSON, arithmetic and acrostic tasks asked the way visitors ask.

Written apart from the training generators (prompts/tasks/paraphrase.py) on purpose: its own
sentence frames, its own key names and entities, its own topics, no shared helpers beyond the
answer checkers.  It is never trained on: `prompts.tasks.split_of` puts every prompt here in the
held-out split, and tests/test_paraphrase.py checks that none turns up in the training
stream.  The list is fixed (one seed), so scores compare across models and machines.

    items = paraphrase_eval_set()                    # list[Task], 60 per family
    items[0].family                                  # "json_paraphrase": scored like "json"
"""

from __future__ import annotations

import functools
import random

from .types import Task

PER_FAMILY = 60
_SEED = 314159

# ---- JSON: the wordings a developer types into a chat box ------------------------------------
_JSON_ASKS = (
    "Return a JSON object with keys {keys} for a fictional {thing}.",
    "I'm testing a form. Send back JSON for one {thing} containing {keys}.",
    "Produce valid JSON, no prose, representing a {thing}: {keys}.",
    "My app expects this shape: {skeleton}. Give me an example for a {thing}.",
    "Respond in JSON. Include {keys} for one {thing}.",
    "Need a {thing} record as a JSON object; the fields are {keys}.",
    "Make a JSON example of a {thing} that has {keys}.",
    "Write a JSON object for a {thing}. It needs {keys}.",
    "json for a {thing} please: {keys}",
    "Could you output a JSON object ({keys}) that describes a {thing}?",
    "Fill this in for a {thing} and return only JSON: {skeleton}",
    "Give me a {thing} in JSON format with {keys}.",
)
_THINGS = ("person", "character", "dog", "cat", "laptop", "bike", "hotel room", "museum", "coffee order",
           "video game", "singer", "teacher", "football club", "podcast", "garden", "concert", "train ticket", "shop")
# (key, type, how the type is written) -- several keys no training list has.
_JSON_FIELDS = (
    ("name", "string", "a string"), ("age", "integer", "an integer"), ("age", "number", "number"),
    ("title", "string", "text"), ("price", "number", "a number"), ("year", "integer", "int"),
    ("email", "string", "string"), ("city", "string", "a string"), ("is_active", "boolean", "a boolean"),
    ("tags", "array", "a list of strings"), ("rating", "number", "float"), ("count", "integer", "integer"),
    ("favorite_color", "string", "a string"), ("zip_code", "string", "string"), ("salary", "integer", "integer"),
    ("nickname", "string", "text"), ("height_m", "number", "a decimal"), ("is_open", "boolean", "true/false"),
    ("seats", "integer", "a whole number"), ("breed", "string", "string"), ("owners", "array", "array of strings"),
    ("weight_kg", "number", "number"), ("capacity", "integer", "int"), ("genre", "string", "a string"),
    ("has_wifi", "boolean", "bool"), ("members", "array", "list of strings"), ("country", "string", "string"),
)
_SPELLINGS = (
    lambda k, w: f'"{k}" ({w})', lambda k, w: f'"{k}" {w}', lambda k, w: f"{k}: {w}",
    lambda k, w: f'"{k}" as {w}', lambda k, w: f"{k} ({w})",
)
_SLOT = {"string": '"<string>"', "integer": "<integer>", "number": "<number>", "boolean": "<true or false>",
         "array": '["..."]'}


def _json_item(rng: random.Random) -> Task:
    fields: list[tuple[str, str, str]] = []
    for field in rng.sample(_JSON_FIELDS, 8):
        if field[0] not in (f[0] for f in fields):
            fields.append(field)
    fields = fields[: rng.choice((1, 2, 2, 3, 3, 4))]
    spell = rng.choice(_SPELLINGS)
    keys = listed([spell(k, w) for k, _, w in fields])
    skeleton = "{" + ", ".join(f'"{k}": {_SLOT[t]}' for k, t, _ in fields) + "}"
    prompt = rng.choice(_JSON_ASKS).format(keys=keys, thing=rng.choice(_THINGS), skeleton=skeleton)
    return Task("json_paraphrase", prompt, "", schema_of(fields))


def listed(parts: list[str]) -> str:
    """"a", "a and b", "a, b and c": keys as a sentence lists them."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def schema_of(fields) -> dict:
    """The checker's JSON schema for (key, type, ...) fields: exactly these keys, of these types."""
    return {
        "type": "object", "required": [k for k, _, *_ in fields], "additionalProperties": False,
        "properties": {k: ({"type": "array", "items": {"type": "string"}} if t == "array" else {"type": t})
                       for k, t, *_ in fields},
    }


# ---- arithmetic: questions, commands, small stories; digits and words ------------------------
_SMALL = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_DECADES = {2: "twenty", 3: "thirty", 4: "forty", 5: "fifty", 6: "sixty", 7: "seventy", 8: "eighty", 9: "ninety"}


def _spoken(n: int) -> str:
    if n == 100:
        return "a hundred"
    if n < 20:
        return _SMALL[n]
    return _DECADES[n // 10] + ("" if n % 10 == 0 else "-" + _SMALL[n % 10])


_MATH_ASKS = {
    "+": ("What is {a} plus {b}?", "What's {a} + {b}?", "Please add {a} and {b}.", "{a} + {b} = ?",
          "How much is {a} plus {b}?", "Can you tell me what {a} and {b} add up to?",
          "I bought {a} pens and then {b} more. How many pens do I have?",
          "A shelf holds {a} jars and another holds {b}. How many jars are there altogether?"),
    "-": ("What is {a} minus {b}?", "Solve: {a} - {b}", "Subtract {b} from {a}, please.",
          "If I have {a} cookies and eat {b}, how many are left?", "How much is {a} take away {b}?",
          "A bus carries {a} people and {b} get off. How many are still on the bus?"),
    "*": ("What is {a} times {b}?", "What do you get when you multiply {a} by {b}?", "Calculate {a} x {b}.",
          "A farmer has {a} fields with {b} cows in each. How many cows are there?",
          "How much is {a} multiplied by {b}?"),
    "/": ("What is {a} divided by {b}?", "Calculate {a} / {b}.",
          "{a} stickers are shared equally by {b} children. How many does each child get?",
          "How many times does {b} go into {a}?"),
}


def _math_item(rng: random.Random) -> Task:
    op = rng.choice("++--*/")
    if op == "+":
        a, b = rng.randint(2, 50), rng.randint(2, 50)
        answer = a + b
    elif op == "-":
        a = rng.randint(10, 59)
        b = rng.randint(1, a - 1)
        answer = a - b
    elif op == "*":
        a, b = rng.randint(2, 10), rng.randint(2, 10)
        answer = a * b
    else:
        b, answer = rng.randint(2, 10), rng.randint(2, 10)
        a = b * answer
    as_words = rng.random() < 0.3
    show = _spoken if as_words else str
    prompt = rng.choice(_MATH_ASKS[op]).format(a=show(a), b=show(b))
    return Task("math_paraphrase", prompt[0].upper() + prompt[1:], "", answer)


# ---- acrostics: the word given as a word, as letters, or as line openings ---------------------
_ACROSTIC_ASKS = (
    "Write an acrostic poem for {word} about {topic}.",
    "Compose a poem where each line starts with a letter of the word {word}. Make it about {topic}.",
    "Poem about {topic}; lines beginning with {commas}.",
    "Make an acrostic: the first letters spell {word}. Theme: {topic}.",
    "Please write a {n}-line poem whose first letters are {commas}.",
    "Acrostic on \"{word}\" please, topic {topic}.",
    "Can you do an acrostic with {word}? It should be about {topic}.",
    "Write {n} lines about {topic} starting with {spaced}.",
    "Give me an acrostic for {word}, one line per letter, about {topic}.",
)
_ACROSTIC_WORDS = ("WAVE", "MOON", "HOPE", "RAIN", "TREE", "STAR", "LIGHT", "DREAM", "CLOUD", "RIVER", "SMILE",
                   "OCEAN", "MUSIC", "BRAVE", "FLOWER", "PLANET", "GARDEN", "SUNSET", "KIND", "SNOW", "FIRE", "BEACH")
_TOPICS = ("the sea", "the moon", "winter", "friendship", "the city", "rain", "the forest", "music", "autumn", "cats",
           "the night sky", "coffee", "space", "summer", "dogs")
_COUNT = {3: "three", 4: "four", 5: "five", 6: "six"}


def _acrostic_item(rng: random.Random) -> Task:
    word = rng.choice(_ACROSTIC_WORDS)
    prompt = rng.choice(_ACROSTIC_ASKS).format(
        word=word, topic=rng.choice(_TOPICS), commas=", ".join(word), spaced=" ".join(word),
        n=_COUNT.get(len(word), str(len(word))) if rng.random() < 0.5 else str(len(word)),
    )
    return Task("acrostic_paraphrase", prompt, "", word)


# Prompts outside every family, as a visitor might type them: read, not scored (issue 14's sample of 20).
OFF_FAMILY_PROMPTS = (
    "Write a short poem about the moon.",
    "Describe a rainy afternoon in a small town.",
    "What is a Python decorator?",
    "Explain photosynthesis in one sentence.",
    "Tell me about elephants.",
    "Why do people keep pets?",
    "Give me some advice for a job interview.",
    "What is the difference between a list and a tuple in Python?",
    "Write a short poem about the sea at night.",
    "How does a bicycle work?",
    "What makes a good friend?",
    "Describe your favorite season.",
    "Explain gravity to a child.",
    "What is an iterator in Python?",
    "Write a few sentences about coffee.",
    "What should I cook for dinner tonight?",
    "Tell me something interesting about octopuses.",
    "Summarize what the internet is.",
    "Write a Python function that adds two numbers.",
    "Why is sleep important?",
)

# A second sample of 20, written on 2026-11-24 after the English families of issue 14 were fixed (why,
# how, tips, what makes a good X, favourites, suggestions, WordNet definitions) and before the model
# trained on them was run: the first sample's shapes ("Why is sleep important?", "What makes a good
# friend?") are now families of their own, so these ask in shapes and about subjects no family has.
OFF_FAMILY_PROMPTS_NEW = (
    "Compare cats and dogs as pets.",
    "Tell me a bedtime story about a dragon.",
    "What would you do with a free afternoon?",
    "Write a thank-you note to a teacher.",
    "What is it like to live on a boat?",
    "Explain the rules of tennis.",
    "Write a short letter to a friend about your summer.",
    "What do you think about rainy days?",
    "Give me three reasons to learn history.",
    "How are mountains formed?",
    "Describe the smell of fresh bread.",
    "What is the difference between weather and climate?",
    "Tell me a fun fact about the moon.",
    "Write a product description for a red umbrella.",
    "What happens when water boils?",
    "Invent a name for a new ice cream flavor and describe it.",
    "How would you describe the color blue to someone?",
    "Write two sentences about a lighthouse keeper.",
    "What makes the ocean salty?",
    "Say something kind to someone who had a bad day.",
)

_MAKERS = {"json_paraphrase": _json_item, "math_paraphrase": _math_item, "acrostic_paraphrase": _acrostic_item}
FAMILIES = tuple(_MAKERS)
SCORED_AS = {"json_paraphrase": "json", "math_paraphrase": "math", "acrostic_paraphrase": "acrostic"}


def distinct_tasks(makers, per_family: int, seed: int) -> tuple[Task, ...]:
    """`per_family` tasks of distinct prompts from each maker in turn, all drawn from one random stream."""
    rng = random.Random(seed)
    items: list[Task] = []
    for make in makers:
        seen: set[str] = set()
        while len(seen) < per_family:
            task = make(rng)
            if task.prompt not in seen:
                seen.add(task.prompt)
                items.append(task)
    return tuple(items)


@functools.cache
def _eval_set(per_family: int) -> tuple[Task, ...]:
    return distinct_tasks(_MAKERS.values(), per_family, _SEED)


def paraphrase_eval_set(per_family: int = PER_FAMILY) -> list[Task]:
    """The fixed evaluation tasks (no reference responses: the checkers score them)."""
    return list(_eval_set(per_family))


def eval_prompts() -> frozenset[str]:
    """Every prompt that must stay out of training: the scored set and the off-family sample."""
    return (frozenset(task.prompt for task in _eval_set(PER_FAMILY)) | frozenset(OFF_FAMILY_PROMPTS)
            | frozenset(OFF_FAMILY_PROMPTS_NEW))
