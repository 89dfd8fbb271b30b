"""Arithmetic worksheets (prompts/tasks/drills.py): right answers, the right checker, a short canvas."""

from __future__ import annotations

import random
import re

from prompts.tasks import check_task, sample_tasks
from prompts.tasks.drills import PROBLEMS, make_math_drill
from prompts.tasks.paraphrase import number_words
from training.data import NAMED_MIXES


def _worksheets(count: int, seed: int = 0):
    rng = random.Random(seed)
    return [make_math_drill(rng) for _ in range(count)]


def test_every_line_is_a_true_fact_asked_in_the_prompt_in_order():
    for task in _worksheets(400):
        lines = task.response.splitlines()
        assert PROBLEMS[0] <= len(lines) <= PROBLEMS[1]
        position = 0
        for line, answer in zip(lines, task.answer, strict=True):
            a, op, b, equals, result = line.split()
            assert equals == "=" and int(result) == answer == int(eval(f"{a} {op} {b}"))  # noqa: S307 (digits only)
            # both operands are in the prompt, as digits or words, after the previous problem's
            ends = []
            for operand in (a, b):
                forms = (operand, number_words(int(operand)), "a hundred" if operand == "100" else operand)
                found = [m for form in forms
                         if (m := re.compile(rf"(?<![\w-]){re.escape(form)}(?![\w-])").search(task.prompt, position))]
                assert found, (task.prompt, line, operand)
                ends.append(min(m.end() for m in found))
            position = max(ends)
        assert check_task(task, task.response) is True


def test_checker_rejects_a_wrong_result_a_missing_line_and_prose():
    task = _worksheets(1, seed=3)[0]
    lines = task.response.splitlines()
    a, op, b, _, result = lines[0].split()
    wrong = "\n".join([f"{a} {op} {b} = {int(result) + 1}", *lines[1:]])
    assert check_task(task, wrong) is False
    assert check_task(task, "\n".join(lines[:-1])) is False
    assert check_task(task, "The answers are " + ", ".join(map(str, task.answer))) is False


def test_worksheets_ask_with_digits_words_and_operation_words():
    prompts = [t.prompt for t in _worksheets(300, seed=1)]
    assert any(re.search(r"\d+ \+ \d+", p) for p in prompts)
    assert any("forty" in p or "thirty" in p for p in prompts)
    assert any(" take away " in p or " minus " in p for p in prompts)
    assert len(set(prompts)) == len(prompts)


def test_named_mixes_made_before_the_worksheets_do_not_draw_them():
    """A named mix means what it trained: only the mixes made for the worksheets draw any."""
    without_drills = {name for name, weights in NAMED_MIXES.items()
                      if weights.get("math_drill", 1.0) == 0 and weights.get("json_key_drill", 1.0) == 0}
    assert without_drills == {"base", "visitor", "one-mix", "open-mix", "open-mix-2", "open-mix-3", "json-math-finetune"}
    tasks = sample_tasks(3000, seed=0, weights=NAMED_MIXES["open-mix-2"])
    assert not any(t.family == "math_drill" for t in tasks)
