"""One way to name a step: its block and its step, both counted from 1, as the app's captions show them
("Block 2/3 · step 10" is `2:10`). Every command that takes a step reads it here (issue 55's `fork --at
BLOCK:STEP` will too); positions still count from 0, as pins do.

    name = parse_step("2:10")        # StepName(block=2, step=10); "10": step 10 of the command's block
    at = locate_step(trace, name)    # StepAt(block, step, index), counted from 0 as the records count them
    #                                  (index: in trace.steps); StepNameError names the run's range
"""

from __future__ import annotations

from dataclasses import dataclass

from .trace import Trace

# What every command's --help says of a step (the command adds which block a bare STEP is of).
STEP_HELP = "BLOCK:STEP, both counted from 1 as the app's captions show them (2:10: block 2, step 10)"


class StepNameError(ValueError):
    """A step that is not written as one, or not in the run: one line, naming the run's range."""


@dataclass(frozen=True)
class StepName:
    block: int | None  # from 1; None: the command's block (its --block, a position's block, else the first)
    step: int  # from 1


def parse_step(text) -> StepName:
    """"2:10" or "10" (of the command's block); StepNameError in one line otherwise."""
    block, sep, step = str(text).strip().rpartition(":")
    try:
        name = StepName(int(block) if sep else None, int(step))
    except ValueError:
        raise StepNameError(f"a step is BLOCK:STEP or STEP, whole numbers from 1 (got {str(text)[:40]!r})") from None
    if name.step < 1 or (name.block is not None and name.block < 1):
        what = "a step" if name.step < 1 else "a block"
        raise StepNameError(f"{what} counts from 1, as the app's captions do (got {str(text)[:40]!r})")
    return name


@dataclass(frozen=True)
class StepAt:
    """A named step found in a run, counted from 0 as the records count them."""

    block: int
    step: int  # within its block
    index: int  # in trace.steps


def locate_step(trace: Trace, name: StepName, *, block: int = 1) -> StepAt:
    """The step `name` of the run (a bare step is of `block`, from 1); StepNameError naming the run's blocks, or
    the block's steps, when the run has no such step."""
    which = name.block if name.block is not None else block
    blocks = sorted({s.block for s in trace.steps})
    if not blocks:
        raise StepNameError("the run has no recorded steps")
    if which - 1 not in blocks:
        raise StepNameError(f"block {which} is outside this run: it has {_span(blocks)}")
    indices = [i for i, s in enumerate(trace.steps) if s.block == which - 1]
    if not 1 <= name.step <= len(indices):
        raise StepNameError(f"step {which}:{name.step} is outside this run: block {which} has steps 1 to {len(indices)}")
    return StepAt(which - 1, name.step - 1, indices[name.step - 1])


def _span(blocks: list[int]) -> str:
    if blocks == [0]:
        return "block 1 only"
    return f"blocks 1 to {blocks[-1] + 1}" if blocks == list(range(blocks[-1] + 1)) else "blocks " + ", ".join(str(b + 1) for b in blocks)
