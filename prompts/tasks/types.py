"""The one record every task generator returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    family: str  # generator name, e.g. "acrostic" or "math"
    prompt: str  # the user message
    response: str  # a correct model answer, without the closing <turn|>
    answer: object  # what the checker needs (letters, a number, a schema...); None when the response is enough
    thinking: bool = False  # asked with enable_thinking: the response opens with a <|channel>thought ... <channel|> block
