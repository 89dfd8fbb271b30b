"""Visitor-style phrasings of the scored families, generated compositionally (training only).

The template families (probe_families, demo_families) ask each task in two or three fixed
sentences; a visitor asks the same thing a hundred ways.  These generators build the prompt
from a grammar (prompts/tasks/grammar.py): sentence frames of interchangeable parts, synonym
sets, polite and terse openers, clause order, numbers as digits or words, JSON keys and types
written the ways people write them (`"age" (integer)`, `age: int`, `<integer>`, a skeleton to
fill in), acrostic letters given as a word, spelled out, or as "lines beginning with W, A, V, E".
The response is built from the same drawn content, in the template families' answer format,
so a paraphrase teaches the task and not a new answer style.

    task = make_json_paraphrase(random.Random(0))      # Task(family="json_paraphrase", ...)

The evaluation set of visitor phrasings (prompts/tasks/paraphrase_eval.py) is written separately
and never trained on.
"""

from __future__ import annotations

import json
import random

from . import bank
from .demo_families import ACROSTIC_WORDS, _topic_line
from .grammar import choose, expand
from .types import Task

# ---- shared pieces ---------------------------------------------------------------------------
OPENERS = ("", "", "", "", "Please ", "Hi! ", "Hey, ", "Quick one: ", "Could you help me? ", "Hello. ",
           "I have a request. ", "Task: ")
CLOSERS = ("", "", "", "", " Thanks!", " Thank you.", " Thanks in advance.", " Please.")

_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def number_words(n: int) -> str:
    """English words for 0 <= n < 1000: 42 -> "forty-two"."""
    if n < 20:
        return _UNITS[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _UNITS[n % 10])
    rest = n % 100
    return f"{_UNITS[n // 100]} hundred" + ("" if rest == 0 else " and " + number_words(rest))


def _say(rng: random.Random, n: int, words_share: float = 0.3) -> str:
    return number_words(n) if rng.random() < words_share else str(n)


def _polite(rng: random.Random, sentence: str) -> str:
    """An optional greeting before and thanks after; "Please" and "Hey," lower the next word."""
    opener, closer = rng.choice(OPENERS), rng.choice(CLOSERS)
    first = sentence.split(" ", 1)[0]
    if opener in ("Please ", "Hey, "):
        if first in ("Please", "Can", "Could") or first in bank.NAMES or first.isupper():
            opener = ""
        else:
            sentence = sentence[0].lower() + sentence[1:]
    if closer and sentence[-1] not in ".?!":
        sentence += "."
    return (opener + sentence + closer).strip()


# ---- JSON ------------------------------------------------------------------------------------
_WORDS = ("alpha", "maple", "river", "orbit", "velvet", "harbor", "cedar", "lantern", "pepper", "comet", "willow",
          "summit", "meadow", "ember", "falcon", "pixel")
# key -> value pool, by JSON type; keys people actually ask for.
JSON_KEYS = {
    "string": {
        "name": bank.NAMES, "first_name": bank.NAMES, "title": ("The Quiet Harbor", "Small Wonders", "Night Train"),
        "city": bank.CITIES, "country": tuple(c for c, _ in bank.CAPITALS), "color": ("red", "blue", "green", "amber"),
        "author": ("Mia Stone", "Leo Reed", "Ava Hart"), "species": ("cat", "dog", "rabbit", "parrot"),
        "email": ("mia@example.com", "leo@example.org", "sam@example.net"), "language": ("English", "Spanish", "Hindi"),
        "genre": ("drama", "comedy", "mystery"), "company": ("Acme", "Northwind", "Bluebird Labs"),
        "brand": ("Acme", "Lumen", "Orbit"), "username": ("mia_42", "leo.dev", "sunny_day"),
        "description": ("A small and friendly example.", "Made for everyday use."), "status": ("active", "pending", "done"),
        "category": ("books", "tools", "garden"), "job": ("teacher", "nurse", "engineer", "baker"),
        "team": ("Red Foxes", "Blue Owls"), "address": ("12 Maple Street", "4 River Road"), "model": ("X1", "Mark II"),
        "planet": ("Mars", "Venus", "Jupiter"), "food": ("pasta", "soup", "rice"), "nickname": ("Sunny", "Ace", "Bee"),
        "song": ("Blue Horizon", "Night Train"), "artist": ("Nora Vale", "Omar Hart"), "school": ("Hill School",),
        "id": ("a1b2", "x-17", "user-9"), "message": ("Hello there!", "See you soon."), "word": _WORDS,
    },
    "integer": {
        "age": range(1, 95), "year": range(1900, 2026), "count": range(0, 100), "pages": range(40, 900),
        "quantity": range(0, 200), "population": range(1000, 9000000, 997), "score": range(0, 101),
        "height_cm": range(50, 210), "rank": range(1, 50), "id": range(1, 10000), "floors": range(1, 90),
        "students": range(5, 900), "legs": (0, 2, 4, 6, 8), "wins": range(0, 40), "minutes": range(1, 240),
        "followers": range(0, 50000, 13), "rooms": range(1, 12), "level": range(1, 100), "stock": range(0, 500),
        "length": range(1, 300), "number": range(0, 1000),
    },
    "number": {
        "price": (4.99, 9.5, 12.75, 19.99, 24.0, 35.5, 49.99, 89.0), "rating": (3.5, 4.2, 4.8, 6.1, 7.9, 8.4),
        "temperature": (-3.5, 12.4, 21.0, 36.6), "distance_km": (1.2, 5.0, 42.195, 384400.0),
        "weight": (0.5, 2.3, 12.8, 70.5), "speed": (3.6, 12.5, 88.0), "latitude": (38.72, 59.91, -12.05),
        "longitude": (-9.14, 10.75, 139.69), "balance": (0.0, 105.25, 1500.75), "height": (1.62, 1.8, 2.05),
        "percent": (12.5, 50.0, 99.9), "gpa": (2.8, 3.4, 3.9),
    },
    "boolean": {
        key: (True, False) for key in ("is_student", "available", "active", "is_open", "vaccinated", "married",
                                       "verified", "in_stock", "visited", "completed", "has_pet", "enabled", "coastal",
                                       "published", "is_admin", "sold_out")
    },
    "array": {
        "hobbies": ("reading", "chess", "hiking", "painting", "cooking", "music"),
        "tags": ("new", "sale", "popular", "eco", "classic"), "colors": ("black", "white", "red", "blue", "green"),
        "skills": ("python", "design", "writing", "sales"), "languages": ("English", "French", "Japanese", "Swahili"),
        "toys": ("ball", "rope", "bell", "bone"), "friends": bank.NAMES, "ingredients": ("flour", "sugar", "eggs", "milk"),
        "genres": ("drama", "comedy", "mystery"), "cities": bank.CITIES, "pets": ("cat", "dog", "fish"),
        "authors": ("Mia Stone", "Leo Reed"), "landmarks": ("old bridge", "museum", "harbor"),
    },
}
ENTITIES = ("person", "fictional person", "user", "book", "movie", "pet", "product", "city", "student", "employee",
            "customer", "car", "song", "restaurant", "company", "game", "planet", "team", "recipe", "house", "country",
            "character", "school", "animal", "event", "order", "hotel", "player")
# How people name a JSON type: the checker's type -> spellings (the string type first).
TYPE_WORDS = {
    "string": ("string", "str", "text", "a string", "String"),
    "integer": ("integer", "int", "an integer", "whole number", "Integer"),
    "number": ("number", "float", "a number", "decimal number", "Number"),
    "boolean": ("boolean", "bool", "true or false", "a boolean", "Boolean"),
    "array": ("list of strings", "array of strings", "string list", "a list of strings", "array"),
}
_PLACEHOLDER = {"string": '"<string>"', "integer": "<integer>", "number": "<number>", "boolean": "<boolean>",
                "array": '["<string>"]'}
_EXAMPLE = {"string": '"..."', "integer": "0", "number": "0.0", "boolean": "true", "array": "[]"}


# Keys outside the lists above get a value of the requested type, so the type word is what counts.
GENERIC_KEYS = tuple(sorted({one.replace(" ", "_") for one, _ in bank.OBJECTS} | set(_WORDS) | {
    "label", "code", "note", "value", "size", "kind", "owner", "region", "mood", "size_label", "group", "source",
    "target", "weight_g", "zone", "amount", "total", "flag", "remark", "level_name", "shape"}))
GENERIC_VALUES = {"string": _WORDS + bank.NAMES[:10], "integer": range(0, 120), "number": (0.5, 1.25, 3.75, 9.9, 42.0),
                  "boolean": (True, False), "array": _WORDS}


def _json_value(kind: str, pool, rng: random.Random):
    if kind == "array":
        return rng.sample(list(pool), rng.randint(1, min(3, len(pool))))
    return rng.choice(list(pool))


def _with_article(word: str) -> str:
    if word.startswith(("a ", "an ", "true")):
        return word
    return ("an " if word[0].lower() in "aeiou" else "a ") + word


def _key_phrase(rng: random.Random, key: str, kind: str, style: int) -> str:
    word = rng.choice(TYPE_WORDS[kind])
    quoted = rng.choice((f'"{key}"', f'"{key}"', f"'{key}'", key, f"`{key}`"))
    return (
        f"{quoted} ({word})", f"{quoted}: {word}", f"{quoted} as {_with_article(word)}",
        f"{quoted} - {word}", f"{quoted}: <{kind if kind != 'array' else 'list of strings'}>",
        f"{quoted} {word}", f"{word} {quoted}",
    )[style]


def _listing(rng: random.Random, phrases: list[str]) -> str:
    if len(phrases) == 1:
        return phrases[0]
    form = rng.randrange(4)
    if form == 0:
        return ", ".join(phrases[:-1]) + rng.choice((" and ", ", and ", " & ")) + phrases[-1]
    if form == 1:
        return ", ".join(phrases)
    if form == 2:
        return "; ".join(phrases)
    return "\n" + "\n".join(rng.choice(("- ", "* ", "")) + p for p in phrases)


def _skeleton(rng: random.Random, keys: list[tuple[str, str]]) -> str:
    fill = _PLACEHOLDER if rng.random() < 0.6 else _EXAMPLE
    return "{" + ", ".join(f'"{k}": {fill[kind]}' for k, kind in keys) + "}"


_JSON_FRAMES = (
    "{Return|Give me|Create|Make|Generate|Produce|Write|Output|Build} {a|one} {JSON object|JSON|json object|JSON record"
    "|JSON dict} {for|describing|about|representing} a {|fictional |made-up |sample |random }$entity"
    " {with|using|that has|containing} {the keys|keys|fields|the fields|properties|these keys:|the following fields:}"
    " $keys{.|}[ {Reply|Answer|Respond} with {JSON|the JSON|valid JSON} only.| No explanation.| Only the JSON, please.]",
    "{I need|I want|Can you give me|Could you make|Please produce} {a|one} {JSON object|JSON|json} "
    "{with|having} $keys{,|} {for|describing} a {|fictional |made-up }$entity{.|?}",
    "{Fill in|Complete|Fill out} this JSON {template|skeleton|shape} for a {|fictional |made-up }$entity: $skeleton",
    "{Return|Give me|Write} JSON {that matches|following|in the shape of} $skeleton {for a $entity|}",
    "$entity as JSON{.|:} {Keys|Fields|Properties}: $keys",
    "{Describe|Represent|Model} a {|fictional |made-up }$entity as {a JSON object|JSON} with $keys.",
    "{Make up|Invent|Come up with} a $entity and {return|give|write} it as {a JSON object|JSON} with $keys.",
    "JSON {only|please}{:|.} {A|One} $entity{,|} {with|keys} $keys",
    "{Generate|Create} a JSON object{.|:} {It should have|It must have|Include} $keys. {It describes|Make it about} a $entity.",
    "{What would|Show me how} a JSON object for a $entity {look like|would look} with $keys{?|.}",
)


def make_json_paraphrase(rng: random.Random) -> Task:
    count = rng.choice((1, 2, 2, 3, 3, 3, 4, 4))
    keys: list[tuple[str, str]] = []
    while len(keys) < count:
        kind = rng.choice(("string", "string", "integer", "integer", "number", "boolean", "array"))
        key = rng.choice(GENERIC_KEYS if rng.random() < 0.25 else tuple(JSON_KEYS[kind]))
        if key not in (k for k, _ in keys):
            keys.append((key, kind))
    style = rng.randrange(7)
    phrases = [_key_phrase(rng, key, kind, style) for key, kind in keys]
    prompt = _polite(rng, choose(rng, _JSON_FRAMES, entity=rng.choice(ENTITIES), keys=_listing(rng, phrases),
                                 skeleton=_skeleton(rng, keys)))
    value = {key: _json_value(kind, JSON_KEYS[kind].get(key, GENERIC_VALUES[kind]), rng) for key, kind in keys}
    properties = {key: ({"type": "array", "items": {"type": "string"}} if kind == "array" else {"type": kind})
                  for key, kind in keys}
    schema = {"type": "object", "properties": properties, "required": [k for k, _ in keys],
              "additionalProperties": False}
    return Task("json_paraphrase", prompt, json.dumps(value), schema)


# ---- arithmetic ------------------------------------------------------------------------------
_OPERATIONS = {  # op -> (symbol, phrasings of "A op B" with $a and $b)
    "add": ("+", ("$a plus $b", "$a + $b", "$a and $b added together", "the sum of $a and $b", "$a added to $b")),
    "sub": ("-", ("$a minus $b", "$a - $b", "$b subtracted from $a", "the difference between $a and $b",
                  "$a take away $b")),
    "mul": ("*", ("$a times $b", "$a * $b", "$a x $b", "$a multiplied by $b", "the product of $a and $b")),
    "div": ("/", ("$a divided by $b", "$a / $b", "$a split into $b equal parts", "the quotient of $a and $b")),
}
_BARE_FRAMES = (
    "{What is|What's|How much is|Calculate|Compute|Work out|Find|Evaluate|Tell me} $expr{?|.|}",
    "$expr {=|equals|is} {?|what?|how much?}",
    "{Can you|Could you|Please} {calculate|compute|work out|tell me} $expr{?|.}",
    "{Quick math|Math question|Arithmetic}: $expr{?|}",
    "{Do you know|I wonder} what $expr is{?|.}",
)
_VERB_FRAMES = {
    "add": ("{Add|Sum} $a and $b{.|}", "Add $a to $b{.|}"),
    "sub": ("Subtract $b from $a{.|}", "Take $b away from $a{.|}"),
    "mul": ("Multiply $a by $b{.|}", "Multiply $a and $b{.|}"),
    "div": ("Divide $a by $b{.|}", "Split $a into $b equal {parts|groups}. How {big|many} is each{?|}"),
}
_STORY_FRAMES = {
    "add": (
        "$name {has|owns|collected|had} $a $many. {Then|Later|After that|Next} $he {gets|finds|buys|is given|receives}"
        " $b more. {How many $many does $name have {now|in total|altogether}|What is the total}?",
        "{There are|I have|We have} $a $many and {add|get|find} $b more. How many $many {are there|do we have} now?",
        "$name {picked|collected|found|bought} $a $many {yesterday|on Monday|in the morning} and $b {today|on Tuesday|in "
        "the afternoon}. How many {$many |}{is that|in total|altogether}?",
    ),
    "sub": (
        "$name {has|had|owns} $a $many and {gives|gave|loses|lost|sells|sold} $b{ of them|}. How many {$many |}{are "
        "left|remain|does $he have now}?",
        "{There are|There were} $a $many in {a|the} $box. $b {are|were} taken out. How many {are|were} left{ in the $box|}?",
        "$name {needs|wants} $a $many {but|and} {has|already has} $b. How many more {does $he need|are needed}?",
    ),
    "mul": (
        "{There are|I have|We have} $a $boxes {with|and each holds|holding} $b $many{ each| in each|}. How many $many"
        " {are there|in total|altogether}?",
        "$name {buys|packs|fills} $a $boxes{,| and} each with $b $many. How many $many {is that|does $he have}?",
    ),
    "div": (
        "$name {shares|splits|divides} $a $many {equally|evenly} {among|between} $b {friends|people|kids}. How many"
        " {does each get|$many does each one get}?",
        "$a $many {go|are packed|are put} into $b $boxes{ equally| evenly| with the same number in each}. How many"
        " {are in each $box|go in each}?",
    ),
}


def _operands(rng: random.Random, op: str) -> tuple[int, int, int]:
    if op == "add":  # operands up to 50: every sum is a fact the small model must hold
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        return a, b, a + b
    if op == "sub":
        a = rng.randint(2, 60)
        b = rng.randint(1, a - 1)
        return a, b, a - b
    if op == "mul":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return a, b, a * b
    b, answer = rng.randint(2, 12), rng.randint(2, 12)
    return b * answer, b, answer


def make_math_paraphrase(rng: random.Random) -> Task:
    op = rng.choice(tuple(_OPERATIONS))
    a, b, answer = _operands(rng, op)
    words = 0.35 if rng.random() < 0.5 else 0.0  # some prompts write numbers as words
    say_a, say_b = _say(rng, a, words), _say(rng, b, words)
    shape = rng.random()
    if shape < 0.45:
        expr = expand(rng, rng.choice(_OPERATIONS[op][1]), a=say_a, b=say_b)
        prompt = choose(rng, _BARE_FRAMES, expr=expr)
    elif shape < 0.6:
        prompt = choose(rng, _VERB_FRAMES[op], a=say_a, b=say_b)
    else:
        name = rng.choice(bank.NAMES)
        _, many = rng.choice(bank.OBJECTS)
        box, boxes = rng.choice(bank.CONTAINERS)
        prompt = choose(rng, _STORY_FRAMES[op], a=say_a, b=say_b, name=name, he=bank.PRONOUNS[name], many=many,
                        box=box, boxes=boxes)
    prompt = _polite(rng, prompt[0].upper() + prompt[1:])
    symbol = _OPERATIONS[op][0]
    return Task("math_paraphrase", prompt, f"{a} {symbol} {b} = {answer}. The answer is {answer}.", answer)


# ---- acrostic --------------------------------------------------------------------------------
def _letters_given(rng: random.Random, letters: str) -> str:
    """The letters as a visitor might give them."""
    form = rng.randrange(7)
    if form == 0:
        return f"the word {letters}"
    if form == 1:
        return f'"{letters}"'
    if form == 2:
        return letters
    if form == 3:
        return rng.choice((", ", " ", "-", ". ", ",")).join(letters)
    if form == 4:
        return "the letters " + ", ".join(letters[:-1]) + " and " + letters[-1]
    if form == 5:
        return f"{letters} (one line per letter)"
    return f"'{letters}'"


_ACROSTIC_FRAMES = (
    "{Write|Compose|Create|Make|Give me} {an acrostic|an acrostic poem|a short acrostic} {about|on} $topic {for|using|"
    "spelling} $given{.|}",
    "{Write|Compose} a poem about $topic {whose|where the|in which the} {lines|first letters} {start with|begin with|"
    "spell} $given{.|}",
    "{Acrostic|Acrostic poem}{:|,} $given{,|.} {Topic|Theme|Subject}: $topic{.|}",
    "{Can you|Could you|Please} write an acrostic {for|of|spelling} $given {about|on} $topic{?|.}",
    "{I'd like|I want|I need} an acrostic {poem |}{about|on} $topic. {The lines should start with|Use|It spells} $given{.|}",
    "{Write|Make} $n lines about $topic{,|.} {starting with|beginning with|each starting with} $spaced{.|}",
    "{Lines beginning with|First letters:|Start each line with} $spaced{,|.} {a poem |}about $topic{.|}",
    "{Spell out|Spell} $given with the first letters of {a poem|the lines of a poem|each line} about $topic{.|}",
)


def make_acrostic_paraphrase(rng: random.Random) -> Task:
    topic = rng.choice(tuple(bank.TOPICS))
    if rng.random() < 0.7:
        letters = rng.choice([w for w in ACROSTIC_WORDS if 3 <= len(w) <= 8])
    else:
        letters = "".join(rng.choice("ABCDEFGHIJKLMNOPRSTUVWY") for _ in range(rng.randint(3, 7)))
    n = _say(rng, len(letters), 0.5)
    spaced = rng.choice((", ", " ", "-", ", ")).join(letters)
    prompt = _polite(rng, choose(rng, _ACROSTIC_FRAMES, topic=topic, given=_letters_given(rng, letters), n=n,
                                 spaced=spaced))
    used: set = set()
    response = "\n".join(_topic_line(rng, letter, topic, used) for letter in letters)
    return Task("acrostic_paraphrase", prompt[0].upper() + prompt[1:], response, letters)


GENERATORS = {
    "json_paraphrase": make_json_paraphrase,
    "math_paraphrase": make_math_paraphrase,
    "acrostic_paraphrase": make_acrostic_paraphrase,
}
# Which template family's checker scores each paraphrase family.
CHECKED_AS = {"json_paraphrase": "json", "math_paraphrase": "math", "acrostic_paraphrase": "acrostic"}
