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
import string

from . import bank, words
from .demo_families import ACROSTIC_WORDS, topic_line
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


_REQUEST_VERBS = frozenset(
    "Write Give Make Return Calculate Compute Add Subtract Multiply Divide Create Generate Describe Tell Explain List "
    "Find Solve Work Take Split Fill Complete Produce Output Build Show Provide Compose Spell Send Draft Model "
    "Represent Invent Use Follow Respond Answer Reply Count Put Evaluate Check Help Define Summarize Name".split())


def polite(rng: random.Random, sentence: str) -> str:
    """An optional greeting before and thanks after; "Please" and "Hey," lower the next word."""
    opener, closer = rng.choice(OPENERS), rng.choice(CLOSERS)
    first = sentence.split(" ", 1)[0]
    if opener == "Please " and first not in _REQUEST_VERBS:
        opener = ""
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
            "character", "school", "animal", "event", "order", "hotel", "player", "album", "flight", "device", "course",
            "patient", "invoice", "shipment", "account", "profile", "review", "festival", "vehicle", "store", "app")
# How people name a JSON type: the checker's type -> spellings.
TYPE_WORDS = {
    "string": ("string", "str", "text", "a string", "String", "a text value", "some text", "a word", "text string",
               "chars", "string value", "a short text"),
    "integer": ("integer", "int", "an integer", "whole number", "a whole number", "Integer", "an int",
                "integer number", "number (integer)", "a count", "non-decimal number", "int value"),
    "number": ("number", "float", "a number", "decimal", "a decimal", "a float", "decimal number", "real number",
               "double", "numeric", "Number", "a decimal number", "number with decimals", "float value"),
    "boolean": ("boolean", "bool", "true/false", "true or false", "a boolean", "yes/no", "Boolean", "a bool",
                "flag", "true|false", "a true/false flag", "bool value"),
    "array": ("list of strings", "array of strings", "string list", "a list of strings", "array", "list",
              "string array", "[string]", "string[]", "a list of words", "list[str]", "an array of strings",
              "strings", "a list"),
}
# A skeleton's slot for each type, in the styles people paste.
_SLOTS = {
    "string": ('"<string>"', '"..."', '"string"', '"<text>"', '""', '"?"', "<string>", '"xxx"'),
    "integer": ("<integer>", "0", "<int>", "123", "?", "<whole number>", "1"),
    "number": ("<number>", "0.0", "<float>", "1.5", "<decimal>", "0.00"),
    "boolean": ("<boolean>", "true", "<true or false>", "false", "<bool>", "true/false", "<yes/no>"),
    "array": ('["<string>"]', "[]", '["..."]', "[<string>]", '["a", "b"]', '[""]'),
}

# Keys outside the lists above get a value of the requested type, so the type word is what counts.
GENERIC_KEYS = tuple(sorted({one.replace(" ", "_") for one, _ in bank.OBJECTS} | set(_WORDS) | {
    "label", "code", "note", "value", "size", "kind", "owner", "region", "mood", "size_label", "group", "source",
    "target", "weight_g", "zone", "amount", "total", "flag", "remark", "level_name", "shape"}))
GENERIC_VALUES = {"string": _WORDS + bank.NAMES[:10], "integer": range(0, 120), "number": (0.5, 1.25, 3.75, 9.9, 42.0),
                  "boolean": (True, False), "array": _WORDS}
# Key shapes by type: a noun ({n}), an adjective ({a}), a unit ({u}), a made-up word ({w}).
_KEY_SHAPES = {
    "string": ("{n}", "{n}_name", "{a}_{n}", "{n}_{n2}", "favorite_{n}", "{n}_code", "{n}_type", "{n}_label",
               "{n}_status", "{n}_url", "{w}", "{n}_{w}", "{n}_title", "home_{n}"),
    "integer": ("{n}_count", "num_{n}s", "{n}_id", "total_{n}s", "{n}_year", "max_{n}s", "{n}_number", "{n}s",
                "{w}_count", "{n}_level", "{n}_rank", "{w}"),
    "number": ("{n}_{u}", "{n}_price", "{n}_rate", "avg_{n}", "{n}_ratio", "{n}_score", "{w}_{u}", "{n}_weight",
               "{a}_{n}_{u}", "{w}"),
    "boolean": ("is_{a}", "has_{n}", "{a}", "{n}_enabled", "allow_{n}s", "is_{n}", "has_{w}", "{w}_on"),
    "array": ("{n}s", "{n}_list", "{n}_tags", "{a}_{n}s", "{w}s", "{n}_names", "{n}_ids"),
}


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


RECALLED_KEY_SHARE = 0.45  # of json_key's keys, those people ask for (from JSON_KEYS, with realistic values)


def json_key(rng: random.Random, *, open_only: bool = False,
             nouns: tuple[str, ...] = words.NOUNS) -> tuple[str, str, object]:
    """(key, type, value pool or None) for one requested field.

    45% are keys people ask for (with realistic values); the rest are built from open word pools
    or made up, so the model must copy the key from the prompt rather than recall it; one in five
    gets a type unlike its name (visitors ask for "age" as a number, "zip_code" as a string).
    With `open_only`, every key is built or made up: none is one the model could recall.  `nouns`
    is the pool the built keys take their nouns from (training/wordnet.py passes WordNet's)."""
    draw = rng.random()
    if open_only:  # the same draw, mapped onto the built-or-made-up range, so the rest of the stream is unchanged
        draw = RECALLED_KEY_SHARE + (1 - RECALLED_KEY_SHARE) * draw
    if draw < RECALLED_KEY_SHARE:
        kind = rng.choice(("string", "string", "integer", "integer", "number", "boolean", "array"))
        key = rng.choice(GENERIC_KEYS if rng.random() < 0.2 else tuple(JSON_KEYS[kind]))
        pool = JSON_KEYS[kind].get(key)
    else:
        kind = rng.choice(("string", "string", "integer", "integer", "number", "boolean", "array"))
        shape = rng.choice(_KEY_SHAPES[kind]) if draw < 0.85 else "{w}"
        key = shape.format(n=rng.choice(nouns), n2=rng.choice(nouns), a=rng.choice(words.ADJECTIVES),
                           u=rng.choice(words.UNIT_SUFFIXES), w=words.made_up_word(rng))
        pool = None
        if rng.random() < 0.1:
            key = _camel(key)
    if rng.random() < 0.2:
        kind, pool = rng.choice(tuple(TYPE_WORDS)), None
    return key, kind, pool


def json_value(rng: random.Random, kind: str, pool=None):
    """A value of JSON type `kind`: from the key's own pool when it has one, else a plain one of the type."""
    if pool is not None:
        return _json_value(kind, pool, rng)
    if kind == "string":
        return rng.choice((rng.choice(words.NOUNS), rng.choice(bank.NAMES), rng.choice(bank.CITIES),
                           f"{rng.choice(words.ADJECTIVES)} {rng.choice(words.NOUNS)}",
                           words.made_up_word(rng).capitalize(), rng.choice(_WORDS)))
    if kind == "integer":
        return rng.randint(0, 199) if rng.random() < 0.85 else rng.randint(200, 5000)
    if kind == "number":
        return round(rng.uniform(0, 100), rng.choice((1, 1, 2)))
    if kind == "boolean":
        return rng.random() < 0.5
    return rng.sample(list(words.NOUNS), rng.randint(1, 3))


def _json_value(kind: str, pool, rng: random.Random):
    if kind == "array":
        return rng.sample(list(pool), rng.randint(1, min(3, len(pool))))
    return rng.choice(list(pool))


def _with_article(word: str) -> str:
    if word.startswith(("a ", "an ", "true", "[", "some ", "yes", "list[", "string", "strings")) or not word[0].isalpha():
        return word
    return ("an " if word[0].lower() in "aeiou" else "a ") + word


_KEY_FORMS = (  # how one field is written: $k the (maybe quoted) key, $w the type word, $aw with an article
    "$k ($w)", "$k: $w", "$k as $aw", "$k - $w", "$k: <$w>", "$k $w", "$aw $k", "$k = $w", "$k, $aw",
    "$k which is $aw", "$k (type: $w)", "$k [$w]", "$k:$w", "$k of type $w", "$aw called $k", "$k (should be $aw)",
)


def _key_phrase(rng: random.Random, key: str, kind: str, form: str) -> str:
    word = rng.choice(TYPE_WORDS[kind])
    quoted = rng.choice((f'"{key}"', f'"{key}"', f"'{key}'", key, key, f"`{key}`"))
    return string.Template(form).substitute(k=quoted, w=word, aw=_with_article(word))


def _listing(rng: random.Random, phrases: list[str]) -> str:
    if len(phrases) == 1:
        return phrases[0]
    form = rng.randrange(6)
    if form == 0:
        return ", ".join(phrases[:-1]) + rng.choice((" and ", ", and ", " & ", " plus ")) + phrases[-1]
    if form == 1:
        return ", ".join(phrases)
    if form == 2:
        return "; ".join(phrases)
    if form == 3:
        return " and ".join(phrases)
    if form == 4:
        return "\n" + "\n".join(f"{i}. {p}" for i, p in enumerate(phrases, 1))
    return "\n" + "\n".join(rng.choice(("- ", "* ", "")) + p for p in phrases)


def _skeleton(rng: random.Random, keys: list[tuple[str, str]]) -> str:
    if rng.random() < 0.15:  # TypeScript-style: unquoted keys, type names
        names = {"string": "string", "integer": rng.choice(("int", "integer")), "number": rng.choice(("number", "float")),
                 "boolean": "boolean", "array": "string[]"}
        return "{" + ", ".join(f"{k}: {names[kind]}" for k, kind in keys) + "}"
    style = rng.randrange(len(_SLOTS["string"]))  # one slot style per skeleton, as a person writes it
    slots = {kind: options[style % len(options)] for kind, options in _SLOTS.items()}
    return "{" + ", ".join(f'"{k}": {slots[kind]}' for k, kind in keys) + "}"


_JSON_CONSTRAINTS = (
    "{Reply|Answer|Respond} with {JSON|the JSON|valid JSON} only.", "No explanation.", "Only the JSON, please.",
    "No prose.", "Just the JSON.", "Valid JSON only.", "Don't add anything else.", "Output only JSON.",
    "No extra text.", "JSON only, no comments.",
)
_A_ENTITY = "{a|one|an example|a single} [{fictional|made-up|sample|random|example|imaginary|typical|fake} ]$entity"
_JSON_FRAMES = (
    "{Return|Give me|Create|Make|Generate|Produce|Write|Output|Build|Send back|Show me|Provide|Draft} {a|one} "
    "{JSON object|JSON|json object|JSON record|JSON dict|json|JSON document|object in JSON} {for|describing|about|"
    "representing|of|that describes} " + _A_ENTITY + " {with|using|that has|containing|including|having} {the keys|"
    "keys|fields|the fields|properties|these keys:|the following fields:|these fields:|attributes} $keys{.|}[ $constraint]",
    "{I need|I want|I'd like|Can you give me|Could you make|Please produce|We need|Give me} {a|one} {JSON object|JSON|"
    "json|JSON record} {with|having|that has} $keys{,|} {for|describing|about} " + _A_ENTITY + "{.|?}",
    "{I need|Need|I want} " + _A_ENTITY + " {record|entry|object|item} {as a JSON object|in JSON|as JSON}{;|:|,|.} "
    "{the|its} {fields|keys|properties} {are|should be} $keys{.|}",
    "{Fill in|Complete|Fill out|Populate} this JSON {template|skeleton|shape|structure|schema} for " + _A_ENTITY + ": $skeleton",
    "{Here is|This is} {the|my|a} {shape|format|schema|structure|template}: $skeleton{.|} {Give me|Make|Return|Create} "
    "{an example|one|a filled-in copy} for " + _A_ENTITY + ".",
    "{Return|Write|Give me} JSON {that matches|following|in the shape of|shaped like} $skeleton {for " + _A_ENTITY + "|}",
    "{Use|Follow} this {format|shape}: $skeleton {Describe|Make up|Invent} " + _A_ENTITY + ".",
    "$Entity as JSON{.|:} {Keys|Fields|Properties|Include}: $keys",
    "{A|One} [{fictional|made-up|sample} ]$entity{,|} {in|as} JSON{,|:} with $keys",
    "{Keys|Fields}: $keys. {Make|Give me|Return|Write} {a JSON object|JSON|one JSON object} for " + _A_ENTITY + ".",
    "With $keys, {make|write|generate|build} a JSON object {for|about|describing} " + _A_ENTITY + ".",
    "{Can|Could|Would} you {write|make|create|output|generate} a JSON object {for|describing|about} " + _A_ENTITY +
    " {with|that has|containing} $keys?",
    "What would a JSON object for " + _A_ENTITY + " look like with $keys?",
    "json{:| -| for a $entity:} $keys",
    "JSON for " + _A_ENTITY + "{:| -| with} $keys",
    "$entity json {pls|please|plz} - $keys",
    "{Respond|Answer|Reply} {in|with} JSON{.|:} {Include|Use|Give|Put in} $keys {for|about} " + _A_ENTITY + "{.|}",
    "{Only|Just} JSON{,|:} {please|no prose|no explanation}{.|:} {A|One} $entity with $keys.",
    "{I'm building|I'm testing|I am writing|For|I'm working on} {an app|a form|a database|a website|a test|my project|"
    "an API|a demo}{.|,} {I need|Give me|Send me|Please make} " + _A_ENTITY + " {as JSON|in JSON|as a JSON object} "
    "with $keys{.|}",
    "{Describe|Represent|Model} " + _A_ENTITY + " as {a JSON object|JSON} with $keys.",
    "{Make up|Invent|Come up with} " + _A_ENTITY + " and {return|give|write} it as {a JSON object|JSON} with $keys.",
    "{Generate|Create} a JSON object{.|:} {It should have|It must have|Include|Give it} $keys. {It describes|Make it "
    "about|It is for} " + _A_ENTITY + ".",
    "$constraint {Make|Give me|Create} " + _A_ENTITY + " with $keys.",
)


JSON_KEY_COUNTS = (1, 2, 2, 2, 3, 3, 3, 4, 4, 5)


def make_json_paraphrase(rng: random.Random, *, counts: tuple[int, ...] = JSON_KEY_COUNTS,
                         open_only: bool = False, nouns: tuple[str, ...] = words.NOUNS) -> Task:
    count = rng.choice(counts)
    keys: list[tuple[str, str]] = []
    pools = {}
    while len(keys) < count:
        key, kind, pool = json_key(rng, open_only=open_only, nouns=nouns)
        if key not in (k for k, _ in keys):
            keys.append((key, kind))
            pools[key] = pool
    form = rng.choice(_KEY_FORMS)
    phrases = [_key_phrase(rng, key, kind, form) for key, kind in keys]
    entity = rng.choice(ENTITIES) if rng.random() < 0.6 else rng.choice(nouns).replace("_", " ")
    frame = rng.choice(_JSON_FRAMES)
    text = expand(rng, frame, entity=entity, Entity=entity[0].upper() + entity[1:], keys=_listing(rng, phrases),
                  skeleton=_skeleton(rng, keys), constraint=expand(rng, rng.choice(_JSON_CONSTRAINTS)))
    text = text.replace(" a a", " an a").replace(" a e", " an e").replace(" a i", " an i").replace(" a o", " an o")
    prompt = polite(rng, text[0].upper() + text[1:])
    value = {key: json_value(rng, kind, pools[key]) for key, kind in keys}
    properties = {key: ({"type": "array", "items": {"type": "string"}} if kind == "array" else {"type": kind})
                  for key, kind in keys}
    schema = {"type": "object", "properties": properties, "required": [k for k, _ in keys],
              "additionalProperties": False}
    return Task("json_paraphrase", prompt, json.dumps(value), schema)


# ---- arithmetic ------------------------------------------------------------------------------
OPERATIONS = {  # op -> (symbol, phrasings of "A op B" with $a and $b)
    "add": ("+", ("$a plus $b", "$a + $b", "$a and $b added together", "the sum of $a and $b", "$a added to $b",
                  "$a+$b", "$a and $b together", "$b more than $a", "$a plus $b altogether")),
    "sub": ("-", ("$a minus $b", "$a - $b", "$b subtracted from $a", "the difference between $a and $b",
                  "$a take away $b", "$b less than $a", "$a less $b", "$a with $b taken away")),
    "mul": ("*", ("$a times $b", "$a * $b", "$a x $b", "$a multiplied by $b", "the product of $a and $b", "$a*$b",
                  "$a X $b", "$a groups of $b")),
    "div": ("/", ("$a divided by $b", "$a / $b", "$a split into $b equal parts", "the quotient of $a and $b",
                  "$a/$b", "$a shared equally by $b", "$a over $b")),
}
_BARE_FRAMES = (
    "{What is|What's|How much is|Calculate|Compute|Work out|Find|Evaluate|Tell me|Solve|Give me} $expr{?|.|}",
    "$expr {=|equals|is} {?|what?|how much?|...}",
    "$expr{| =|?| = ?}",
    "{Can you|Could you|Please|Would you} {calculate|compute|work out|tell me|figure out|solve} $expr{?|.}",
    "{Quick math|Math question|Arithmetic|Math|Homework question|Question}: $expr{?|}",
    "{Do you know|I wonder|I want to know|Tell me} what $expr {is|equals|comes to}{?|.}",
    "{Help me with|I need help with|Check my math:} $expr{.|?|}",
    "{What does $expr come to|What do you get for $expr|What's the answer to $expr|What's the result of $expr|What "
    "does $expr equal}?",
)
_VERB_FRAMES = {
    "add": ("{Add|Sum} $a and $b{.|}", "Add $a to $b{.|}", "What do you get when you add $a and $b?",
            "What do $a and $b {add up to|make|come to|sum to}?", "If you add $b to $a, what do you get?",
            "{Please add|Can you add|Could you add} $a and $b{?|.}", "{Put|Count} $a and $b together{.|}"),
    "sub": ("Subtract $b from $a{.|}", "Take $b away from $a{.|}", "What do you get when you subtract $b from $a?",
            "What is left if you take $b from $a?", "If I take $b away from $a, what {remains|is left}?",
            "{Please subtract|Can you subtract} $b from $a{?|.}", "How much is $b less than $a?"),
    "mul": ("Multiply $a by $b{.|}", "Multiply $a and $b{.|}", "What do you get when you multiply $a by $b?",
            "What is $a groups of $b?", "{Please multiply|Can you multiply} $a by $b{?|.}",
            "What do $a lots of $b make?"),
    "div": ("Divide $a by $b{.|}", "Split $a into $b equal {parts|groups}. How {big|many} is each{?|}",
            "What do you get when you divide $a by $b?", "{Please divide|Can you divide} $a by $b{?|.}",
            "How many groups of $b can you make from $a?", "If $a is shared by $b, how much does each get?"),
}
# Word problems: $who is the subject ("Mia", "I", "my brother"); $has / $gets agree with it.
# ($Who, $has, $gets, $gives, $needs, $s: the verb ending, $do_have, $who2: the subject again)
_WHO = (("$name", "has", "gets", "gives", "needs", "s", "does $pron have", "$pron"),
        ("I", "have", "get", "give", "need", "", "do I have", "I"),
        ("we", "have", "get", "give", "need", "", "do we have", "we"),
        ("my {sister|brother|friend|cousin|neighbor|aunt|uncle}", "has", "gets", "gives", "needs", "s",
         "does {she|he} have", "{she|he}"),
        ("a {farmer|baker|teacher|shopkeeper|gardener|librarian}", "has", "gets", "gives", "needs", "s",
         "are left", "they"))
_STORY_FRAMES = {
    "add": (
        "$Who $has $a $things. {Then|Later|After that|Next|Today} $who2 $gets $b more. How many $things $do_have {now|in "
        "total|altogether}?",
        "{There are|I have|We have|The class has} $a $things and {add|get|find|bring} $b more. How many $things {are "
        "there|do we have} now?",
        "$Who {picked|collected|found|bought|made|baked} $a $things {yesterday|on Monday|in the morning|last week} and "
        "$b {today|on Tuesday|in the afternoon|this week}. How many {$things |}{is that|in total|altogether}?",
        "{A|One} $box {holds|has} $a $things and {another|a second one|the other} {holds|has} $b. How many $things {are "
        "there|in all|altogether}?",
        "{There were|There are} $a $things {on the table|in the room|at the party|in the garden} and $b more {arrive|come|"
        "are added}. How many {are there now|in total}?",
    ),
    "sub": (
        "$Who $has $a $things and {$gives away|loses|eats|sells|uses|breaks} $b{ of them|}. How many {$things |}{are "
        "left|remain|$do_have now|$do_have left}?",
        "{There are|There were} $a $things in {a|the} $box. $b {are|were} taken out. How many {are|were} left{ in the $box|}?",
        "$Who $needs $a $things {but|and} {$has|already $has} $b. How many more {$things |}{are needed|to go}?",
        "{A|The} {bus|train|boat|room|shop} {has|had} $a people{ in it| on it|}. $b {leave|get off|go home}. How many "
        "{are still there|stay|remain}?",
        "$Who {had|started with} $a $things. {After|At the end of} the day $b were gone. How many {are left|remain}?",
    ),
    "mul": (
        "{There are|I have|We have|$Who $has} $a $boxes {with|and each holds|holding} $b $things{ each| in each|}. How "
        "many $things {are there|in total|altogether}?",
        "$Who {fill$s|pack$s|buy$s} $a $boxes{,| and} each with $b $things. How many $things {is that|in all}?",
        "{A|The} {garden|field|hall|classroom} has $a rows with $b $things in each row. How many $things {are there|in all}?",
        "$a {children|friends|people|students} each {bring|have|get} $b $things. How many $things {is that|are there} "
        "{in total|altogether}?",
    ),
    "div": (
        "$Who {share$s|split$s|divide$s} $a $things {equally|evenly} {among|between} $b {friends|people|kids|children}. "
        "How many {does each get|$things does each one get|each}?",
        "$a $things {go|are packed|are put} into $b $boxes{ equally| evenly| with the same number in each}. How many "
        "{are in each $box|go in each}?",
        "$a $things are {shared|split} between $b {teams|groups|tables}. How many {does each get|for each}?",
        "$Who $has $a $things and put$s them in groups of $b. How many groups {are there|does that make}?",
    ),
}


def operands(rng: random.Random, op: str) -> tuple[int, int, int]:
    if op == "add":  # every sum below 120 is a fact the small model must hold
        a, b = rng.randint(1, 60), rng.randint(1, 60)
        return a, b, a + b
    if op == "sub":
        a = rng.randint(2, 70)
        b = rng.randint(1, a - 1)
        return a, b, a - b
    if op == "mul":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return a, b, a * b
    b, answer = rng.randint(2, 12), rng.randint(2, 12)
    return b * answer, b, answer


def say(rng: random.Random, n: int, words_share: float = 0.3) -> str:
    if rng.random() >= words_share:
        return str(n)
    return rng.choice(("a hundred", "one hundred")) if n == 100 else number_words(n)


def make_math_paraphrase(rng: random.Random) -> Task:
    op = rng.choice(tuple(OPERATIONS))
    a, b, answer = operands(rng, op)
    words_share = rng.choice((0.0, 0.0, 0.5, 1.0))  # some prompts write numbers as words, some all of them
    say_a, say_b = say(rng, a, words_share), say(rng, b, words_share)
    shape = rng.random()
    if shape < 0.4:
        expr = expand(rng, rng.choice(OPERATIONS[op][1]), a=say_a, b=say_b)
        prompt = choose(rng, _BARE_FRAMES, expr=expr)
    elif shape < 0.6:
        prompt = choose(rng, _VERB_FRAMES[op], a=say_a, b=say_b)
    else:
        name = rng.choice(bank.NAMES)
        who, has, gets, gives, needs, ending, do_have, pron = rng.choice(_WHO)
        if rng.random() < 0.5:
            _, things = rng.choice(bank.OBJECTS)
        else:
            things = words.plural(rng.choice(words.COUNTABLE))
        box, boxes = rng.choice(bank.CONTAINERS)
        pronoun = bank.PRONOUNS[name]
        who_text = expand(rng, who, name=name)
        fill = dict(name=name, pron=pronoun, who2=expand(rng, pron, pron=pronoun, name=name))
        prompt = choose(rng, _STORY_FRAMES[op], a=say_a, b=say_b, Who=who_text[0].upper() + who_text[1:],
                        who2=fill["who2"], has=has, gets=gets, gives=gives, needs=needs, s=ending,
                        do_have=expand(rng, do_have, pron=pronoun), things=things, box=box, boxes=boxes)
    prompt = polite(rng, prompt[0].upper() + prompt[1:])
    symbol = OPERATIONS[op][0]
    return Task("math_paraphrase", prompt, f"{a} {symbol} {b} = {answer}. The answer is {answer}.", answer)


# ---- acrostic --------------------------------------------------------------------------------
def _letters_given(rng: random.Random, letters: str) -> str:
    """The letters as a visitor might give them."""
    form = rng.randrange(11)
    if form == 0:
        return f"the word {letters}"
    if form == 1:
        return f'"{letters}"'
    if form == 2:
        return letters
    if form == 3:
        return rng.choice((", ", " ", "-", ". ", ",", " - ")).join(letters)
    if form == 4:
        return "the letters " + ", ".join(letters[:-1]) + " and " + letters[-1]
    if form == 5:
        return f"{letters} (one line per letter)"
    if form == 6:
        return f"'{letters}'"
    if form == 7:
        return f"the letters of {letters}"
    if form == 8:
        return ".".join(letters) + "."
    if form == 9:
        return f"{letters} ({', '.join(letters)})"
    return f"the name {letters}"


_ACROSTIC_FRAMES = (
    "{Write|Compose|Create|Make|Give me|Draft} {an acrostic|an acrostic poem|a short acrostic|an acrostic verse} {about|"
    "on|for} $topic {for|using|spelling|with} $given{.|}",
    "{Write|Compose} a poem about $topic {whose|where the|in which the} {lines|first letters|initials} {start with|"
    "begin with|spell} $given{.|}",
    "{Acrostic|Acrostic poem|Acrostic please}{:|,| -} $given{,|.} {Topic|Theme|Subject|About}: $topic{.|}",
    "{Can you|Could you|Please|Would you} write an acrostic {for|of|spelling|on} $given {about|on} $topic{?|.}",
    "{I'd like|I want|I need|Give me} an acrostic {poem |}{about|on} $topic. {The lines should start with|Use|It "
    "spells|The first letters spell|Spell} $given{.|}",
    "{Write|Make} $n lines about $topic{,|.} {starting with|beginning with|each starting with} $spaced{.|}",
    "{Lines beginning with|First letters:|Start each line with|Begin the lines with} $spaced{,|.} {a poem |}about $topic{.|}",
    "{Spell out|Spell} $given with the first letters of {a poem|the lines of a poem|each line} about $topic{.|}",
    "{Write|Compose|Make} {a|an} {acrostic|acrostic poem} {using|for|with} $given{.|}",
    "{Write|Compose} a {poem|short poem|little poem} {whose|where the} {first letters|lines} {spell|start with} $given{.|}",
    "{Write|Give me} {a $n-line|an acrostic} poem {where|in which} each line {starts|begins} with {a letter|the next "
    "letter} of $given{.|} {Make it about|The theme is|Topic:} $topic{.|}",
    "{Each line|Every line} {should start|must begin|starts} with {a letter of|the letters of} $given{,|.} {in order|one "
    "per line}{.|,} {Write about|The subject is|About} $topic{.|}",
    "$given {acrostic|acrostic poem}{ about $topic|, about $topic|}{ please|}{.|}",
    "{Topic|Theme}: $topic. {Acrostic|Letters|Word}: $given{.|}",
    "{An acrostic|An acrostic poem} about $topic{, please|}{:|.} {Use|Letters:} $given{.|}",
)
# Lines for a topic the bank does not list: any subject gets these.
_ANY_TOPIC = (("dreams", "days", "hours", "voices", "lights", "colors", "moments", "stories", "songs", "paths",
               "hearts", "hands", "friends", "skies", "roads"),
              ("wait for us", "shine again", "carry us along", "bring a smile", "stay with me", "light the way",
               "turn to gold", "call my name", "never fade", "grow and change", "come and go", "make us whole"))


def _acrostic_topic(rng: random.Random) -> str:
    draw = rng.random()
    if draw < 0.5:
        return rng.choice(tuple(bank.TOPICS))
    if draw < 0.75:
        from .subjects import SUBJECTS  # subjects.py imports nothing from here

        return rng.choice([s for kind in SUBJECTS.values() for s in kind])
    noun = rng.choice(words.NOUNS)
    return rng.choice((f"the {noun}", words.plural(noun), f"a {noun}", noun))


def _acrostic_line(rng: random.Random, letter: str, topic: str, used: set) -> str:
    if topic in bank.TOPICS:
        return topic_line(rng, letter, topic, used)
    nouns, verbs = _ANY_TOPIC
    noun = rng.choice([n for n in nouns if n not in used] or list(nouns))
    used.add(noun)
    return f"{rng.choice(bank.LETTER_WORDS[letter])} {noun} {rng.choice(verbs)}"


def make_acrostic_paraphrase(rng: random.Random) -> Task:
    topic = _acrostic_topic(rng)
    if rng.random() < 0.7:
        letters = rng.choice([w for w in ACROSTIC_WORDS if 3 <= len(w) <= 8])
    else:
        letters = "".join(rng.choice("ABCDEFGHIJKLMNOPRSTUVWY") for _ in range(rng.randint(3, 7)))
    n = say(rng, len(letters), 0.5)
    spaced = rng.choice((", ", " ", "-", ", ", " and ")).join(letters)
    prompt = polite(rng, choose(rng, _ACROSTIC_FRAMES, topic=topic, given=_letters_given(rng, letters), n=n,
                                 spaced=spaced))
    used: set = set()
    response = "\n".join(_acrostic_line(rng, letter, topic, used) for letter in letters)
    return Task("acrostic_paraphrase", prompt[0].upper() + prompt[1:], response, letters)


GENERATORS = {
    "json_paraphrase": make_json_paraphrase,
    "math_paraphrase": make_math_paraphrase,
    "acrostic_paraphrase": make_acrostic_paraphrase,
}
# Which template family's checker scores each paraphrase family.
CHECKED_AS = {"json_paraphrase": "json", "math_paraphrase": "math", "acrostic_paraphrase": "acrostic"}
