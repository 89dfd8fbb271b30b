"""The probe's per-generation results, declared once: every column, its type and where it comes from.

    result = result_from_source(Source(probe, seed, trace, "traces/...json", run_metrics(trace),
                                       structure_first(trace), Verdict(True)))
    result.tau_b, result.bin_tau_b[16], result.correct, result.unscored

`COLUMNS` is the one declaration: `ProbeResult` (the record the tables read) is made from it, and
so are the Parquet columns of results/generations.parquet and their round trip
(`visualizer.results`) and the per-regime means of the tables (`regime_mean`, `visualizer.probe_tables`).
Adding a metric is the metric itself (visualizer/metrics) and one `Column` here.

Kinds: "str", "int", "bool", "float" (float | Undefined: null in Parquet, the reason kept in the
`undefined` column) and the nullable "bool?" and "str?" (None is a value there, not undefined).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, make_dataclass

from .batch_cost import BatchCost, passes_needed
from .metrics import BIN_SIZES, RunMetrics
from .metrics.found_lost import AnswerTrajectory
from .metrics.structure import StructureFirst
from .metrics.trajectory import STEP_BUCKETS, RunTrajectory
from .trace import Trace

KINDS = ("str", "int", "bool", "float", "bool?", "str?")


@dataclass(frozen=True)
class Verdict:
    """The answer checker's word on one generation: `correct` None means unscored, `unscored` says why."""

    correct: bool | None
    unscored: str | None = None  # "the row has no answer", "the checker failed: ...", ...


@dataclass(frozen=True)
class Source:
    """What one generation's columns are computed from."""

    probe: object  # a prompts.probes.ProbePrompt (regime, prompt_id, split, heldout)
    seed: int
    trace: Trace
    trace_file: str  # relative to the run's folder
    metrics: RunMetrics
    structure: StructureFirst
    verdict: Verdict
    cost: BatchCost | None = None  # the batch it was generated in; None: generated alone
    # every step read against its end (issue 56): from the trace, and each step's answer scored
    trajectory: RunTrajectory | None = None
    answers: AnswerTrajectory | None = None


@dataclass(frozen=True)
class Column:
    name: str  # the ProbeResult field and the Parquet column
    kind: str  # one of KINDS
    value: Callable[[Source], object]
    doc: str
    regime_mean: str | None = None  # the per-regime table reports its mean under this key


def _metric(name: str, kind: str, doc: str, regime_mean: str | None = None) -> Column:
    return Column(name, kind, lambda s: getattr(s.metrics, name), doc, regime_mean)


COLUMNS: tuple[Column, ...] = (
    Column("regime", "str", lambda s: s.probe.regime, "the probe's regime (math, json, ... or a prompt set's own)"),
    Column("prompt_id", "str", lambda s: s.probe.prompt_id, "the prompt's stable id"),
    Column("split", "str", lambda s: s.probe.split, "exploratory or confirmatory (tables report confirmatory)"),
    Column("seed", "int", lambda s: s.seed, "the batch's seed"),
    Column("heldout", "bool", lambda s: bool(getattr(s.probe, "heldout", True)),
           "False: a training-split item of the built-in model's generators"),
    Column("trace_file", "str", lambda s: s.trace_file, "the trace, relative to the run's folder"),
    Column("finish_reason", "str", lambda s: s.trace.end.finish_reason if s.trace.end else "unfinished", "eos, length, ..."),
    Column("correct", "bool?", lambda s: s.verdict.correct, "the checker's verdict; null: unscored"),
    Column("unscored", "str?", lambda s: s.verdict.unscored, "why a generation has no verdict; null: scored"),
    Column("tau_b", "float", lambda s: s.metrics.tau_b_mean, "token tau_b, mean over blocks (content only)"),
    Column("control_tau_b", "float", lambda s: s.metrics.control_tau_b_mean, "block-sequential control",
           regime_mean="control_tau_b"),
    *(Column(f"bin_tau_b_{size}", "float", lambda s, size=size: s.metrics.bin_tau_b_mean[size], f"tau_b in bins of {size}")
      for size in BIN_SIZES),
    _metric("tokens_per_accept_step", "float", "content tokens first accepted per accepting step",
            regime_mean="tokens_per_accept_step"),
    _metric("same_step_fraction", "float", "content pairs committed on one step", regime_mean="same_step_fraction"),
    _metric("mean_commit_entropy_nats", "float", "entropy at commit, mean over content",
            regime_mean="mean_commit_entropy_nats"),
    _metric("content_tokens", "int", "content positions (EOS and pad cut)", regime_mean="content_tokens"),
    _metric("steps_used", "int", "denoising steps over the committed blocks", regime_mean="steps_used"),
    _metric("monotone", "bool", "no re-mask event in the run"),
    Column("structure_difference", "float", lambda s: s.structure.difference, "free minus structural mean commit step"),
    Column("structure_auroc", "float", lambda s: s.structure.auroc, "P(structural commits before free)",
           regime_mean="structure_first_auroc"),
    _metric("thought_tokens", "int", "content positions in the thinking channel"),
    _metric("measured_tokens", "int", "content positions the order figures use"),
    _metric("excluded_eos", "int", "EOS positions cut"),
    _metric("excluded_pad", "int", "pad positions cut"),
    _metric("tau_b_blocks", "int", "blocks with a defined tau_b"),
    _metric("tau_b_raw_mean", "float", "tau_b with EOS and pad (the trailing-EOS trap)"),
    _metric("committed_at_finalize", "int", "content positions the sampler never accepted"),
    _metric("step_budget", "int", "steps allowed over the committed blocks"),
    _metric("remask_events", "int", "accepted at t-1, noise at t"),
    _metric("unfinished_blocks", "int", "blocks started but not committed"),
    *(  # ---- what the row's batch cost (visualizer.batch_cost): useful fraction = needed / (ran x rows) ----
        Column("decoder_passes", "int", lambda s: passes_needed(s.trace), "decoder passes this row needed (its blocks' steps)"),
        Column("batch_decoder_passes", "int", lambda s: s.cost.passes if s.cost else passes_needed(s.trace),
               "decoder passes its batch ran: its slowest row's steps, block by block"),
        Column("batch_rows_run", "int", lambda s: s.cost.rows if s.cost else 1,
               "rows its batch computed at each pass (a compiled run's filler rows included)"),
    ),
)

# Every step read against its end (issue 56, visualizer/metrics/trajectory.py and found_lost.py): their own block.
def _trajectory(name: str, kind: str, doc: str, regime_mean: str | None = None) -> Column:
    return Column(name, kind, lambda s: getattr(s.trajectory, name), doc, regime_mean)


def _answers(name: str, kind: str, doc: str) -> Column:
    return Column(name, kind, lambda s: getattr(s.answers, name), doc)


TRAJECTORY_COLUMNS: tuple[Column, ...] = (
    _trajectory("mean_finalized_step", "float", "first step from which the argmax is the committed token, mean over content",
                regime_mean="mean_finalized_step"),
    _trajectory("mean_argmax_flips", "float", "argmax changes from one step to the next, mean over content",
                regime_mean="mean_argmax_flips"),
    _trajectory("mean_commit_after_finalized_steps", "float", "commit step minus finalized step, mean over content",
                regime_mean="mean_commit_after_finalized_steps"),
    _trajectory("finalized_at_half", "float", "share of content finalized by half of its block's steps",
                regime_mean="finalized_at_half"),
    Column("commit_confidence", "float", lambda s: s.trajectory.mean_commit_confidence,
           "probability of each committed token at its commit step, mean over content (needs record_topk)",
           regime_mean="commit_confidence"),
    *(Column(f"commit_confidence_{b}", "float", lambda s, b=b: s.trajectory.commit_confidence_by_bucket[b],
             f"commit confidence of the content first accepted in the {b} third of its block's steps") for b in STEP_BUCKETS),
    _answers("correct_at_any_step", "bool?", "some step's argmax answer was right (the end included); null: unscored"),
    _answers("found_then_lost", "bool?", "right at some step, wrong at the end; null: unscored"),
    _answers("correct_at_last_step", "bool?", "the last step's joined argmax text scored (checks the join against the end)"),
    _answers("first_correct_step", "float", "first step of the run (0-based, over its blocks) whose answer was right"),
    _answers("first_correct_fraction", "float", "(first correct step + 1) / the run's steps"),
)
COLUMNS = COLUMNS + TRAJECTORY_COLUMNS
assert len({c.name for c in COLUMNS}) == len(COLUMNS) and all(c.kind in KINDS for c in COLUMNS)


def _bin_tau_b(self) -> dict:
    """{bin size: tau_b in bins of that size}, from the bin_tau_b_<size> columns."""
    return {size: getattr(self, f"bin_tau_b_{size}") for size in BIN_SIZES}


ProbeResult = make_dataclass(
    "ProbeResult", [(c.name, object) for c in COLUMNS], frozen=True,
    namespace={"__doc__": "One generation of a probe run: a field per `COLUMNS` entry (visualizer.probe_schema).",
               "bin_tau_b": property(_bin_tau_b)},
)
ProbeResult.__module__ = __name__


def result_from_source(source: Source) -> ProbeResult:
    return ProbeResult(**{c.name: c.value(source) for c in COLUMNS})
