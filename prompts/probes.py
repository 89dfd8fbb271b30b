"""The probe suite of the commit-order study: six regimes of held-out prompts with checkers.

Regimes (seeds/000_*): math (word problems with a final number), code_function (complete a
signature + docstring, HumanEval-like), code_task (a function from a one-line description,
MBPP-like), factual (recall from the project's fact table), open (open-ended instructions)
and json (an object following a requested schema).

Every probe is a held-out item of the same generators the built-in model was trained on
(`prompts.tasks`): its prompt never appears in the training data.  A regime whose held-out items
run out (factual has 32, code_task 43, open 73) continues with its training-split items, marked
`heldout=False`: the 26B checkpoint never saw either, but the built-in model was trained on them,
so a study of the built-in model reports them apart (the `heldout` column of the results).  The
list is fixed: the same regimes and `per_regime` always give the same probes, and a shorter list
is a prefix of a longer one.  Within a regime, probes alternate between the "exploratory" split (choose
metrics and thresholds on it) and the "confirmatory" split (report only from it).

    from prompts.probes import probe_suite, check_answer
    for probe in probe_suite(["math", "json"], per_regime=10):
        ok = check_answer(probe, response)     # True / False, or None for "open"

Answers: math -> the number (int); factual -> the expected string; json -> the JSON schema
(dict); code_function and code_task -> the hidden tests, a tuple of `assert` lines, which
`check_answer` runs after the response's code in a separate Python process with a 5 s
timeout; open -> None (no checker).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prompts.tasks import HELDOUT_SEED, PROBE_REGIMES, TRAIN, Task, check_task, heldout_tasks, iter_tasks

REGIMES = PROBE_REGIMES  # ("math", "code_function", "code_task", "factual", "open", "json")
EXPLORATORY, CONFIRMATORY = "exploratory", "confirmatory"


@dataclass(frozen=True)
class ProbePrompt:
    regime: str  # one of REGIMES
    prompt_id: str  # stable, e.g. "math-007"
    prompt: str  # the user message
    split: str  # "exploratory" or "confirmatory"
    answer: object | None  # number (math), string (factual), schema dict (json), tests (code), None (open)
    heldout: bool = True  # False: a training-split item, taken once the held-out ones ran out


def probe_suite(regimes: Sequence[str] | None = None, per_regime: int = 20) -> list[ProbePrompt]:
    """`per_regime` held-out probes for each regime, in REGIMES order unless `regimes` says otherwise."""
    regimes = tuple(REGIMES if regimes is None else regimes)
    unknown = [r for r in regimes if r not in REGIMES]
    if unknown:
        raise ValueError(f"unknown regime(s) {', '.join(map(repr, unknown))}; choose from: {', '.join(REGIMES)}")
    if not isinstance(per_regime, int) or per_regime < 1:
        raise ValueError(f"per_regime must be a positive whole number (got {per_regime!r})")
    probes = []
    for regime in regimes:
        tasks = heldout_tasks(regime, per_regime)
        heldout = len(tasks)
        if heldout < per_regime:
            seen = {t.prompt for t in tasks}
            for task in iter_tasks(regime, seed=HELDOUT_SEED, split=TRAIN, unique=True):
                if task.prompt not in seen:
                    tasks.append(task)
                if len(tasks) == per_regime:
                    break
        if len(tasks) < per_regime:
            raise ValueError(f"regime {regime!r} has only {len(tasks)} distinct prompts (asked for {per_regime})")
        for i, task in enumerate(tasks):
            probes.append(ProbePrompt(
                regime=regime,
                prompt_id=f"{regime}-{i:03d}",
                prompt=task.prompt,
                split=EXPLORATORY if i % 2 == 0 else CONFIRMATORY,
                answer=task.answer,
                heldout=i < heldout,
            ))
    return probes


def check_answer(probe: ProbePrompt, response: str) -> bool | None:
    """Is `response` a correct answer to `probe`?  None when there is nothing to check it against:
    a regime without a checker (open, or a prompt set's own regime) or a row without an answer."""
    if probe.answer is None or probe.regime not in REGIMES:
        return None
    return check_task(Task(probe.regime, probe.prompt, "", probe.answer), response)
