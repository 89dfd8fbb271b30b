"""The task generators, their checkers and the probe suite (prompts/tasks, prompts/probes)."""

from __future__ import annotations

import json
import random

import pytest

from prompts.demos import DEMOS
from prompts.probes import REGIMES, ProbePrompt, check_answer, probe_suite
from prompts.tasks import (
    DEMO_FAMILIES,
    ENGLISH_FAMILIES,
    FAMILIES,
    GENERATORS,
    HELDOUT,
    PROBE_REGIMES,
    TRAIN,
    Task,
    check_task,
    heldout_tasks,
    iter_tasks,
    sample_tasks,
    split_of,
)
from prompts.tasks import bank, checks
from prompts.tasks.demo_families import demo_task


# ---- generators ----------------------------------------------------------------------------------
def test_twelve_families():
    assert DEMO_FAMILIES == ("acrostic", "sentences", "doctest_function", "fact_list", "story", "haiku")
    assert PROBE_REGIMES == REGIMES == ("math", "code_function", "code_task", "factual", "open", "json")


def test_sampling_is_deterministic_for_a_seed():
    assert sample_tasks(60, seed=3) == sample_tasks(60, seed=3)
    assert sample_tasks(60, seed=3) != sample_tasks(60, seed=4)


def test_mix_covers_every_family():
    assert {t.family for t in sample_tasks(400, seed=0)} == set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_reference_responses_pass_their_checker(family):
    for task in iter_tasks_list(family, 25):
        verdict = check_task(task, task.response)
        assert verdict is (None if family in ("open", *ENGLISH_FAMILIES) else True), (task.prompt, task.response)


def iter_tasks_list(family, count, split=TRAIN):
    out = []
    for task in iter_tasks(family, seed=11, split=split):
        out.append(task)
        if len(out) == count:
            return out


def test_the_demo_prompts_come_from_the_family_templates():
    """Each demo prompt is one the generators produce, so the model is trained on its exact shape."""
    prompts = {t.prompt for t in sample_tasks(60_000, seed=0)}
    missing = [d.name for d in DEMOS if d.prompt not in prompts]
    assert missing == []


# ---- the held-out split --------------------------------------------------------------------------
def test_split_is_a_fixed_function_of_the_prompt():
    tasks = sample_tasks(300, seed=1)
    assert all(split_of(t.prompt) == TRAIN for t in tasks)
    held = heldout_tasks("math", 30)
    assert all(split_of(t.prompt) == HELDOUT for t in held)
    assert len({t.prompt for t in held}) == 30
    assert held == heldout_tasks("math", 30)  # a fixed list


def test_demo_prompts_are_always_train():
    assert all(split_of(d.prompt) == TRAIN for d in DEMOS)


def test_heldout_facts_are_taught_in_training():
    """Factual probes ask for facts the training data states, under another question."""
    trained = [t for t in iter_tasks_list("factual", 3000)]
    for task in heldout_tasks("factual", 25):
        assert any(checks.check_fact(task.answer, t.response) and t.prompt != task.prompt for t in trained), task.prompt


def test_unknown_family_or_split_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown task family"):
        next(iter_tasks("poetry", seed=0))
    with pytest.raises(ValueError, match="unknown split"):
        next(iter_tasks("math", seed=0, split="test"))


# ---- checkers accept right answers and reject wrong ones ------------------------------------------
def first(family):
    return GENERATORS[family](random.Random(5))


def test_acrostic_checker():
    assert checks.check_acrostic("OCA", "Old waves\nCalm gulls\nAmber tides")
    assert checks.check_acrostic("OCA", "1. Old waves\n2. Calm gulls\n3. Amber tides")
    assert not checks.check_acrostic("OCA", "Calm gulls\nOld waves\nAmber tides")  # wrong order
    assert not checks.check_acrostic("OCA", "Old waves\nCalm gulls")  # a line missing
    assert not checks.check_acrostic("OCA", "Old waves\nCalm gulls\nAmber tides\nBlue seas")  # one too many


def test_sentence_count_checker():
    assert checks.check_sentence_count(2, "The sky is blue. Light scatters.")
    assert not checks.check_sentence_count(2, "The sky is blue. Light scatters. Air does it.")
    assert not checks.check_sentence_count(2, "The sky is blue. Light scatters")  # unfinished


def test_doctest_checker_runs_the_examples():
    task = first("doctest_function")
    assert checks.check_doctests(task.answer["name"], task.answer["count"], task.response)
    name = task.answer["name"]
    assert not checks.check_doctests("other_name", task.answer["count"], task.response)
    assert not checks.check_doctests(name, task.answer["count"] + 1, task.response)  # too few examples
    broken = task.response.replace("    return", "    return None  #")
    assert not checks.check_doctests(name, task.answer["count"], broken)


def test_numbered_list_checker():
    items = tuple(bank.LIST_CATEGORIES["oceans"])
    good = "1. Pacific Ocean: It is big.\n2. Arctic Ocean: It is cold."
    assert checks.check_numbered_list(items, 2, good)
    assert not checks.check_numbered_list(items, 3, good)
    assert not checks.check_numbered_list(items, 2, "1. Pacific Ocean: It is big.\n2. Pacific Ocean: Again.")
    assert not checks.check_numbered_list(items, 2, "1. Pacific Ocean: It is big.\n2. Lake Geneva: It is a lake.")
    assert not checks.check_numbered_list(items, 2, "1. Pacific Ocean: It is big.\n3. Arctic Ocean: Cold.")


def test_story_checker():
    task = first("story")
    assert checks.check_same_first_and_last_sentence(task.response)
    assert not checks.check_same_first_and_last_sentence(task.response + " Then it rained.")
    assert not checks.check_same_first_and_last_sentence("A cat sat. A cat sat.")  # no story between


def test_haiku_checker_counts_syllables():
    task = first("haiku")
    assert checks.check_haiku(task.response)
    lines = task.response.split("\n")
    assert not checks.check_haiku("\n".join([lines[0], lines[1] + " again", *lines[2:]]))  # 8 syllables
    assert not checks.check_haiku("\n".join(lines[:3]))  # no explanation


@pytest.mark.parametrize("topic", sorted(bank.HAIKU_LINES))
def test_every_haiku_line_has_the_right_syllable_count(topic):
    fives, sevens = bank.HAIKU_LINES[topic]
    assert [checks.line_syllables(line) for line in fives] == [5] * len(fives)
    assert [checks.line_syllables(line) for line in sevens] == [7] * len(sevens)


@pytest.mark.parametrize("word,count", [("puddles", 2), ("circle", 2), ("pale", 1), ("waves", 1), ("changes", 2),
                                        ("rolled", 1), ("wanted", 2), ("machine", 2), ("stones", 1)])
def test_syllable_counter(word, count):
    assert checks.count_syllables(word) == count


def test_math_checker_reads_the_final_answer():
    assert checks.check_number(19, "12 + 7 = 19. The answer is 19.")
    assert checks.check_number(19, "So she has 19 apples")
    assert not checks.check_number(19, "12 + 7 = 19. The answer is 18.")
    assert not checks.check_number(19, "I do not know.")


def test_code_checker_runs_hidden_tests_in_a_subprocess():
    tests = ("assert add_two(1) == 3", "assert add_two(-2) == 0")
    assert checks.check_code_tests(tests, "```python\ndef add_two(x):\n    return x + 2\n```")
    assert not checks.check_code_tests(tests, "```python\ndef add_two(x):\n    return x + 3\n```")
    assert not checks.check_code_tests(tests, "def add_two(x) return x")  # syntax error
    assert not checks.run_python("while True:\n    pass", timeout_s=1.0)  # stopped by the timeout


def test_factual_checker_matches_whole_words():
    assert checks.check_fact("Rome", "The capital of Italy is Rome.")
    assert not checks.check_fact("Rome", "The capital of Italy is Romeo.")
    assert not checks.check_fact("Rome", "The capital of Italy is Milan.")


def test_json_checker_follows_the_schema():
    task = first("json")
    schema = task.answer
    assert checks.check_json_schema(schema, task.response)
    assert checks.check_json_schema(schema, "```json\n" + task.response + "\n```")
    value = json.loads(task.response)
    key = next(iter(value))
    assert not checks.check_json_schema(schema, task.response[:-1])  # does not parse
    assert not checks.check_json_schema(schema, json.dumps({k: v for k, v in value.items() if k != key}))
    assert not checks.check_json_schema(schema, json.dumps({**value, "extra": 1}))
    assert not checks.check_json_schema(schema, json.dumps(list(value)))
    age = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"],
           "additionalProperties": False}
    assert checks.check_json_schema(age, '{"age": 3}')
    assert not checks.check_json_schema(age, '{"age": true}')  # a bool is not an integer
    assert not checks.check_json_schema(age, '{"age": "3"}')


def test_demo_tasks_are_checkable():
    acrostic = demo_task("acrostic")
    assert check_task(acrostic, "\n".join(f"{c}ne line" for c in "OCEANS"))
    assert not check_task(acrostic, "\n".join(f"{c}ne line" for c in "OCEAN"))


# ---- the probe suite API -------------------------------------------------------------------------
def test_probe_suite_shape_and_ids():
    probes = probe_suite()
    assert len(probes) == 6 * 20
    assert all(isinstance(p, ProbePrompt) for p in probes)
    assert [p.prompt_id for p in probes[:3]] == ["math-000", "math-001", "math-002"]
    assert len({p.prompt_id for p in probes}) == len(probes)
    for regime in REGIMES:
        rows = [p for p in probes if p.regime == regime]
        assert len(rows) == 20 and len({p.prompt for p in rows}) == 20
        assert sum(p.split == "exploratory" for p in rows) == 10
        assert {p.split for p in rows} == {"exploratory", "confirmatory"}


def test_probe_suite_is_fixed_and_prefix_stable():
    assert probe_suite(["json", "math"], per_regime=10) == probe_suite(["json", "math"], per_regime=10)
    short, long = probe_suite(["factual"], per_regime=5), probe_suite(["factual"], per_regime=20)
    assert short == long[:5]


def test_probes_are_held_out_from_training():
    probes = probe_suite()
    assert all(split_of(p.prompt) == HELDOUT for p in probes)
    trained = {t.prompt for t in sample_tasks(20_000, seed=0)}
    assert not trained & {p.prompt for p in probes}


def test_probe_answers_have_the_documented_types():
    by_regime = {p.regime: p for p in probe_suite(per_regime=1)}
    assert isinstance(by_regime["math"].answer, int)
    assert isinstance(by_regime["factual"].answer, str)
    assert isinstance(by_regime["json"].answer, dict) and by_regime["json"].answer["type"] == "object"
    assert all(line.startswith("assert ") for line in by_regime["code_task"].answer)
    assert by_regime["open"].answer is None


def test_check_answer_accepts_reference_and_rejects_wrong_answers():
    for regime in REGIMES:
        for probe, task in zip(probe_suite([regime], per_regime=4), heldout_tasks(regime, 4)):
            assert probe.prompt == task.prompt
            expected = None if regime == "open" else True
            assert check_answer(probe, task.response) is expected
            if regime != "open":
                assert check_answer(probe, "I am not sure.") is False


def test_probe_suite_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown regime"):
        probe_suite(["poetry"])
    with pytest.raises(ValueError, match="per_regime"):
        probe_suite(per_regime=0)


def test_task_is_a_plain_frozen_record():
    task = Task("math", "q", "a", 1)
    with pytest.raises(AttributeError):
        task.prompt = "other"
