"""Visitor-style paraphrases (prompts/tasks/paraphrase.py), the held-out paraphrase evaluation set and the
visitor development set's place outside training."""

from __future__ import annotations

import random

import pytest

from prompts.tasks.paraphrase_eval import FAMILIES as EVAL_FAMILIES
from prompts.tasks.paraphrase_eval import PER_FAMILY, SCORED_AS, paraphrase_eval_set
from prompts.tasks import HELDOUT, PARAPHRASE_FAMILIES, check_task, sample_tasks, split_of
from prompts.tasks.grammar import expand
from prompts.tasks.paraphrase import CHECKED_AS, GENERATORS, number_words
from prompts.tasks.visitor_dev import visitor_dev_set


def test_grammar_expands_nested_alternatives_and_optional_parts():
    rng = random.Random(0)
    seen = {expand(rng, "{a|b {c|d}}[ e| f] $x", x="{json}") for _ in range(300)}
    assert seen == {f"{head}{tail} {{json}}" for head in ("a", "b c", "b d") for tail in ("", " e", " f")}


def test_number_words():
    assert [number_words(n) for n in (0, 7, 19, 20, 42, 99, 305)] == [
        "zero", "seven", "nineteen", "twenty", "forty-two", "ninety-nine", "three hundred and five"]


@pytest.mark.parametrize("family", PARAPHRASE_FAMILIES)
def test_paraphrase_responses_pass_the_template_checker(family):
    rng = random.Random(5)
    for _ in range(200):
        task = GENERATORS[family](rng)
        assert check_task(task, task.response) is True, (task.prompt, task.response)


@pytest.mark.parametrize("family", PARAPHRASE_FAMILIES)
def test_paraphrases_are_many_and_varied(family):
    """Compositional, not a short list: 500 draws give hundreds of distinct prompts and sentence openings."""
    rng = random.Random(1)
    prompts = [GENERATORS[family](rng).prompt for _ in range(500)]
    assert len(set(prompts)) > 450
    assert len({" ".join(p.split()[:2]) for p in prompts}) > 40


def test_json_paraphrases_write_keys_and_types_several_ways():
    rng = random.Random(2)
    prompts = [GENERATORS["json_paraphrase"](rng).prompt for _ in range(400)]
    assert any("<integer>" in p for p in prompts)  # a skeleton to fill in
    assert any(": int" in p for p in prompts)
    assert any("(integer)" in p or "(an integer)" in p for p in prompts)
    assert any("\n" in p for p in prompts)  # keys as a list, one per line


def test_math_paraphrases_use_digits_and_words():
    rng = random.Random(3)
    prompts = [GENERATORS["math_paraphrase"](rng).prompt for _ in range(400)]
    assert any(any(w in p for w in (" plus ", " times ")) for p in prompts)
    assert any(any(w in p for w in ("twenty", "thirty", "forty", "seven")) for p in prompts)


def test_eval_set_is_fixed_distinct_and_checkable():
    items = paraphrase_eval_set()
    assert items == paraphrase_eval_set()
    assert len(items) == PER_FAMILY * len(EVAL_FAMILIES)
    assert len({t.prompt for t in items}) == len(items)
    assert set(SCORED_AS) == set(CHECKED_AS) and SCORED_AS == CHECKED_AS
    # The checkers reject an empty answer: a score is earned, not given.
    assert all(check_task(t, "") is False for t in items)


def test_eval_and_dev_prompts_are_held_out_and_never_in_the_training_stream():
    """The evaluation set and the visitor development set (prompts/tasks/visitor_dev.py), against one stream."""
    eval_prompts = {t.prompt for t in paraphrase_eval_set()}
    dev_prompts = {t.prompt for t in visitor_dev_set()}
    assert all(split_of(p) == HELDOUT for p in eval_prompts | dev_prompts)
    stream = {t.prompt for t in sample_tasks(30_000, seed=0, weights={f: 4.0 for f in PARAPHRASE_FAMILIES})}
    assert stream & eval_prompts == set()
    assert stream & dev_prompts == set()
    # ... and the wording is each set's own: not even the paraphrase generators' exact prompts.
    rng = random.Random(0)
    generated = {GENERATORS[f](rng).prompt for f in PARAPHRASE_FAMILIES for _ in range(20_000)}
    assert generated & eval_prompts == set()
    assert generated & dev_prompts == set()


def test_json_keys_are_open_so_the_model_must_copy_them():
    """Half the keys come from open word pools or are made up: no list is short enough to memorise,
    and a key seen once is the usual case."""
    from collections import Counter

    from prompts.tasks.paraphrase import JSON_KEYS

    rng = random.Random(4)
    keys = Counter(k for _ in range(1000) for k in GENERATORS["json_paraphrase"](rng).answer["required"])
    listed = {k for table in JSON_KEYS.values() for k in table}
    assert len(keys) > 1000 and sum(n == 1 for n in keys.values()) > 700
    assert sum(n for k, n in keys.items() if k not in listed) > 0.4 * sum(keys.values())
    assert any("_" not in k and k.isalpha() and k not in listed for k in keys)  # made-up words too


def test_json_types_are_asked_for_in_many_spellings_and_followed():
    rng = random.Random(6)
    spellings = {"true/false", "a decimal number", "whole number", "list[str]", "float"}
    seen = set()
    for _ in range(1500):
        task = GENERATORS["json_paraphrase"](rng)
        seen |= {s for s in spellings if s in task.prompt}
        assert check_task(task, task.response)
    assert seen == spellings


def test_word_problems_agree_with_their_subject():
    rng = random.Random(7)
    prompts = [GENERATORS["math_paraphrase"](rng).prompt for _ in range(3000)]
    assert not any(bad in p for p in prompts for bad in ("I has", "We has", "I splits", "I fills", "we shares"))
    assert any(p.startswith(("I have", "We have")) or " I have " in p for p in prompts)
