"""The warm start (issue 55, docs/lab.md): a run whose first canvas holds tokens another run accepted at one of its
steps, or text placed at positions, instead of the run's own noise there.

    placed = accepted_tokens(parent.steps[locate_step(parent, StepName(1, 8)).index])  # ((position, id), ...)
    start = WarmStart(source=content_hash(data), block=1, step=8, texts=(), placed=placed)
    start.to_dict()   # {"from": "<sha256>", "at": [1, 8], "texts": [], "placed": [[0, 412], ...]}

Only accepted positions are taken: the others hold noise, which is never content (the README's table of states). The
placed tokens are the canvas the new run's first step denoises, not held: from then on the stock sampler decides
(`backends.interventions.warm_start_trace` places them). A trace records its start as the optional top-level
"warm_start"; a trace without it loads as before.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WarmStart:
    """What a warm-started run's first canvas held: recorded as the trace's top-level "warm_start"."""

    source: str | None  # sha256 (hex) of the trace file the tokens came from; None for text alone
    block: int | None  # that trace's step, counted from 1 as `--start-from` and the app's captions count
    step: int | None
    texts: tuple[str, ...]  # each --start-from-text as given ("POS=TEXT")
    placed: tuple[tuple[int, int], ...]  # (position, id) on the first canvas, sorted by position

    def to_dict(self) -> dict:
        return {"from": self.source, "at": None if self.block is None else [self.block, self.step],
                "texts": list(self.texts), "placed": [[p, t] for p, t in self.placed]}


def parse_start_from(arg: str) -> tuple[str, str]:
    """RUN.json:BLOCK:STEP -> (the path, "BLOCK:STEP"); ValueError in one line. The path may hold colons."""
    path, sep, step = arg.rpartition(":")
    path, sep2, block = path.rpartition(":")
    if not (sep and sep2 and path):
        raise ValueError(f"--start-from takes RUN.json:BLOCK:STEP, block and step counted from 1 (got {arg!r})")
    return path, f"{block}:{step}"


def parse_start_text(arg: str, said: str = "--start-from-text") -> tuple[int, str]:
    """POS=TEXT -> (position, text); ValueError in one line, starting with `said` (the flag, or the app's box)."""
    position, sep, text = arg.partition("=")
    if not sep or not position.strip().isdigit():
        raise ValueError(f"{said} takes POS=TEXT, POS a canvas position from 0 (got {arg!r})")
    if not text:
        raise ValueError(f"{said} {arg!r} has an empty text: give the text for position {position.strip()}")
    return int(position), text


def accepted_tokens(step) -> tuple[tuple[int, int], ...]:
    """The (position, id) a step record accepted: its canvas where it is not noise."""
    return tuple((int(p), int(step.canvas[p])) for p in step.accepted.nonzero()[0])


def parse_warm_start(raw, canvas_length: int, vocab_size: int) -> WarmStart | None:
    """A trace's "warm_start" field validated (ValueError with one line); None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"from", "at", "texts", "placed"}:
        raise ValueError('"warm_start" must be an object with "from", "at", "texts" and "placed"')
    source, at, texts, placed = raw["from"], raw["at"], raw["texts"], raw["placed"]
    if source is not None and not (isinstance(source, str) and len(source) == 64
                                   and all(c in "0123456789abcdef" for c in source)):
        raise ValueError("warm_start.from must be a sha256 in hex, or null")
    if (at is None) != (source is None) or at is not None and not (
            isinstance(at, list) and len(at) == 2 and all(type(v) is int and v >= 1 for v in at)):
        raise ValueError("warm_start.at must be [block, step], each counted from 1, with its from (or both null)")
    if not (isinstance(texts, list) and len(texts) <= canvas_length and all(isinstance(t, str) for t in texts)):
        raise ValueError("warm_start.texts must be a list of POS=TEXT strings")
    if not (isinstance(placed, list) and len(placed) <= canvas_length and all(
            isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair)
            and 0 <= pair[0] < canvas_length and 0 <= pair[1] < vocab_size for pair in placed)):
        raise ValueError("warm_start.placed must be [position, id] pairs inside the canvas and the vocabulary")
    positions = [p for p, _ in placed]
    if positions != sorted(set(positions)):
        raise ValueError("warm_start.placed must name each position once, in order")
    return WarmStart(source, None if at is None else at[0], None if at is None else at[1], tuple(texts),
                     tuple((p, t) for p, t in placed))
