"""Open-ended English families: the everyday questions a visitor types, answered in a few fluent sentences.

describe X, explain X in one sentence, a short poem about X (subjects.py), and the question
shapes of question_bank.py: why (is X important / do people ...), how (does X work / do I ...),
tips for X, what makes a good X, your favourite X, what should I ... .  Prompts are built with
the grammar, so each request arrives in many wordings.  Subjects beyond the table
(EXTRA_SUBJECTS, and scenes such as "a foggy morning by the sea") are answered in their kind's
sentences alone, which teaches the model to carry whatever subject it is asked about into fluent
sentences instead of falling back to a memorised topic.  No checker: these are scored by reading
them.

    task = make_describe(random.Random(0))
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from . import question_bank as qb
from .grammar import choose
from .paraphrase import polite
from .subjects import KIND_SENTENCES, POEM_LINES, SUBJECTS
from .types import Task

EXTRA_SUBJECTS = {
    "animal": ("giraffes", "koalas", "sharks", "eagles", "bears", "deer", "camels", "octopuses", "zebras", "tigers",
               "hedgehogs", "swans", "squirrels", "crabs", "snails", "pandas", "bats", "seals", "goats", "ducks"),
    "place": ("a castle", "a harbor", "a farm", "a cave", "a lighthouse", "a jungle", "a zoo", "a hospital",
              "an airport", "a bakery", "a stadium", "a cinema", "a playground", "a bridge town", "a volcano island"),
    "nature": ("the tides", "fog", "lightning", "waterfalls", "the northern lights", "the dawn", "sunsets", "hail",
               "earthquakes", "the seasons", "glaciers", "coral reefs"),
    "thing": ("a lamp", "a camera", "a ladder", "a backpack", "a watch", "a violin", "a boat", "a train", "a robot",
              "a refrigerator", "a compass", "a printer", "a microscope", "a windmill", "an elevator"),
    "food": ("pasta", "strawberries", "oranges", "ice cream", "noodles", "cake", "tomatoes", "carrots", "pancakes",
             "salad", "yogurt", "popcorn"),
    "idea": ("art", "courage", "patience", "language", "money", "education", "freedom", "memory", "curiosity",
             "honesty", "teamwork", "creativity", "justice", "poetry"),
    "person": ("a plumber", "a mail carrier", "a judge", "a baker", "a sailor", "a dentist", "a poet", "a gardener",
               "a police officer", "a bus driver"),
    "activity": ("knitting", "skiing", "a wedding", "a concert", "a sleepover", "a family dinner", "a school trip",
                 "gardening on weekends", "surfing", "a board game night"),
}


@dataclass(frozen=True)
class Subject:
    text: str  # as asked: "dogs", "a clock", "the moon"
    kind: str
    definition: str | None  # one true sentence, when the table has one

    @property
    def bare(self) -> str:
        """The subject without its article: "a clock" -> "clock"."""
        return self.text.split(" ", 1)[1] if self.text.startswith(("a ", "an ", "the ")) else self.text

    @property
    def plural(self) -> bool:
        last = self.bare.split(" ")[-1]
        singular_s = ("news", "mathematics", "physics", "chess", "glass", "grass", "gas", "yoga", "series", "bus")
        return (not self.text.startswith(("a ", "an ")) and last.endswith("s") and not last.endswith(("ss", "us", "is"))
                and last not in singular_s and self.kind not in ("idea", "activity"))


def fill(line: str, subject: Subject, **extra: str) -> str:
    """A bank sentence with the subject and the words that agree with it filled in."""
    x = subject.text
    many = subject.plural
    return line.format(x=x, X=x[0].upper() + x[1:], x_bare=subject.bare, be="are" if many else "is", it="they" if many else "it",
                       its="their" if many else "its", them="them" if many else "it", does="do" if many else "does",
                       has="have" if many else "has", **extra)


def _subject(rng: random.Random, *, known_only: bool = False, kinds: tuple[str, ...] | None = None) -> Subject:
    kind = rng.choice(kinds or tuple(SUBJECTS))
    if not known_only and rng.random() < 0.35:
        return Subject(rng.choice(EXTRA_SUBJECTS[kind]), kind, None)
    subject = rng.choice(tuple(SUBJECTS[kind]))
    return Subject(subject, kind, SUBJECTS[kind][subject])


def _scene(rng: random.Random) -> Subject:
    weather, time, place = rng.choice(qb.SCENE_WEATHER), rng.choice(qb.SCENE_TIMES), rng.choice(qb.SCENE_PLACES)
    article = "an" if weather[0] in "aeiou" else "a"
    return Subject(f"{article} {weather} {time} {place}", "scene", None)


def _asked(subject: Subject) -> dict[str, str]:
    """Prompt slots for a subject: $x and the words that agree with it."""
    many = subject.plural
    return {"x": subject.text, "be": "are" if many else "is", "does": "do" if many else "does", "s": "" if many else "s"}


def _first_upper(text: str) -> str:
    return text[0].upper() + text[1:]


_DESCRIBE = (
    "{Describe|Tell me about|Write a few sentences about|Write a short description of|Give me a short paragraph"
    " about|Talk a little about|Write a little about|Say something about} $x{.|}",
    "What can you tell me about $x?",
    "{I'd like|I want} {to know|to hear} {a bit |something }about $x.",
    "{Could|Can} you describe $x{ for me|}?",
    "Tell me something {interesting|nice|new} about $x{.|}",
    "{Write|Give me} {two|three|a couple of} sentences about $x{.|}",
    "What $be $x like?",
)
_EXPLAIN = (
    "{Explain|Define|Describe} $x in {one|a single} sentence{.|}",
    "What is $x? {Answer|Reply|Explain} in one sentence.",
    "In one sentence, {what is|explain|describe} $x{?|.}",
    "{Give me|Write} a one-sentence {explanation|definition|description} of $x{.|}",
    "{Briefly|Quickly}, what $be $x{?|}",
    "{Explain|Describe} $x {to a child|simply|in simple words|for a beginner}{.|}",
    "{Summarize|Sum up} what $x {is|means}{.|}",
    "What does $x mean{?|}",
)
_POEM = (
    "{Write|Compose|Give me} a {short |little |}poem about $x{.|}",
    "{A|A short} poem about $x{, please|}.",
    "{Can|Could} you write a {short |}poem {about|on} $x?",
    "Write {four|4} lines of {verse|poetry} about $x{.|}",
    "{I'd love|I want} a {short |}poem about $x.",
    "{Write|Make} a {rhyming|gentle|happy} poem about $x{.|}",
)
_WHY_IMPORTANT = ("Why $be $x important{?|}", "Why do we need $x?", "Why $does $x matter{?|}",
                  "{Tell me|Explain} why $x $be important{.|}", "What makes $x so important?")
_WHY_PEOPLE = ("Why do people $vp{?|}", "Why do {so many|some|many} people $vp?", "{Tell me|Explain} why people $vp{.|}",
               "What makes people $vp?")
_HOW_WORKS = ("How $does $x work{?|}", "{Explain|Tell me} how $x work$s{.|}", "Can you explain how $x work$s?")
_HOW_TO = ("How {do|can|should} I $vp{?|}", "How to $vp{?|}", "What is the best way to $vp?",
           "{Any|Some} {tips|advice} on how to $vp?", "I want to $vp. {Where do I start|How do I begin}?",
           "{Tell me|Explain} how to $vp{.|}")
_TIPS = ("Give me {some|a few} {tips|advice|pointers} {for|on|about} $x{.|}", "{Any|Some} {tips|advice} for $x?",
         "What {tips|advice} do you have for $x?", "How do I prepare for $x?", "{Help me|I need help} with $x{.|}")
_GOOD = ("What makes a good $x{?|}", "What {makes|is} a {great|good} $x?", "How can you tell a good $x{?|}",
         "Describe a good $x{.|}", "What should a good $x be like?")
_FAVORITE = ("What is your favorite $x?", "{Describe|Tell me about} your favorite $x{.|}", "Do you have a favorite $x?",
             "Which $x do you like best?")
_SUGGEST = ("What should I $vp{?|}", "{Any|Some} ideas for what to $vp?", "{Can|Could} you suggest what to $vp?",
            "I don't know what to $vp. {Any ideas|Help}?", "Help me choose what to $vp{.|}")


def make_describe(rng: random.Random) -> Task:
    if rng.random() < 0.15:
        scene = _scene(rng)
        prompt = polite(rng, choose(rng, _DESCRIBE[:4], **_asked(scene)))
        first = rng.choice((f"{_first_upper(scene.text)} has a mood of its own.",
                            f"On {scene.text.split(' ', 1)[1]}, the world looks a little different.",
                            f"{_first_upper(scene.text)} can be beautiful in a quiet way."))
        return Task("describe", prompt, " ".join([first, *rng.sample(qb.SCENE_SENTENCES, 2)]), None)
    return describe_task(rng, _subject(rng))


def describe_task(rng: random.Random, subject: Subject) -> Task:
    prompt = polite(rng, choose(rng, _DESCRIBE, **_asked(subject)))
    extra = rng.sample(KIND_SENTENCES[subject.kind], 2 if subject.definition else 3)
    sentences = ([subject.definition] if subject.definition else []) + [fill(s, subject) for s in extra]
    return Task("describe", prompt, " ".join(sentences), None)


def make_explain(rng: random.Random) -> Task:
    subject = _subject(rng, known_only=True)
    prompt = polite(rng, choose(rng, _EXPLAIN, **_asked(subject)))
    return Task("explain", prompt, subject.definition, None)


def make_poem(rng: random.Random) -> Task:
    return poem_task(rng, _subject(rng))


def poem_task(rng: random.Random, subject: Subject) -> Task:
    lines = POEM_LINES[subject.kind]  # two couplets: lines 0-3, or the closing couplet 4-5 then 2-3
    chosen = lines[0:4] if rng.random() < 0.6 else [*lines[4:6], *lines[2:4]]
    prompt = polite(rng, choose(rng, _POEM, **_asked(subject)))
    return Task("poem", prompt, "\n".join(fill(line, subject) for line in chosen), None)


def make_why(rng: random.Random) -> Task:
    if rng.random() < 0.4:
        vp = rng.choice(qb.PEOPLE_DO)
        prompt = polite(rng, choose(rng, _WHY_PEOPLE, vp=vp))
        return Task("why", prompt, f"{rng.choice(qb.WHY_PEOPLE).format(vp=vp)} {rng.choice(qb.WHY_MORE)}", None)
    return why_important_task(rng, _subject(rng))


def why_important_task(rng: random.Random, subject: Subject) -> Task:
    prompt = polite(rng, choose(rng, _WHY_IMPORTANT, **_asked(subject)))
    reason = fill(rng.choice(qb.WHY_IMPORTANT[subject.kind]), subject)
    return Task("why", prompt, f"{reason} {fill(rng.choice(KIND_SENTENCES[subject.kind]), subject)}", None)


def make_how(rng: random.Random) -> Task:
    if rng.random() < 0.5:
        vp = rng.choice(qb.PEOPLE_LEARN)
        prompt = polite(rng, choose(rng, _HOW_TO, vp=vp))
        you = vp.replace(" my ", " your ")
        steps = [rng.choice(qb.HOW_TO).format(vp=you), *rng.sample(qb.HOW_TO_MORE, 2)]
        return Task("how", prompt, " ".join(steps), None)
    return how_works_task(rng, _subject(rng, kinds=tuple(qb.HOW_WORKS), known_only=rng.random() < 0.7))


def how_works_task(rng: random.Random, subject: Subject) -> Task:
    prompt = polite(rng, choose(rng, _HOW_WORKS, **_asked(subject)))
    sentences = ([subject.definition] if subject.definition else []) + [
        fill(s, subject) for s in rng.sample(qb.HOW_WORKS[subject.kind], 1 if subject.definition else 2)]
    return Task("how", prompt, " ".join(sentences), None)


def make_tips(rng: random.Random) -> Task:
    x = rng.choice(qb.TIP_SUBJECTS)
    prompt = polite(rng, choose(rng, _TIPS, x=x))
    t1, t2, t3 = rng.sample(qb.TIPS, 3)
    first = rng.choice(qb.TIPS_INTRO).format(x=x, t1=t1, t2=t2, t3=t3)
    return Task("tips", prompt, f"{_first_upper(first)} {rng.choice(qb.TIPS_MORE)}", None)


def make_good(rng: random.Random) -> Task:
    x = rng.choice(tuple(qb.GOOD)) if rng.random() < 0.8 else rng.choice(("chair", "map", "plan", "tool", "bag", "day"))
    return good_task(rng, x, qb.GOOD.get(x, qb.GOOD_ANY))


def good_task(rng: random.Random, x: str, qualities: tuple[str, ...]) -> Task:
    """"What makes a good <x>?" answered with three of `qualities`."""
    qualities = rng.sample(qualities, 3)
    prompt = polite(rng, choose(rng, _GOOD, x=x))
    first = rng.choice((f"A good {x} is {qualities[0]}, {qualities[1]} and {qualities[2]}.",
                        f"A good {x} needs to be {qualities[0]} and {qualities[1]}, and it helps to be {qualities[2]}."))
    return Task("good", prompt, f"{first} {rng.choice(qb.GOOD_MORE)}", None)


def make_favorite(rng: random.Random) -> Task:
    x = rng.choice(tuple(qb.FAVORITES))
    picks, why = qb.FAVORITES[x]
    pick = rng.choice(picks)
    prompt = polite(rng, choose(rng, _FAVORITE, x=x))
    answer = (f"My favorite {x} is {pick}, because {why}. I don't have real tastes as a small model, but "
              f"{pick} is a choice many people love." if rng.random() < 0.3 else
              f"My favorite {x} is {pick}. I like it because {why}.")
    return Task("favorite", prompt, answer, None)


def make_suggest(rng: random.Random) -> Task:
    vp = rng.choice(tuple(qb.SUGGESTIONS))
    s1, s2, s3 = rng.sample(qb.SUGGESTIONS[vp], 3)
    prompt = polite(rng, choose(rng, _SUGGEST, vp=vp))
    first = rng.choice(qb.SUGGEST_INTRO).format(s1=s1, s2=s2, S2=_first_upper(s2), s3=s3)
    return Task("suggest", prompt, f"{first} {rng.choice(qb.SUGGEST_MORE)}", None)


# The kinds whose sentences, poems and reasons read well for any noun of the kind (the others' are
# written for leisure activities and everyday ideas, and WordNet's "act of ..." nouns are neither),
# and the kinds asked "what makes a good X?" (GOOD_BY_KIND's qualities fit any person or thing).
OPEN_SUBJECT_KINDS = ("animal", "food", "nature", "place")
OPEN_GOOD_KINDS = tuple(qb.GOOD_BY_KIND)
_SAME_PLURAL = ("sheep", "deer", "fish", "moose", "bison", "salmon", "trout", "cod", "squid", "shrimp")


def plural_noun(word: str) -> str | None:
    """English plural of a regular noun ("fox" -> "foxes", "pony" -> "ponies"); None where it is irregular."""
    if word in _SAME_PLURAL or word == "ox" or word.endswith(("man", "mouse", "goose", "child", "foot", "tooth", "ies")):
        return None
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    return word + "s"


def article_for(word: str, definition: str) -> str:
    """"a " or "an " for a countable noun (its definition begins "A ..." or "An ..."), "" for any other."""
    if not definition.startswith(("A ", "An ")):
        return ""
    return "an " if word[0] in "aeiou" else "a "


def open_subject_task(rng: random.Random, word: str, kind: str, definition: str) -> Task | None:
    """A question shape asked about any noun of an open list (training/wordnet.py gives WordNet's);
    None where no shape fits the noun.

    The closed subject lists above let the model answer "What makes a good bag?" when asked about a
    friend: a recalled subject fits as well as the asked one.  With thousands of subjects, only
    copying the asked one works, as the JSON keys' open word pools taught copying keys.  Countable
    nouns are asked with their article ("a lantern"), so the answer's "A lantern ..." holds the same
    word token as the prompt (a capitalised word splits differently, tokenizer.py); animals are
    asked in the plural, as the animal sentences are written.
    """
    article = article_for(word, definition)
    shapes = []
    if article and kind in OPEN_GOOD_KINDS:
        shapes.append(lambda: good_task(rng, word, qb.GOOD_BY_KIND[kind]))
    if kind in OPEN_SUBJECT_KINDS:
        if kind == "animal":
            text = plural_noun(word) if article else None
        else:
            text = article + word
        if text:
            subject = Subject(text, kind, definition)
            shapes += [lambda: describe_task(rng, subject), lambda: why_important_task(rng, subject),
                       lambda: poem_task(rng, subject)]
            if kind in qb.HOW_WORKS:
                shapes.append(lambda: how_works_task(rng, subject))
    return rng.choice(shapes)() if shapes else None


GENERATORS = {"describe": make_describe, "explain": make_explain, "poem": make_poem, "why": make_why, "how": make_how,
              "tips": make_tips, "good": make_good, "favorite": make_favorite, "suggest": make_suggest}
