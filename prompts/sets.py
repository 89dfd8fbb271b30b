"""Prompt sets a user brings: JSONL, Parquet or a Hugging Face dataset, as probe prompts.

    probes = load_prompt_set("my_prompts.jsonl")                     # or .parquet
    probes = load_prompt_set("hf:gsm8k", config="main", split="test",
                             columns={"prompt": "question", "answer": "answer"}, regime="math")

Each row needs `prompt` and `regime`, and may have `answer`, `prompt_id` (default
"<regime>-<row>") and `split` (exploratory or confirmatory; default confirmatory: a set brought
from outside was not used to choose the metrics).  `columns` maps these names to the set's own
column names; `regime` is the regime of rows that have none (a dataset of one task).

An answer is checked by its regime's checker (`prompts.probes.check_answer`) once it has the
checker's type: math takes the last number of the answer (GSM8K's "... #### 42" gives 42),
json a schema (a dict, or its JSON text), code a list of `assert` lines (or one text of them);
factual takes the text.  A regime the project has no checker for, or a row without an answer,
is generated and measured but not scored.  Anything malformed raises `PromptSetError` with one
line naming the row (1-based, as an editor shows the line) and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from prompts.probes import CONFIRMATORY, EXPLORATORY, REGIMES, ProbePrompt

FIELDS = ("prompt", "regime", "answer", "prompt_id", "split")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class PromptSetError(ValueError):
    """A prompt set that cannot be read; the message names the row and the field."""


def load_prompt_set(source: str, *, columns: dict | None = None, regime: str | None = None,
                    config: str | None = None, split: str = "train") -> list[ProbePrompt]:
    """The probe prompts of a JSONL or Parquet file, or of `hf:<dataset>` (`config`, `split`)."""
    columns = dict(columns or {})
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise PromptSetError(f"unknown field(s) in the column mapping: {', '.join(unknown)}; map any of {', '.join(FIELDS)}")
    rows = _read_rows(source, config=config, split=split)
    if not rows:
        raise PromptSetError(f"{source} holds no rows")
    probes, ids = [], set()
    for number, row in enumerate(rows, start=1):
        probe = _probe(row, number, columns, regime)
        if probe.prompt_id in ids:
            raise PromptSetError(f"row {number}: field 'prompt_id': {probe.prompt_id!r} is used by an earlier row")
        ids.add(probe.prompt_id)
        probes.append(probe)
    return probes


def _read_rows(source: str, *, config, split) -> list[dict]:
    if source.startswith("hf:"):
        try:
            import datasets
        except ImportError:
            raise PromptSetError("reading a Hugging Face dataset needs the datasets package (pip install datasets)") from None
        try:
            return list(datasets.load_dataset(source[3:], config, split=split))
        except Exception as exc:  # the hub's and the loader's errors have no common type
            raise PromptSetError(f"cannot load dataset {source[3:]!r}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    path = Path(source)
    if not path.is_file():
        raise PromptSetError(f"no such file: {source} (a .jsonl or .parquet file, or hf:<dataset>)")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises its own ArrowInvalid for a broken file
            raise PromptSetError(f"{source} is not a readable Parquet file: {exc}") from None
    if path.suffix not in (".jsonl", ".json"):
        raise PromptSetError(f"{source}: expected a .jsonl or .parquet file, or hf:<dataset>")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise PromptSetError(f"row {number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(row, dict):
            raise PromptSetError(f"row {number}: expected a JSON object with a 'prompt' field, got {type(row).__name__}")
        rows.append(row)
    return rows


def _probe(row: dict, number: int, columns: dict, default_regime: str | None) -> ProbePrompt:
    def field(name, *, required=False):
        column = columns.get(name, name)
        value = row.get(column)
        if required and (not isinstance(value, str) or not value.strip()):
            where = f"field {name!r}" + (f" (column {column!r})" if column != name else "")
            problem = "is missing" if value is None else "must be a non-empty text"
            raise PromptSetError(f"row {number}: {where} {problem}")
        return value

    prompt = field("prompt", required=True)
    regime = field("regime") or default_regime
    if not isinstance(regime, str) or not regime.strip():
        raise PromptSetError(f"row {number}: field 'regime' is missing (add the column, or give one --regime for every row)")
    split = field("split") or CONFIRMATORY
    if split not in (CONFIRMATORY, EXPLORATORY):
        raise PromptSetError(f"row {number}: field 'split' must be {CONFIRMATORY!r} or {EXPLORATORY!r}, not {split!r}")
    prompt_id = str(field("prompt_id") or f"{regime}-{number:05d}")
    return ProbePrompt(regime=regime, prompt_id=prompt_id, prompt=prompt, split=split,
                       answer=_answer(regime, field("answer"), number))


def _answer(regime: str, answer, number: int):
    """The answer in the type the regime's checker takes (module docstring); None: not scored."""
    if answer is None or regime not in REGIMES or regime == "open":
        return None
    bad = f"row {number}: field 'answer'"
    if regime == "math":
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            return answer
        found = _NUMBER.findall(str(answer).replace(",", ""))
        if not found:
            raise PromptSetError(f"{bad} has no number for the math checker: {str(answer)[:40]!r}")
        value = float(found[-1])
        return int(value) if value.is_integer() else value
    if regime == "json":
        if isinstance(answer, str):
            try:
                answer = json.loads(answer)
            except ValueError:
                raise PromptSetError(f"{bad} must be a JSON schema (an object, or its JSON text)") from None
        if not isinstance(answer, dict):
            raise PromptSetError(f"{bad} must be a JSON schema object")
        return answer
    if regime in ("code_function", "code_task"):
        lines = answer.splitlines() if isinstance(answer, str) else list(answer)
        tests = tuple(str(line) for line in lines if str(line).strip())
        if not tests:
            raise PromptSetError(f"{bad} must hold the hidden tests (assert lines)")
        return tests
    return str(answer)  # factual: the expected text
