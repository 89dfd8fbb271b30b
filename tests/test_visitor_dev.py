"""The visitor development set (prompts/tasks/visitor_dev.py): fixed, written apart from the evaluation set, and
what `training.evaluate --visitor-set dev` runs.  That it stays out of training is checked with the evaluation
set's prompts, against one training stream (tests/test_paraphrase.py)."""

from __future__ import annotations

import json

import pytest

from prompts.tasks import check_task
from prompts.tasks.paraphrase_eval import paraphrase_eval_set
from prompts.tasks.visitor_dev import PER_FAMILY, visitor_dev_set


def _right_answer(task) -> str:
    """A correct response, built from what the checker is given."""
    if task.family == "json_paraphrase":
        value = {"string": "Ada", "integer": 3, "number": 2.5, "boolean": True, "array": ["a"]}
        return json.dumps({k: value[task.answer["properties"][k]["type"]] for k in task.answer["required"]})
    if task.family == "math_paraphrase":
        return f"The answer is {task.answer}."
    return "\n".join(f"{letter} line of the poem" for letter in task.answer)


def test_dev_set_is_fixed_distinct_and_checkable():
    items = visitor_dev_set()
    assert items == visitor_dev_set()
    assert [t.family for t in items] == [f for f in ("json_paraphrase", "math_paraphrase", "acrostic_paraphrase")
                                         for _ in range(PER_FAMILY)]
    assert len({t.prompt for t in items}) == len(items)
    # Scored by the project's checkers: an empty answer fails, a right one passes.
    assert all(check_task(t, "") is False for t in items)
    assert all(check_task(t, _right_answer(t)) is True for t in items)
    # A smaller set is the first tasks of each family of the fixed one (so it is held out too).
    assert visitor_dev_set(5) == [t for f in range(3) for t in items[f * PER_FAMILY: f * PER_FAMILY + 5]]
    with pytest.raises(ValueError, match="1 to 60"):
        visitor_dev_set(PER_FAMILY + 1)


def test_dev_set_is_written_apart_from_the_evaluation_set():
    """Its own keys and acrostic words, and no prompt of the evaluation set: choosing on it never looks there."""
    dev, evaluation = visitor_dev_set(), paraphrase_eval_set()
    assert {t.prompt for t in dev} & {t.prompt for t in evaluation} == set()

    def keys(tasks):
        return {k for t in tasks if t.family == "json_paraphrase" for k in t.answer["required"]}

    def words(tasks):
        return {t.answer for t in tasks if t.family == "acrostic_paraphrase"}

    assert keys(dev) & keys(evaluation) == set() and len(keys(dev)) > 20
    assert words(dev) & words(evaluation) == set() and len(words(dev)) > 12


def test_evaluate_runs_the_dev_set_when_asked_and_refuses_more_than_it_has(capsys):
    from training.evaluate import evaluation_items, main

    items = evaluation_items([], 1, demo_seeds=0, seed=0, paraphrases=3, visitor_set="dev")
    assert [i["prompt"] for i in items] == [t.prompt for t in visitor_dev_set(3)]
    assert {i["scored_as"] for i in items} == {"json", "math", "acrostic"}
    default = evaluation_items([], 1, demo_seeds=0, seed=0, paraphrases=3)
    assert [i["prompt"] for i in default] == [t.prompt for t in paraphrase_eval_set(3)]
    with pytest.raises(SystemExit):
        main(["--visitor-set", "dev", "--paraphrases", "61"])
    assert "at most 60" in capsys.readouterr().err
