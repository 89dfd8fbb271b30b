"""Structure first, measured: do the constraint markers commit before the free text around them?

The visualizer post (seeds/004_*) says that a structured prompt's scaffolding (an acrostic's
line-start letters, list markers, `def` / docstring / `>>>`, sentence ends) commits before the
text it frames. This module turns that into numbers, per block (never pooled across blocks):

- each content token (before the block's EOS; thought tokens only with `include_thought`) is
  *structural* or *free* by the rules of its family, below;
- the mean first-acceptance (commit) step of each class, and free minus structural (positive:
  structure first);
- the AUROC of "structural" against commit step: the probability that a structural token commits
  strictly earlier than a free one, ties counted half (0.5: no order, 1: every marker first);
- undefined, with the reason, where a class is empty.

A run's value is the mean over its blocks where it is defined; across runs (prompts x seeds) the
difference gets a bootstrap CI from `scipy.stats.bootstrap`, resampling prompts (each prompt's
seeds averaged first, so a prompt counts once), or seeds when there is one prompt.

The rules (each token's piece is its decoded text; "stripped" is without surrounding whitespace):

    newline       the piece contains a newline
    line start    the first token of a line whose piece is not only whitespace: the answer's first
                  token, or the first such token after a newline
    list marker   at a line start, the stripped piece is a bullet (-, *, •) or a number with
                  or without "." or ")" (1, 1., 2))
    sentence end  the stripped piece ends a sentence: it is made of ., !, ?, closing quotes and
                  brackets only, with at least one of .!? (".", "?", ".\"", "!)")
    code marker   the stripped piece is `def`, a docstring quote (\"\"\" or '''), or `>>>`

    family      rules                                      demos (prompts/demos.py)
    lines       newline, line start, list marker           acrostic, planets, haiku
    sentences   newline, sentence end                      sky, story
    code        newline, code marker                       palindrome
    generic     all five                                   anything else

A token made only of spaces or tabs (indentation) is in neither class. `guess_family` reads the
family from the prompt's words when none is given (documented at the function).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap

from ..thinking import thought_mask
from ..trace import Trace
from .commits import block_commits
from .measured import ANSWER_ONLY, WITH_THOUGHTS, pinned_row
from .order import Undefined
from .stats import CI_LEVEL, N_RESAMPLES, auroc

NEWLINE, LINE_START, LIST_MARKER, SENTENCE_END, CODE_MARKER = "newline", "line start", "list marker", "sentence end", "code marker"
RULES = (NEWLINE, LINE_START, LIST_MARKER, SENTENCE_END, CODE_MARKER)
FAMILIES = {
    "lines": (NEWLINE, LINE_START, LIST_MARKER),
    "sentences": (NEWLINE, SENTENCE_END),
    "code": (NEWLINE, CODE_MARKER),
    "generic": RULES,
}
DEMO_FAMILIES = {"acrostic": "lines", "planets": "lines", "haiku": "lines", "sky": "sentences", "story": "sentences", "palindrome": "code"}

_LIST_MARKER = re.compile(r"^(?:[-*•]|\d+[.)]?)$")
_SENTENCE_END = re.compile(r"^[.!?\"'”’)\]]*[.!?][.!?\"'”’)\]]*$")
_CODE_MARKERS = {"def", '"""', "'''", ">>>"}


@dataclass(frozen=True)
class BlockStructure:
    block: int
    structural: int  # tokens in each class
    free: int
    mean_step_structural: float | Undefined
    mean_step_free: float | Undefined
    difference: float | Undefined  # free minus structural: positive = structure first
    auroc: float | Undefined  # P(a structural token commits strictly earlier than a free one), ties half


@dataclass(frozen=True)
class StructureFirst:
    family: str
    rules: tuple[str, ...]
    include_thought: bool  # thought tokens were measured too (default: the answer only)
    blocks: tuple[BlockStructure, ...]
    difference: float | Undefined  # mean over the blocks where it is defined
    auroc: float | Undefined
    mean_step_structural: float | Undefined
    mean_step_free: float | Undefined

    @property
    def measured(self) -> str:
        return WITH_THOUGHTS if self.include_thought else ANSWER_ONLY


def guess_family(prompt: str) -> str:
    """The family a prompt's words suggest: code ("python", "function", "def"), then lines
    ("line", "list", "haiku", "acrostic", "poem"), then sentences ("sentence", "story"), else generic."""
    words = prompt.lower()
    if re.search(r"\b(python|function|def|code|doctest)\b", words):
        return "code"
    if re.search(r"\b(lines?|list|haiku|acrostic|poem)\b", words):
        return "lines"
    if re.search(r"\b(sentences?|story)\b", words):
        return "sentences"
    return "generic"


def classify_pieces(pieces: list[str], family: str = "generic") -> np.ndarray:
    """(n,) int8 per token of one text in order: 1 structural, 0 free, -1 neither (indentation)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of: {', '.join(FAMILIES)}")
    rules = FAMILIES[family]
    out = np.zeros(len(pieces), dtype=np.int8)
    at_line_start = True  # the answer's first token starts a line
    for i, piece in enumerate(pieces):
        stripped = piece.strip()
        if not stripped and "\n" not in piece:
            out[i] = -1  # spaces or tabs: neither structure nor content
            continue
        hits = {
            NEWLINE: "\n" in piece,
            LINE_START: at_line_start and bool(stripped),
            LIST_MARKER: at_line_start and bool(_LIST_MARKER.match(stripped)),
            SENTENCE_END: bool(_SENTENCE_END.match(stripped)),
            CODE_MARKER: stripped in _CODE_MARKERS,
        }
        out[i] = any(hits[r] for r in rules)
        if "\n" in piece:
            at_line_start = not piece.rpartition("\n")[2].strip()
        elif stripped:
            at_line_start = False
    return out


def structure_first(trace: Trace, *, family: str | None = None, include_thought: bool = False) -> StructureFirst:
    """The structure-first figures of a run, per committed block and for the run."""
    family = family or guess_family(trace.prompt)
    tokens = [b.tokens for b in trace.blocks]
    if not tokens:
        undefined = Undefined("no block committed yet")
        return StructureFirst(family, FAMILIES[family], include_thought, (), undefined, undefined, undefined, undefined)
    thoughts = thought_mask(trace, np.stack(tokens))
    pieces = [trace.piece(t) for block in tokens for t in block]
    classes = classify_pieces(pieces, family).reshape(len(tokens), -1)  # lines run across blocks
    blocks = []
    for b in range(len(tokens)):
        commits = block_commits(trace, b)
        keep = commits.content & (classes[b] >= 0)
        if not include_thought:
            keep &= ~thoughts[b]
        keep &= ~pinned_row(trace, b)  # pinned positions (record --pin) are never measured
        blocks.append(_block_figures(b, commits.commit_step[keep], classes[b][keep] == 1))
    return StructureFirst(
        family=family,
        rules=FAMILIES[family],
        include_thought=include_thought,
        blocks=tuple(blocks),
        difference=_mean_defined([b.difference for b in blocks]),
        auroc=_mean_defined([b.auroc for b in blocks]),
        mean_step_structural=_mean_defined([b.mean_step_structural for b in blocks]),
        mean_step_free=_mean_defined([b.mean_step_free for b in blocks]),
    )


def _block_figures(block: int, steps: np.ndarray, structural: np.ndarray) -> BlockStructure:
    n_structural, n_free = int(structural.sum()), int((~structural).sum())
    mean_s = float(steps[structural].mean()) if n_structural else Undefined("no structural token in this block")
    mean_f = float(steps[~structural].mean()) if n_free else Undefined("no free token in this block")
    if n_structural and n_free:
        difference = mean_f - mean_s
        area = auroc(-steps.astype(float), structural)  # earlier commit = higher score
    else:
        difference = area = Undefined(mean_s.reason if not n_structural else mean_f.reason)
    return BlockStructure(block, n_structural, n_free, mean_s, mean_f, difference, area)


def _mean_defined(values) -> float | Undefined:
    defined = [v for v in values if not isinstance(v, Undefined)]
    if defined:
        return float(np.mean(defined))
    reasons = {v.reason for v in values}
    return Undefined("; ".join(sorted(reasons)) if reasons else "no block")


# ---- across runs ---------------------------------------------------------------------------------
def difference_ci(prompt_ids, differences, *, n_resamples: int = N_RESAMPLES, level: float = CI_LEVEL, seed: int = 0):
    """Mean structure-first difference over runs with its bootstrap CI (scipy.stats.bootstrap, percentile).

    Runs of one prompt are averaged first and prompts are resampled; with a single prompt its
    seeds are resampled. Returns (mean, (low, high), "prompts" | "seeds"), or Undefined pieces
    with the reason."""
    rows = [(p, d) for p, d in zip(prompt_ids, differences) if not isinstance(d, Undefined)]
    if not rows:
        return Undefined("undefined in every run"), Undefined("no defined run"), None
    by_prompt: dict = {}
    for p, d in rows:
        by_prompt.setdefault(p, []).append(d)
    if len(by_prompt) >= 2:
        sample, unit = np.array([np.mean(v) for v in by_prompt.values()]), "prompts"
    else:
        sample, unit = np.array(next(iter(by_prompt.values())), dtype=float), "seeds"
    mean = float(sample.mean())
    if sample.size < 2:
        return mean, Undefined(f"needs at least 2 {unit} (has {sample.size})"), unit
    if np.ptp(sample) == 0:
        return mean, (mean, mean), unit
    result = bootstrap((sample,), np.mean, n_resamples=n_resamples, confidence_level=level, method="percentile",
                       rng=np.random.default_rng(seed))
    return mean, (float(result.confidence_interval.low), float(result.confidence_interval.high)), unit
