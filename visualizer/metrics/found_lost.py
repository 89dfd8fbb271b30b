"""Found, then lost: could the right answer be read from the argmax at some step, and was it not the final one?

    answers = answer_trajectory(trace, lambda text: check(probe, text))   # the probe's checker on each step's text
    answers.correct_at_any_step, answers.first_correct_step, answers.found_then_lost

The answer read at step t of block b is the committed text of the blocks before b followed by block b's
argmax at step t, cut at its first EOS and trailing pad (as `commits.content_length` cuts a block), the
pieces joined as the trace stores them.  On the built-in model that join equals `RunEnd.text` for every
committed answer; a tokenizer whose pieces do not join to its decode (skipped special tokens) reads each
step's text the same way, so compare the end's verdict with `correct_at_last_step` before trusting it.

- correct at the end: the checker's verdict on `RunEnd.text` (the probe's `correct`).
- correct at any step: some step's text was scored right (the end's verdict included).
- first correct step: the first step (counted over the run: the steps of earlier blocks first) whose text
  was right, and its fraction of the run's steps (1/steps at the first step, 1 at the last).
- found then lost: right at some step and wrong at the end.

The study's CIs resample prompts (`stats.clustered_ci`); the probe reports each of these per regime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..trace import Trace
from .commits import content_length
from .order import Undefined


@dataclass(frozen=True)
class AnswerTrajectory:
    verdicts: list  # per step of the run, in order: True / False / None (unscored)
    correct_at_end: bool | None
    correct_at_last_step: bool | None  # the last step's joined text, scored (agrees with the end on the built-in model)
    correct_at_any_step: bool | None
    found_then_lost: bool | None
    first_correct_step: int | Undefined  # 0-based over the run's steps
    first_correct_fraction: float | Undefined  # (first correct step + 1) / the run's steps


def step_texts(trace: Trace) -> list[str]:
    """The answer as read at every step of the run, in order (see the module docstring)."""
    eos, pad = trace.model.eos_token_ids, trace.model.pad_token_id
    texts, before = [], ""
    for block in range(len(trace.blocks)):
        for step in trace.block_steps(block):
            texts.append(before + _joined(trace, step.argmax, eos, pad))
        tokens = trace.blocks[block].tokens
        before += _joined(trace, tokens, eos, pad)
        if content_length(tokens, eos, pad)[0] < tokens.size:  # an EOS: the answer ends in this block
            break
    return texts


def _joined(trace: Trace, tokens, eos, pad) -> str:
    length, _ = content_length(tokens, eos, pad)
    return "".join(trace.piece(t) for t in np.asarray(tokens)[:length])


def answer_trajectory(trace: Trace, check_text: Callable[[str], bool | None], correct_at_end: bool | None) -> AnswerTrajectory:
    """Each step's answer scored by `check_text`, against the end's verdict `correct_at_end`."""
    verdicts = []
    for text in step_texts(trace):
        try:
            verdict = check_text(text)
        except Exception:  # noqa: BLE001 -- a half-written answer may break a checker: that step is unscored
            verdict = None
        verdicts.append(None if verdict is None else bool(verdict))
    if correct_at_end is None:
        reason = Undefined("the generation is unscored")
        return AnswerTrajectory(verdicts, None, None, None, None, reason, reason)
    right = [i for i, v in enumerate(verdicts) if v]
    any_step = bool(right) or bool(correct_at_end)
    if right:
        first, fraction = right[0], (right[0] + 1) / len(verdicts)
    else:
        first = fraction = Undefined("no step's answer was right" if verdicts else "no steps")
    return AnswerTrajectory(
        verdicts=verdicts,
        correct_at_end=bool(correct_at_end),
        correct_at_last_step=verdicts[-1] if verdicts else None,
        correct_at_any_step=any_step,
        found_then_lost=bool(right) and not correct_at_end,
        first_correct_step=first,
        first_correct_fraction=fraction,
    )
