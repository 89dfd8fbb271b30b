"""The batch plan of a probe run: which generations share a batch, fixed before the run starts.

A row's samples depend on its batch (one RNG seeds the whole batch; batched kernels), so the
plan is part of what makes a trace reproducible: the same plan gives the same traces bit for bit,
whatever the number of processes that runs it.  It is plain data, written into the run's
manifest (probe.json) before the first generation, and read back by every rerun.

    plan = make_plan(items, batch_size=8)          # items: (regime, prompt_id, seed) in suite order
    plan.batches[3].items                           # the item ids of batch 3, all with one seed
    Plan.from_dict(json.loads(...)["plan"])         # as a rerun reads it

Batches never mix seeds (a batch is generated with one seed); within a seed they follow the
suite's order, so batch size 1 is exactly today's one-prompt-at-a-time run.  Which process runs
a batch is not part of the plan: it changes nothing in the traces (cli/distributed.py deals them).
"""

from __future__ import annotations

from dataclasses import dataclass


def item_id(regime: str, prompt_id: str, seed: int) -> str:
    """The stable name of one generation, as the plan, the results and error messages write it."""
    return f"{regime}/{prompt_id}/seed{seed}"


@dataclass(frozen=True)
class Batch:
    index: int  # position in the plan: the order batches are dealt and reported in
    seed: int  # every row of the batch is generated with this seed
    items: tuple[str, ...]  # item ids (see item_id), in row order


@dataclass(frozen=True)
class Plan:
    batch_size: int  # the most rows a batch holds
    batches: tuple[Batch, ...]

    @property
    def items(self) -> int:
        return sum(len(b.items) for b in self.batches)

    def to_dict(self) -> dict:
        return {
            "batch_size": self.batch_size,
            "batches": [{"batch": b.index, "seed": b.seed, "items": list(b.items)} for b in self.batches],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        batches = tuple(Batch(int(b["batch"]), int(b["seed"]), tuple(b["items"])) for b in data["batches"])
        return cls(int(data["batch_size"]), batches)


def make_plan(items: list[tuple[str, str, int]], *, batch_size: int) -> Plan:
    """Cut (regime, prompt_id, seed) items into batches of at most `batch_size` rows of one seed."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1 (got {batch_size})")
    by_seed: dict[int, list[str]] = {}
    for regime, prompt_id, seed in items:
        by_seed.setdefault(seed, []).append(item_id(regime, prompt_id, seed))
    batches = []
    for seed, ids in by_seed.items():
        for start in range(0, len(ids), batch_size):
            batches.append(Batch(len(batches), seed, tuple(ids[start:start + batch_size])))
    return Plan(batch_size, tuple(batches))
