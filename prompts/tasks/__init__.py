"""Instruction/response pairs for training and evaluating the built-in model.

Twelve template families: six demo families (acrostic, sentences, doctest_function, fact_list,
story, haiku: the shapes of prompts/demos.py) and six probe regimes (math, code_function,
code_task, factual, open, json: the study's regimes).  Three paraphrase families
(`paraphrase.py`) ask json, math and acrostic tasks the way visitors do, built compositionally;
three open-ended English families (`open_english.py`: describe, explain, poem), a
think-then-answer family (`thinking.py`, asked with `enable_thinking`) and drills
(`drills.py`: arithmetic worksheets, JSON with many unseen keys) complete the mix.  Everything is generated from the project's own word lists and
fact tables (`bank.py`), deterministically from a seed.

Every prompt belongs to one split, fixed by a hash of its text: "heldout" (1 in 8 prompts) or
"train".  Training only ever sees "train" prompts; evaluation and the probe suite only use
"heldout" ones, so they are disjoint whatever seeds are used.  The six demo prompts are always
"train" (they are what the app shows, not what we measure).

    tasks = sample_tasks(1000, seed=0)                           # training mix, all families
    tasks = heldout_tasks("acrostic", 50)                        # evaluation items
    check_task(task, model_response)                             # True / False / None (no checker)
"""

from __future__ import annotations

import functools
import hashlib
import random
import zlib
from collections.abc import Iterator, Sequence

from . import demo_families, drills, open_english, paraphrase, probe_families, thinking
from .types import Task

DEMO_FAMILIES = tuple(demo_families.GENERATORS)
PROBE_REGIMES = tuple(probe_families.GENERATORS)
TEMPLATE_FAMILIES = DEMO_FAMILIES + PROBE_REGIMES  # the original twelve (the tokenizer was trained on these)
PARAPHRASE_FAMILIES = tuple(paraphrase.GENERATORS)  # visitor-style phrasings of json, math and acrostic
ENGLISH_FAMILIES = tuple(open_english.GENERATORS)  # describe X, explain Y in one sentence, a poem about Z
THINKING_FAMILIES = tuple(thinking.GENERATORS)  # think-then-answer in Gemma 4's thought channel
DRILL_FAMILIES = tuple(drills.GENERATORS)  # arithmetic worksheets, JSON with many unseen keys
# New families go last: a mix that gives them no weight then draws exactly what it drew before.
FAMILIES = TEMPLATE_FAMILIES + PARAPHRASE_FAMILIES + ENGLISH_FAMILIES + THINKING_FAMILIES + DRILL_FAMILIES
GENERATORS = {**demo_families.GENERATORS, **probe_families.GENERATORS, **paraphrase.GENERATORS,
              **open_english.GENERATORS, **thinking.GENERATORS, **drills.GENERATORS}

CHECKED_AS = {**paraphrase.CHECKED_AS, **drills.CHECKED_AS}  # family -> the family whose checker it uses

HELDOUT_ONE_IN = 8
TRAIN, HELDOUT = "train", "heldout"
SPLITS = (TRAIN, HELDOUT)
HELDOUT_SEED = 20260601  # the fixed seed of every held-out list: the same items on every machine


def _demo_prompts() -> frozenset[str]:
    from prompts.demos import DEMOS

    return frozenset(d.prompt for d in DEMOS)


@functools.cache
def _visitor_set_prompts() -> frozenset[str]:
    from .paraphrase_eval import eval_prompts
    from .visitor_dev import dev_prompts

    return eval_prompts() | dev_prompts()


def split_of(prompt: str) -> str:
    """'train' or 'heldout', from a hash of the prompt text alone (the paraphrase evaluation set
    and the visitor development set are always held out)."""
    if prompt in _demo_prompts():
        return TRAIN
    if prompt in _visitor_set_prompts():
        return HELDOUT
    digest = hashlib.sha256(prompt.encode("utf-8")).digest()
    return HELDOUT if int.from_bytes(digest[:4], "big") % HELDOUT_ONE_IN == 0 else TRAIN


def _family_rng(family: str, seed: int) -> random.Random:
    # zlib.crc32 is stable across runs (str hash() is salted per process)
    return random.Random(seed * 1_000_003 + zlib.crc32(family.encode()))


def iter_tasks(family: str, *, seed: int, split: str = TRAIN, unique: bool = False) -> Iterator[Task]:
    """Endless tasks of one family in one split; with `unique`, each prompt once (ends when exhausted)."""
    if family not in GENERATORS:
        raise ValueError(f"unknown task family {family!r}; choose from: {', '.join(FAMILIES)}")
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose 'train' or 'heldout'")
    rng = _family_rng(family, seed)
    make = GENERATORS[family]
    seen: set[str] = set()
    misses = 0
    while misses < 20_000:  # a family whose split has no new prompts left stops instead of spinning
        task = make(rng)
        if split_of(task.prompt) != split or (unique and task.prompt in seen):
            misses += 1
            continue
        misses = 0
        seen.add(task.prompt)
        yield task


def heldout_tasks(family: str, count: int, *, seed: int = HELDOUT_SEED) -> list[Task]:
    """The first `count` distinct held-out tasks of a family (a fixed list for a fixed seed)."""
    out = []
    for task in iter_tasks(family, seed=seed, split=HELDOUT, unique=True):
        out.append(task)
        if len(out) == count:
            break
    return out


def sample_tasks(
    count: int, *, seed: int, split: str = TRAIN, families: Sequence[str] | None = None,
    weights: dict[str, float] | None = None,
) -> list[Task]:
    """`count` tasks mixing families by `weights` (equal by default), deterministic from `seed`."""
    families = tuple(families or FAMILIES)
    weights = weights or {}
    streams = {f: iter_tasks(f, seed=seed, split=split) for f in families}
    picker = random.Random(seed)
    choices = picker.choices(families, weights=[weights.get(f, 1.0) for f in families], k=count)
    return [next(streams[f]) for f in choices]


def check_task(task: Task, response: str) -> bool | None:
    """Does `response` satisfy the task?  None for families without a checker (open)."""
    if task.family in open_english.GENERATORS:
        return None
    if task.family in thinking.GENERATORS:
        return thinking.check_thinking(task, response, check_task)
    if task.family == "math_drill":
        return drills.check_math_drill(task.answer, response)
    if task.family in CHECKED_AS:
        task = Task(CHECKED_AS[task.family], task.prompt, task.response, task.answer)
    if task.family in demo_families.GENERATORS:
        return demo_families.check_demo_family(task, response)
    return probe_families.check_probe_regime(task, response)


__all__ = [
    "DEMO_FAMILIES", "PROBE_REGIMES", "TEMPLATE_FAMILIES", "PARAPHRASE_FAMILIES", "ENGLISH_FAMILIES",
    "THINKING_FAMILIES", "DRILL_FAMILIES", "FAMILIES", "Task", "split_of", "iter_tasks", "heldout_tasks", "sample_tasks",
    "check_task", "TRAIN", "HELDOUT",
]
