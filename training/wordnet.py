"""Everyday definitions from WordNet, as Debian's `wordnet-base` installs it (/usr/share/wordnet).

WordNet is a lexical database of English written by people at Princeton: every sense of a noun
has a short definition (its gloss) and a lexicographer file that says what it is (an animal, an
artifact, a feeling, ...).  This module keeps the nouns people use often (those tagged at least
MIN_TAGS times in the sense-tagged corpus that ships with it, cntlist.rev: about 4,000 with a
usable definition), the definition of each one's most common sense, and maps the lexicographer
file onto the project's subject kinds, so an answer can go on in its kind's sentences
(prompts/tasks/subjects.py).  Licence: the WordNet 3.0 licence allows
using, copying, modifying and distributing the database for any purpose with its notice kept;
training/CORPUS.md records it.  Nothing of it is committed: `python -m training.wordnet` writes
runs/corpus/wordnet.jsonl from the installed package, and the training machine gets that file.

    python -m training.wordnet                        # writes runs/corpus/wordnet.jsonl
    tasks = wordnet_tasks(load_records(path), 1000, seed=0)
    tasks = open_subject_tasks(load_records(path), 1000, seed=0)   # why / good / describe / poem about any noun
    tasks = json_key_tasks(load_records(path), 1000, seed=0)       # visitor JSON with keys of WordNet's nouns

Each record is {"word": "library", "kind": "thing", "text": "A library is a depository built to
contain books and other materials for reading and study."}.
"""

from __future__ import annotations

import argparse
import random
import re
from functools import cache
from pathlib import Path

from prompts.tasks import TRAIN, Task, split_of
from prompts.tasks.grammar import choose
from prompts.tasks.open_english import (OPEN_GOOD_KINDS, OPEN_SUBJECT_KINDS, Subject, article_for, fill,
                                        open_subject_task, plural_noun)
from prompts.tasks.paraphrase import polite, make_json_paraphrase
from prompts.tasks.subjects import KIND_SENTENCES

from .jsonl import read_or_build_jsonl, write_jsonl

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECORDS = ROOT / "runs" / "corpus" / "wordnet.jsonl"
SOURCE = Path("/usr/share/wordnet")
MAX_WORDS = 22  # a definition longer than this is a paragraph, not a sentence a small model can learn
MIN_TAGS = 3  # times a noun is tagged in the sense corpus: 3 keeps ~4,800 nouns, 1 keeps ~11,500 (many rare)

# WordNet's noun lexicographer files (lexnames, numbered as in data.noun) -> the project's subject kinds.
LEXFILE_KIND = {
    4: "activity", 5: "animal", 6: "thing", 7: "idea", 8: "thing", 9: "idea", 10: "idea", 11: "activity",
    12: "idea", 13: "food", 14: "idea", 15: "place", 16: "idea", 17: "nature", 18: "person", 19: "nature",
    20: "nature", 22: "idea", 26: "idea", 27: "thing", 28: "idea",
}
# Lexicographer files of count nouns ("a fox", "a lamp", "a teacher"); the others read as mass nouns
# ("gravity is ...", "coffee is ..."): WordNet does not mark countability, and this is right far more often.
_COUNTABLE_FILES = {5, 6, 8, 14, 15, 17, 18, 20}
_NO_ARTICLE = ("a ", "an ", "the ", "any ", "one ", "someone", "something", "somebody", "anything", "each ", "every ")
KIND_FOLLOW_UP = ("animal", "food", "nature", "place")  # kinds whose generic sentences read well after any definition


def tag_counts(text: str) -> dict[str, int]:
    """lemma -> how often its noun senses are tagged in the sense corpus (cntlist.rev)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        key, _, count = line.split()
        lemma, _, sense = key.partition("%")
        if sense.startswith("1:"):  # a noun sense
            counts[lemma] = counts.get(lemma, 0) + int(count)
    return counts


def parse_index(text: str, counts: dict[str, int], min_tags: int = MIN_TAGS) -> dict[str, str]:
    """lemma -> the data.noun offset of its most common sense, for plain lemmas tagged at least min_tags times."""
    senses = {}
    for line in text.splitlines():
        if line.startswith(" ") or not line.strip():
            continue  # the licence header
        parts = line.split()
        lemma, pointers = parts[0], int(parts[3])
        offsets = parts[4 + pointers + 2:]
        if counts.get(lemma, 0) >= min_tags and re.fullmatch(r"[a-z]+(_[a-z]+)?", lemma):
            senses[lemma] = offsets[0]
    return senses


def parse_data(text: str, wanted: set[str]) -> dict[str, tuple[int, str, tuple[str, ...]]]:
    """offset -> (lexicographer file number, gloss, the synset's words as written) for the wanted offsets."""
    found = {}
    for line in text.splitlines():
        offset = line[:8]
        if offset in wanted:
            head, _, gloss = line.partition(" | ")
            fields = head.split()
            count = int(fields[3], 16)
            written = tuple(fields[4 + 2 * i] for i in range(count))
            found[offset] = (int(fields[1]), gloss.strip(), written)
    return found


def definition(word: str, lexfile: int, gloss: str) -> str | None:
    """"library", 6, "a room where books are kept; ..." -> "A library is a room where books are kept." (None when the
    gloss is not one plain phrase, or the word is a plural or an adjective used as a noun)."""
    text = gloss.split(";")[0].strip()
    text = re.sub(r"^\([^)]*\)\s*", "", text)  # "(physics) the force ..." -> "the force ..."
    if not text or len(text.split()) > MAX_WORDS or re.search(r"[()\"`/]|\be\.g\.|\bi\.e\.", text):
        return None
    if text.startswith(("people ", "those ", "the people")):  # "the rich": an adjective standing for people
        return None
    if text.startswith(("in ", "of ", "on ", "by ", "at ", "to ", "for ", "when ", "as ")):  # "in Christianity, ..."
        return None
    if lexfile not in _COUNTABLE_FILES:
        return f"{word[0].upper()}{word[1:]} is {text}."
    last = word.split(" ")[-1]
    if last.endswith("s") and not last.endswith(("ss", "us", "is")):
        return None  # "swimming trunks": a plural takes "are", and its gloss does not say so
    if text.startswith("the "):
        text = "a " + text[4:]  # "a hurler is the person who ..." -> "... a person who ..."
    elif not text.startswith(_NO_ARTICLE):
        text = ("an " if text[0] in "aeiou" else "a ") + text
    return f"{'An' if word[0] in 'aeiou' else 'A'} {word} is {text}."


def build_records(source: Path = SOURCE) -> list[dict]:
    if not (source / "index.noun").is_file():
        raise FileNotFoundError(f"WordNet is not installed: `apt-get install wordnet-base` (looked in {source})")
    counts = tag_counts((source / "cntlist.rev").read_text(encoding="utf-8"))
    senses = parse_index((source / "index.noun").read_text(encoding="utf-8"), counts)
    glosses = parse_data((source / "data.noun").read_text(encoding="utf-8"), set(senses.values()))
    records = []
    for lemma, offset in sorted(senses.items()):
        lexfile, gloss, written = glosses[offset]
        kind = LEXFILE_KIND.get(lexfile)
        word = lemma.replace("_", " ")
        if any(w.lower() == lemma and w != w.lower() for w in written):
            continue  # a name ("Philadelphia", "EEG"): WordNet's index lowercases it
        text = definition(word, lexfile, gloss) if kind else None
        if text:
            records.append({"word": word, "kind": kind, "text": text})
    return records


def write_records(out: Path = DEFAULT_RECORDS, source: Path = SOURCE) -> Path:
    return write_jsonl(build_records(source), out)


@cache
def load_records(path: str = str(DEFAULT_RECORDS)) -> tuple[dict, ...]:
    """The records of a WordNet file; built from the installed package first if the file is missing."""
    return read_or_build_jsonl(Path(path), build_records)


_DEFINE = (
    "What is $a$w?", "{Define|Explain} $w{.|}", "What does {\"$w\"|the word $w|$w} mean{?|}",
    "{Explain|Define} $w in one sentence{.|}", "What is the meaning of {the word |}$w?", "{Give me|Write} a "
    "{definition|one-sentence definition} of $w{.|}", "{Briefly|Quickly}, what is $a$w?", "$w: what is it?",
)
_TELL = ("{Tell me about|Describe|Write a few sentences about|Talk a little about} $a$w{.|}",
         "What can you tell me about $a$w?")


def wordnet_task(record: dict, rng: random.Random) -> Task:
    word, text = record["word"], record["text"]
    article = article_for(word, text)
    if rng.random() < 0.7:
        return Task("define", polite(rng, choose(rng, _DEFINE, w=word, a=article)), text, None)
    prompt = polite(rng, choose(rng, _TELL, w=word, a=article))
    if record["kind"] not in KIND_FOLLOW_UP:
        return Task("define", prompt, text, None)
    subject = Subject(article + word, record["kind"], text)
    return Task("define", prompt, f"{text} {fill(rng.choice(KIND_SENTENCES[record['kind']]), subject)}", None)


def wordnet_tasks(records, count: int, *, seed: int) -> list[Task]:
    """`count` tasks drawn from the records, each word as likely as any other."""
    rng = random.Random(seed)
    return [wordnet_task(record, rng) for record in rng.choices(records, k=count)]


GOOD_ONLY_SHARE = 0.2  # of open-subject tasks drawn from the people and things, which are asked only "a good X"


def open_subject_tasks(records, count: int, *, seed: int) -> list[Task]:
    """`count` question-shape tasks about WordNet's nouns (open_english.open_subject_task): why is X
    important, what makes a good X, describe X, a poem about X, how does X work.  Most come from the
    animals, foods, places and nature, whose sentences fit any noun of the kind; a fifth from the people
    and things, asked what makes a good one.  A prompt of the held-out split (the evaluation sets and
    the off-family samples among them) is drawn again."""
    rng = random.Random(seed)
    shaped = [r for r in records if r["kind"] in OPEN_SUBJECT_KINDS]
    good_only = [r for r in records if r["kind"] in OPEN_GOOD_KINDS and r["kind"] not in OPEN_SUBJECT_KINDS]
    if not shaped or not good_only:
        raise ValueError("open_subject_tasks needs WordNet records of every subject kind")

    def draw() -> Task | None:
        record = rng.choice(good_only if rng.random() < GOOD_ONLY_SHARE else shaped)
        return open_subject_task(rng, record["word"], record["kind"], record["text"])

    return _training_split(draw, count)


def _training_split(draw, count: int) -> list[Task]:
    """`count` tasks of `draw()` (None: no task), drawing again any prompt of the held-out split (the
    evaluation sets and the off-family samples among them)."""
    tasks: list[Task] = []
    while len(tasks) < count:
        task = draw()
        if task is not None and split_of(task.prompt) == TRAIN:
            tasks.append(task)
    return tasks


_KEY_NOUN = re.compile(r"[a-z]+(?: [a-z]+)?")


def key_nouns(records) -> tuple[str, ...]:
    """WordNet's nouns as words of JSON keys: one or two lowercase words (joined by "_": `ice_cream`)
    whose plural is the noun and an s, as the key shapes write it (`num_{n}s`)."""
    def regular(word: str) -> bool:
        last = word.split()[-1]
        return plural_noun(last) == last + "s"

    return tuple(sorted({r["word"].replace(" ", "_") for r in records
                         if _KEY_NOUN.fullmatch(r["word"]) and regular(r["word"])}))


def json_key_tasks(records, count: int, *, seed: int) -> list[Task]:
    """`count` visitor-style JSON requests (paraphrase.make_json_paraphrase) whose built keys take their
    nouns from WordNet's ~3,000 (`capacity_count`, `harvest_id`) instead of words.py's ~370.

    A visitor's key is often an everyday word no training pool has, split into pieces the model has
    rarely copied (`capacity` is `ca|pac|ity`); the model shipped before these keys writes keys of one
    token 97% of the time and of four 48% (experiments/README.md, "A few keys decide a visitor JSON score").  With
    thousands of nouns a key is seldom one seen before, so copying it piece by piece is what is learnt.
    A prompt of the held-out split is drawn again."""
    nouns = key_nouns(records)
    if not nouns:
        raise ValueError("json_key_tasks needs WordNet records of plain nouns")
    rng = random.Random(seed)
    return _training_split(lambda: make_json_paraphrase(rng, nouns=nouns), count)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(DEFAULT_RECORDS))
    parser.add_argument("--source", default=str(SOURCE), help="WordNet's dict folder (index.noun, data.noun)")
    args = parser.parse_args(argv)
    try:
        out = write_records(Path(args.out), Path(args.source))
    except FileNotFoundError as exc:
        parser.exit(1, f"{exc}\n")
    records = load_records(str(out))
    kinds = {k: sum(r["kind"] == k for r in records) for k in sorted({r["kind"] for r in records})}
    print(f"wrote {len(records)} definitions to {out} ({kinds}; {out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
