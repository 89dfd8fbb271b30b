"""Drills: answers that pack many of what the built-in model gets wrong, so it meets them often.

Arithmetic worksheets (`math_drill`) and JSON objects with many keys it has never seen
(`json_key_drill`).

A visitor's arithmetic goes wrong in the result, not in the setup (`29 - 22 = 41`): every number
below 200 is one token, so each of the ~6,000 sums and differences in the visitors' range is a fact
of its own, and one question-and-answer example holds one of them.  A worksheet holds five to eight,
asked the ways the visitor phrasings ask them (digits or words, "plus", "take away", "x"), and
answered one line each in the form the other math families use (`39 + 48 = 87`), so the fact the
model learns here is the one it needs there.  The operand ranges are the visitor family's.

    task = make_math_drill(random.Random(0))
    task.prompt      # "Solve these, one per line: 39 + 48, twelve minus seven, ..."
    task.response    # "39 + 48 = 87\n12 - 7 = 5\n..."
    task.answer      # [87, 5, ...]
"""

from __future__ import annotations

import random
import re

from .grammar import choose, expand
from .paraphrase import OPERATIONS, operands, polite, say, make_json_paraphrase
from .types import Task

PROBLEMS = (5, 8)  # problems per worksheet: eight answer lines still fit the 64-token training canvas
_OP_WEIGHTS = {"add": 3, "sub": 3, "mul": 1, "div": 1}  # sums and differences are the facts visitors miss
_HEADS = (
    "{Solve these|Work these out|Answer each of these|Calculate each one|Do these sums|Find each answer|"
    "Work out each of these|Compute these}{:|, one per line:| for me:|.}",
    "{Quick math practice|Math drill|Homework check|Arithmetic practice|Practice problems|Warm-up}{:|, answer each one:| -}",
    "{Can you|Could you|Please} {solve|answer|work out|do} these{?|:| for me?}",
    "{What are the answers to these|What do these come to|What does each of these come to}{?|:}",
)
_JOINS = (", ", ", ", "; ", "\n")
_LINE = re.compile(r"^\s*(\d+)\s*([-+*/])\s*(\d+)\s*=\s*(\d+)\s*$")


def make_math_drill(rng: random.Random) -> Task:
    ops = rng.choices(tuple(_OP_WEIGHTS), weights=tuple(_OP_WEIGHTS.values()), k=rng.randint(*PROBLEMS))
    words_share = rng.choice((0.0, 0.0, 0.3, 1.0))  # digits, a mix, or every number in words
    numbered = rng.random() < 0.3
    asked, lines, answers = [], [], []
    for i, op in enumerate(ops, 1):
        a, b, answer = operands(rng, op)
        symbol, phrasings = OPERATIONS[op]
        # a symbol phrasing most of the time, as worksheets are written; words when numbers are words
        phrasing = rng.choice(phrasings[:2] if words_share == 0.0 else phrasings)
        item = expand(rng, phrasing, a=say(rng, a, words_share), b=say(rng, b, words_share))
        asked.append(f"{i}) {item}" if numbered else item)
        lines.append(f"{a} {symbol} {b} = {answer}")
        answers.append(answer)
    join = "\n" if numbered else rng.choice(_JOINS)
    head = choose(rng, _HEADS)
    prompt = polite(rng, head + ("\n" if join == "\n" else " ") + join.join(asked))
    return Task("math_drill", prompt, "\n".join(lines), answers)


def check_math_drill(answers: list[int], response: str) -> bool:
    """Every problem answered, in order, one `a op b = c` line each, with the right result."""
    lines = [line for line in response.strip().splitlines() if line.strip()]
    if len(lines) != len(answers):
        return False
    for line, answer in zip(lines, answers):
        match = _LINE.match(line)
        if not match or int(match.group(4)) != answer:
            return False
    return True


def make_json_key_drill(rng: random.Random) -> Task:
    """A visitor-style JSON request with four to six keys, every one built from open word pools or
    made up (`zone_label`, `vorbask`): a visitor's keys are often ones no training list has, and a
    miscopied key (`capcount` for `capacity`) was the visitor JSON family's commonest miss."""
    task = make_json_paraphrase(rng, counts=(4, 5, 6), open_only=True)
    return Task("json_key_drill", task.prompt, task.response, task.answer)


GENERATORS = {"math_drill": make_math_drill, "json_key_drill": make_json_key_drill}
CHECKED_AS = {"json_key_drill": "json"}  # checked like the template family
