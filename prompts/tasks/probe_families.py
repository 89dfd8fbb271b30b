"""Generators for the six probe regimes of the commit-order study (seeds/000_*).

math (word problems with a final number), code_function (complete a signature + docstring,
HumanEval-like), code_task (a function from a one-line description, MBPP-like), factual (recall
from the project's own fact table), open (open-ended instructions, no checker) and json (an
object following a requested schema).

    task = make_math(random.Random(0))
    task.answer            # the expected number
"""

from __future__ import annotations

import json
import random

from . import bank, checks
from .code_specs import distinct_examples, function_specs
from .types import Task

N_HIDDEN_TESTS = 3  # asserts a code answer must pass


# ---- math ------------------------------------------------------------------------------------
def make_math(rng: random.Random) -> Task:
    name, other = rng.sample(bank.NAMES, 2)
    he = bank.PRONOUNS[name]
    one, many = rng.choice(bank.OBJECTS)
    box, boxes = rng.choice(bank.CONTAINERS)
    kind = rng.choice(("add", "add", "sub", "sub", "mul", "div", "two_step"))
    if kind == "add":
        a, b = rng.randint(2, 20), rng.randint(2, 20)
        answer = a + b
        prompt = rng.choice((
            f"{name} has {a} {many}. {he.capitalize()} gets {b} more. How many {many} does {name} have now?",
            f"There are {a} {many} in a {box}. {name} puts in {b} more. How many {many} are in the {box} now?",
            f"{name} found {a} {many} on Monday and {b} {many} on Tuesday. How many {many} did {he} find in all?",
        ))
        work = f"{a} + {b} = {answer}."
    elif kind == "sub":
        a = rng.randint(5, 30)
        b = rng.randint(1, a - 1)
        answer = a - b
        prompt = rng.choice((
            f"{name} had {a} {many} and gave {b} to {other}. How many {many} does {name} have left?",
            f"A {box} holds {a} {many}. {name} takes out {b}. How many {many} are left in the {box}?",
            f"{name} needs {a} {many} and already has {b}. How many more {many} does {he} need?",
        ))
        work = f"{a} - {b} = {answer}."
    elif kind == "mul":
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        answer = a * b
        prompt = rng.choice((
            f"There are {a} {boxes} with {b} {many} in each. How many {many} are there in total?",
            f"{name} buys {a} packs of {many}. Each pack has {b} {many}. How many {many} does {he} buy?",
        ))
        work = f"{a} * {b} = {answer}."
    elif kind == "div":
        b, answer = rng.randint(2, 9), rng.randint(2, 9)
        a = b * answer
        prompt = rng.choice((
            f"{name} shares {a} {many} equally among {b} friends. How many {many} does each friend get?",
            f"{a} {many} are packed into {b} {boxes} with the same number in each. How many {many} are in each {box}?",
        ))
        work = f"{a} / {b} = {answer}."
    else:
        a, b = rng.randint(2, 6), rng.randint(2, 6)
        c = rng.randint(1, a * b - 1)
        answer = a * b - c
        prompt = (
            f"{name} buys {a} bags with {b} {many} in each bag and gives {c} {many} to {other}. "
            f"How many {many} does {name} have left?"
        )
        work = f"{a} * {b} = {a * b}. {a * b} - {c} = {answer}."
    return Task("math", prompt, f"{work} The answer is {answer}.", answer)


# ---- code ------------------------------------------------------------------------------------
def _hidden_tests(spec, rng) -> tuple[str, ...]:
    return tuple(f"assert {call} == {expected}" for call, expected in distinct_examples(spec, rng, N_HIDDEN_TESTS))


def make_code_function(rng: random.Random) -> Task:
    spec = rng.choice(function_specs())
    call, expected = spec.example(rng)
    stub = f'def {spec.name}({spec.params}):\n    """{spec.doc}\n\n    >>> {call}\n    {expected}\n    """\n'
    prompt = rng.choice((
        f"Complete the following Python function.\n\n```python\n{stub}```",
        f"Finish this Python function so that it does what its docstring says.\n\n```python\n{stub}```",
    ))
    response = "```python\n" + spec.source() + "```"
    return Task("code_function", prompt, response, _hidden_tests(spec, rng))


def make_code_task(rng: random.Random) -> Task:
    spec = rng.choice(function_specs())
    prompt = rng.choice((
        f"Write a Python function {spec.name}({spec.params}) that {spec.description}.",
        f"Write a function named {spec.name} that takes {spec.params} and {spec.description}.",
        f"Implement {spec.name}({spec.params}) in Python: it {spec.description}.",
        f"Define a Python function {spec.name}({spec.params}) which {spec.description}.",
        f"Create a Python function called {spec.name} that {spec.description}.",
        f"In Python, write {spec.name}({spec.params}) so that it {spec.description}.",
    ))
    response = "```python\n" + spec.source() + "```"
    return Task("code_task", prompt, response, _hidden_tests(spec, rng))


# ---- factual ---------------------------------------------------------------------------------
def _article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _fact_items():
    """Every (prompt, response, answer) of the fact table: each fact under several phrasings."""
    items = []
    for country, capital in bank.CAPITALS:
        for q in (f"What is the capital of {country}?", f"Which city is the capital of {country}?",
                  f"Name the capital city of {country}.", f"What city is the capital of {country}?"):
            items.append((q, f"The capital of {country} is {capital}.", capital))
    for element, symbol in bank.CHEMICAL_SYMBOLS:
        for q in (f"What is the chemical symbol for {element}?", f"Which symbol stands for {element}?",
                  f"Give the chemical symbol of {element}."):
            items.append((q, f"The chemical symbol for {element} is {symbol}.", symbol))
        items.append((f"Which element has the chemical symbol {symbol}?",
                      f"The element with the symbol {symbol} is {element}.", element))
    for animal, young in bank.ANIMAL_YOUNG:
        for q in (f"What is a baby {animal} called?", f"What do you call a young {animal}?",
                  f"What is the name for a baby {animal}?"):
            items.append((q, f"A baby {animal} is called {_article(young)}.", young))
    for word, opposite in bank.OPPOSITES:
        for q in (f"What is the opposite of {word}?", f"Give the opposite of the word {word}.",
                  f"What word means the opposite of {word}?"):
            items.append((q, f"The opposite of {word} is {opposite}.", opposite))
    for animal, legs in bank.LEG_COUNTS:
        for q in (f"How many legs does {_article(animal)} have?", f"How many legs has {_article(animal)} got?",
                  f"Count the legs of {_article(animal)}."):
            items.append((q, f"{_article(animal).capitalize()} has {legs} legs.", legs))
    return items


_FACTS = _fact_items()


def make_factual(rng: random.Random) -> Task:
    prompt, response, answer = rng.choice(_FACTS)
    return Task("factual", prompt, response, answer)


# ---- open ------------------------------------------------------------------------------------
def make_open(rng: random.Random) -> Task:
    kind = rng.choice(("describe", "tips", "note", "slogan"))
    if kind == "describe":
        topic = rng.choice(tuple(bank.TOPICS))
        nouns, verbs = bank.TOPICS[topic]
        chosen = rng.sample(nouns, 3)
        prompt = rng.choice((f"Describe {topic} in a few sentences.", f"Tell me about {topic}.",
                             f"Write a short description of {topic}."))
        first = f"{topic[0].upper()}{topic[1:]} is full of {chosen[0]} that {rng.choice(verbs)}."
        rest = [f"{rng.choice(bank.LETTER_WORDS[n[0].upper()])} {n} {rng.choice(verbs)}." for n in chosen[1:]]
        response = " ".join([first, *rest])
    elif kind == "tips":
        activity = rng.choice(tuple(bank.ACTIVITIES))
        n = rng.randint(2, 4)
        prompt = rng.choice((f"Give me {n} tips for {activity}.", f"What are {bank.NUMBER_WORDS[n]} good tips for {activity}?"))
        tips = rng.sample(bank.ACTIVITIES[activity], n)
        response = "\n".join(f"{i}. {tip}" for i, tip in enumerate(tips, start=1))
    elif kind == "note":
        friend, me = rng.sample(bank.NAMES, 2)
        gift = rng.choice(bank.GIFTS)
        prompt = rng.choice((f"Write a short note thanking {friend} for {gift}.",
                             f"Write a thank-you note to {friend} for {gift}."))
        middle = rng.choice(("It made my whole week.", "It was such a kind surprise.", "I smiled all day.",
                             "You always know what I need."))
        response = f"Dear {friend},\n\nThank you so much for {gift}. {middle} I hope we see each other soon.\n\nWarmly,\n{me}"
    else:
        shop = rng.choice(bank.SHOPS)
        a, b = rng.sample(bank.SLOGAN_WORDS[shop], 2)
        prompt = rng.choice((f"Write a slogan for a {shop}.", f"Suggest a catchy slogan for a {shop}."))
        response = rng.choice((f"{a.capitalize()} and {b}, every single day.", f"Where every {a} feels {b}.",
                               f"Come for the {a}, stay for the {b}.", f"Your {a}, our {b}."))
    return Task("open", prompt, response, None)


# ---- json ------------------------------------------------------------------------------------
def _json_value(kind: str, pool, rng):
    if kind == "array":
        return rng.sample(pool, rng.randint(1, 3))
    return rng.choice(pool)


def json_schema(entity: str, keys: list[str]) -> dict:
    fields = bank.JSON_ENTITIES[entity]
    properties = {}
    for key in keys:
        kind = fields[key][0]
        properties[key] = {"type": "array", "items": {"type": "string"}} if kind == "array" else {"type": kind}
    return {"type": "object", "properties": properties, "required": list(keys), "additionalProperties": False}


def make_json(rng: random.Random) -> Task:
    entity = rng.choice(tuple(bank.JSON_ENTITIES))
    fields = bank.JSON_ENTITIES[entity]
    keys = rng.sample(list(fields), rng.randint(2, 4))
    described = [f'"{k}" ({"list of strings" if fields[k][0] == "array" else fields[k][0]})' for k in keys]
    listing = ", ".join(described[:-1]) + " and " + described[-1]
    prompt = rng.choice((
        f"Return a JSON object describing a {entity} with the keys {listing}.",
        f"Give me a JSON object for a fictional {entity}. Use exactly these fields: {listing}.",
        f"Create a JSON object with {listing} for a {entity}. Reply with JSON only.",
    ))
    value = {k: _json_value(fields[k][0], fields[k][1], rng) for k in keys}
    return Task("json", prompt, json.dumps(value), json_schema(entity, keys))


def check_probe_regime(task: Task, response: str) -> bool | None:
    family, answer = task.family, task.answer
    if family == "math":
        return checks.check_number(answer, response)
    if family in ("code_function", "code_task"):
        return checks.check_code_tests(answer, response)
    if family == "factual":
        return checks.check_fact(answer, response)
    if family == "open":
        return None
    if family == "json":
        return checks.check_json_schema(answer, response)
    raise KeyError(family)


GENERATORS = {
    "math": make_math,
    "code_function": make_code_function,
    "code_task": make_code_task,
    "factual": make_factual,
    "open": make_open,
    "json": make_json,
}
