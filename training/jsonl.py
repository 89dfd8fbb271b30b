"""The record files the corpora are built into (runs/corpus/*.jsonl): one JSON object a line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path


def write_jsonl(records: list[dict], out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return out


def read_jsonl(path: Path) -> tuple[dict, ...]:
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def read_or_build_jsonl(path: Path, build: Callable[[], list[dict]]) -> tuple[dict, ...]:
    """The records of `path`, written from `build()` first if the file is missing."""
    if not path.is_file():
        write_jsonl(build(), path)
    return read_jsonl(path)
