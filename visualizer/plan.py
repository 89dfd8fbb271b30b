"""The batch plan of a probe run: which generations share a batch, fixed before the run starts.

A row's samples depend on its batch (one RNG seeds the whole batch; batched kernels), so the
plan is part of what makes a trace reproducible: the same plan gives the same traces bit for bit,
whatever the number of processes that runs it.  It is plain data, written into the run's
manifest (probe.json) before the first generation, and read back by every rerun.

    plan = make_plan(items, batch_size=8)          # items: (regime, prompt_id, seed) in suite order
    plan = make_plan(items, batch_size=8, order="length", lengths={("math", "math-001"): 212, ...})
    plan.batches[3].items                           # the item ids of batch 3, all with one seed
    Plan.from_dict(json.loads(...)["plan"])         # as a rerun reads it

Batches never mix seeds (a batch is generated with one seed).  Within a seed the `order` decides:
- "suite": the suite's order, so batch size 1 is exactly the one-prompt-at-a-time run;
- "length": by expected length, so rows that need about as many steps share a batch: a batch's
  rows are computed until its slowest row ends (visualizer.batch_cost), and a row needs steps with
  its answer's length.  The cheap first estimate is the regime, then the prompt's length (`lengths`,
  in characters), the order of items of equal estimate kept.
- "refill": the suite's order, each batch up to REFILL_CHUNK x `batch_size` generations that the refilling loop
  (backends/refill.py) runs on `batch_size` rows, each finished row taking the batch's next generation at once.
  A batch is then the unit of saving and resuming, not of rows run together.
With "suite" and "length" each batch's traces are those of stock `generate` on that batch: the order changes
which rows share a batch, never how a batch is generated.  With "refill" each trace is that of its generation
run alone (batch 1, stock `generate`), whatever else shared its rows.  "refill-batched" cuts batches as "refill" and
runs the loop's whole pass batched (`refill_generate(exact=False)`: faster on a GPU, BENCHMARKS.md): each trace then
depends on which rows shared its passes, as a stock batch's rows do, so the plan makes it reproducible as it makes
"suite"'s.  Which process runs
a batch is not part of the plan: it changes nothing in the traces (cli/distributed.py deals them).
"""

from __future__ import annotations

from dataclasses import dataclass

ORDERS = ("suite", "length", "refill", "refill-batched")  # how a seed's items are cut into batches (module docstring)
# the orders the refilling loop runs, each with whether it runs exact (every trace that of its generation alone)
REFILL_EXACT = {"refill": True, "refill-batched": False}
REFILL_CHUNK = 8  # a "refill" batch holds up to this many times its rows of generations (module docstring)


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
    batch_size: int  # the most rows a batch holds (order "refill": the rows the loop runs at once)
    batches: tuple[Batch, ...]
    order: str = "suite"  # one of ORDERS

    @property
    def items(self) -> int:
        return sum(len(b.items) for b in self.batches)

    def to_dict(self) -> dict:
        return {
            "batch_size": self.batch_size,
            "order": self.order,
            "batches": [{"batch": b.index, "seed": b.seed, "items": list(b.items)} for b in self.batches],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        batches = tuple(Batch(int(b["batch"]), int(b["seed"]), tuple(b["items"])) for b in data["batches"])
        return cls(int(data["batch_size"]), batches, str(data.get("order", "suite")))  # older plans: the suite's


def make_plan(items: list[tuple[str, str, int]], *, batch_size: int, order: str = "suite",
              lengths: dict[tuple[str, str], int] | None = None) -> Plan:
    """Cut (regime, prompt_id, seed) items into batches of at most `batch_size` rows of one seed, in
    `order` ("length" reads each prompt's length from `lengths`, keyed by (regime, prompt_id))."""
    if batch_size < 1:
        raise ValueError(f"batch size must be at least 1 (got {batch_size})")
    if order not in ORDERS:
        raise ValueError(f"batch order must be one of {', '.join(ORDERS)} (got {order!r})")
    by_seed: dict[int, list[tuple[str, str]]] = {}
    for regime, prompt_id, seed in items:
        by_seed.setdefault(seed, []).append((regime, prompt_id))
    batches = []
    for seed, pairs in by_seed.items():
        if order == "length":
            regimes = list(dict.fromkeys(regime for regime, _ in pairs))
            pairs = sorted(pairs, key=lambda pair: (regimes.index(pair[0]), (lengths or {}).get(pair, 0)))
        ids = [item_id(regime, prompt_id, seed) for regime, prompt_id in pairs]
        size = batch_size * REFILL_CHUNK if order in REFILL_EXACT else batch_size
        for start in range(0, len(ids), size):
            batches.append(Batch(len(batches), seed, tuple(ids[start:start + size])))
    return Plan(batch_size, tuple(batches), order)
