"""Generators for the six demo prompt families (the structured prompts of prompts/demos.py).

Each generator takes a `random.Random` and returns a `Task`; the same family's templates
reproduce the demo prompts word for word, with the topic, letters, counts and content varied.

    task = make_acrostic(random.Random(0))
    print(task.prompt, task.response, sep="\\n")
"""

from __future__ import annotations

import random

from . import bank, checks
from .code_specs import distinct_examples, function_specs
from .types import Task

ACROSTIC_WORDS = (
    "OCEANS", "OCEAN", "RIVER", "STARS", "LIGHT", "DREAM", "HOPE", "SPRING", "CODE", "DATA", "MAPLE", "TIGER",
    "PIXEL", "QUIZ", "JAZZ", "MUSIC", "WINTER", "GARDEN", "FOREST", "CLOUD", "STONE", "BREAD", "CANDLE", "FRIEND",
    "SMILE", "HONEY", "LEMON", "PLANET", "ROBOT", "SUMMER", "AUTUMN", "MORNING", "SILVER", "GOLD", "WAVE", "NIGHT",
    "BRIGHT", "QUIET", "ZEBRA", "KITE", "VELVET", "YELLOW", "HARBOR", "ISLAND", "JUNGLE", "MEADOW", "ORBIT",
    "PUZZLE", "RAIN", "SNOW", "TRAIN", "UNITY", "VOYAGE", "WHALE", "XENON", "YOUTH", "ZEPHYR", "BOOK", "LAMP",
    "MOON", "SUN", "SKY", "TREE", "BIRD", "FISH", "HOME", "LOVE", "PEACE", "EARTH", "FLAME", "GRACE", "HEART",
    "MAGIC", "NOVEL", "OASIS", "PEARL", "QUEST", "SPARK", "TULIP", "VALLEY", "WONDER", "AMBER", "BLOOM", "CORAL",
)


def topic_line(rng: random.Random, letter: str, topic: str, used: set) -> str:
    nouns, verbs = bank.TOPICS[topic]
    noun = rng.choice([n for n in nouns if n not in used] or list(nouns))
    used.add(noun)
    return f"{rng.choice(bank.LETTER_WORDS[letter])} {noun} {rng.choice(verbs)}"


def make_acrostic(rng: random.Random) -> Task:
    topic = rng.choice(tuple(bank.TOPICS))
    style = rng.random()
    if style < 0.5:
        if rng.random() < 0.6:
            letters = rng.choice([w for w in ACROSTIC_WORDS if 3 <= len(w) <= 8])
        else:
            letters = "".join(rng.choice("ABCDEFGHIJKLMNOPRSTUVWY") for _ in range(rng.randint(3, 8)))
        n = bank.NUMBER_WORDS[len(letters)]
        prompt = (
            f"Write a {n}-line poem about {topic} where the lines start with the letters "
            f"{', '.join(letters)} in that order."
        )
    else:
        letters = rng.choice(ACROSTIC_WORDS)
        prompt = rng.choice((
            f"Write an acrostic poem about {topic} for the word {letters}.",
            f"Write an acrostic for the word {letters} about {topic}.",
            f"Write an acrostic poem for {letters}, about {topic}.",
        ))
    used: set = set()
    response = "\n".join(topic_line(rng, letter, topic, used) for letter in letters)
    return Task("acrostic", prompt, response, letters)


def make_sentences(rng: random.Random) -> Task:
    question = rng.choice(tuple(bank.EXPLANATIONS))
    pool = bank.EXPLANATIONS[question]
    n = rng.randint(1, len(pool))
    word = bank.NUMBER_WORDS[n]
    unit = "sentence" if n == 1 else "sentences"
    prompt = rng.choice((
        f"{question} Answer in exactly {word} {unit}.",
        f"Answer in exactly {word} {unit}: {question}",
        f"{question} Please reply in exactly {word} {unit}.",
        f"In exactly {word} {unit}, answer this: {question}",
    ))
    rest = sorted(rng.sample(range(1, len(pool)), n - 1))
    response = " ".join(pool[i] for i in [0, *rest])
    return Task("sentences", prompt, response, n)


def make_doctest_function(rng: random.Random) -> Task:
    spec = rng.choice(function_specs())
    count = rng.randint(1, 4)
    noun = "doctest example" if count == 1 else "doctest examples"
    prompt = rng.choice((
        f"Write a Python function {spec.name}({spec.params}) with a docstring and {bank.NUMBER_WORDS[count]} {noun}.",
        f"Write a Python function {spec.name}({spec.params}) with a docstring and {count} {noun}.",
    ))
    examples = distinct_examples(spec, rng, count)
    doc = [f'    """{spec.doc}', ""]
    for call, expected in examples:
        doc += [f"    >>> {call}", f"    {expected}"]
    doc.append('    """')
    response = "```python\n" + spec.source(docstring="\n".join(doc)) + "```"
    return Task("doctest_function", prompt, response, {"name": spec.name, "count": len(examples)})


def make_fact_list(rng: random.Random) -> Task:
    category = rng.choice(bank.FULL_LISTS + bank.SAMPLED_LISTS)
    table = bank.LIST_CATEGORIES[category]
    if category in bank.FULL_LISTS:
        items = list(table)
        prompt = rng.choice((
            f"List the {bank.NUMBER_WORDS[len(items)]} {category}, one per line, each with a fun fact.",
            f"List all {len(items)} {category}, one per line, with a fact about each.",
        ))
    else:
        items = rng.sample(list(table), rng.randint(3, 8))
        n = bank.NUMBER_WORDS[len(items)]
        prompt = rng.choice((
            f"List {n} {category}, one per line, each with a fun fact.",
            f"Name {len(items)} {category}, one per line, with a fact about each.",
        ))
    lines = [f"{i}. {item}: {rng.choice(table[item])}" for i, item in enumerate(items, start=1)]
    return Task("fact_list", prompt, "\n".join(lines), {"category": category, "count": len(items)})


def make_story(rng: random.Random) -> Task:
    name = rng.choice(bank.NAMES)
    pronoun = bank.PRONOUNS[name]
    words = rng.choice((50, 60, 80, 100))
    prompt = rng.choice((
        f"Write a {words}-word story that begins and ends with the same sentence.",
        f"Write a short story of about {words} words that starts and ends with the same sentence.",
        f"Write a {words}-word story about {name} that begins and ends with the same sentence.",
    ))
    opening = rng.choice(bank.STORY_OPENINGS).format(name=name)
    middle = [] if name in opening else [f"{name} lived on the same street."]
    pool = rng.sample(bank.STORY_MIDDLES, len(bank.STORY_MIDDLES))
    while pool and len(" ".join([opening, *middle, opening]).split()) < words - 6:
        middle.append(pool.pop().format(pronoun=pronoun, Pronoun=pronoun.capitalize()))
    response = " ".join([opening, *middle, opening])
    return Task("story", prompt, response, None)


def make_haiku(rng: random.Random) -> Task:
    topic = rng.choice(tuple(bank.HAIKU_LINES))
    fives, sevens = bank.HAIKU_LINES[topic]
    first, third = rng.sample(fives, 2)
    second = rng.choice(sevens)
    prompt = rng.choice((
        f"Write a haiku about {topic}, then explain its 5-7-5 syllable structure.",
        f"Write a haiku about {topic} and explain its 5-7-5 syllable structure.",
        f"Compose a haiku about {topic}, then explain its 5-7-5 syllable pattern.",
    ))
    explanation = (
        f'The first line, "{first}", has five syllables. The second line, "{second}", has seven syllables. '
        f'The third line, "{third}", has five syllables again, so the poem follows the 5-7-5 pattern.'
    )
    return Task("haiku", prompt, f"{first}\n{second}\n{third}\n\n{explanation}", None)


def check_demo_family(task: Task, response: str) -> bool:
    family, answer = task.family, task.answer
    if family == "acrostic":
        return checks.check_acrostic(answer, response)
    if family == "sentences":
        return checks.check_sentence_count(answer, response)
    if family == "doctest_function":
        return checks.check_doctests(answer["name"], answer["count"], response)
    if family == "fact_list":
        return checks.check_numbered_list(tuple(bank.LIST_CATEGORIES[answer["category"]]), answer["count"], response)
    if family == "story":
        return checks.check_same_first_and_last_sentence(response)
    if family == "haiku":
        return checks.check_haiku(response)
    raise KeyError(family)


GENERATORS = {
    "acrostic": make_acrostic,
    "sentences": make_sentences,
    "doctest_function": make_doctest_function,
    "fact_list": make_fact_list,
    "story": make_story,
    "haiku": make_haiku,
}

# What each demo prompt of prompts/demos.py asks for, as (family, answer) for check_demo_family.
DEMO_ANSWERS = {
    "acrostic": ("acrostic", "OCEANS"),
    "sky": ("sentences", 3),
    "palindrome": ("doctest_function", {"name": "is_palindrome", "count": 1}),
    "planets": ("fact_list", {"category": "planets of the solar system", "count": 8}),
    "story": ("story", None),
    "haiku": ("haiku", None),
}


def demo_task(name: str) -> Task:
    """The demo prompt `name` as a checkable Task (no reference response)."""
    from prompts.demos import demo

    family, answer = DEMO_ANSWERS[name]
    return Task(family, demo(name).prompt, "", answer)
