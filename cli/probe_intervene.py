"""`probe --intervene SPEC --at BLOCK:STEP`: every generation of the probe run twice, itself and its branch (docs/lab.md).

    python -m visualizer probe --regimes math --seeds 2 --intervene "forbid 0=O" --at 1:1 --out runs/forbid

The probe runs as always (its traces, results and tables); then each generation is forked at BLOCK:STEP with the
interventions, through `fork`'s own code (`cli.fork.write_branch`), into OUT/branches/ beside OUT/traces/, and the
paired effect per regime (`visualizer.probe_pairs`) is appended to table.md and written into table.json
("intervention"), and every pair is a row of OUT/results/pairs.parquet. A rerun keeps the branches already
written for the same parent and interventions, so a killed run neither loses nor repeats one.

A fork re-runs its parent alone, from its seed. A row of a batched run is not bit-identical to the same generation
run alone (the batch's other rows change the shapes of the model's matrix products and so their rounding), so under
`--batch-size N` the probe's own runs stay batched and each generation is re-run alone (OUT/solo/, kept like the
branches) and forked from that: each pair is then exactly the pair batch 1 gives. Under torchrun every process forks
its share of the generations (every world_size-th) and rank 0 gathers the pairs, in the one-process order.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from visualizer.interventions import InterventionError, Intervention, content_hash, parse_spec
from visualizer.probe_pairs import Unpaired, pair_of, paired_json, paired_markdown, paired_tables
from visualizer.step_names import STEP_HELP, StepNameError, parse_step
from visualizer.trace import Trace, TraceError

from .common import CliError
from .fork import read_parent, write_branch


@dataclass(frozen=True)
class Intervene:
    """What `--intervene` and `--at` ask for."""

    block: int  # from 1
    step: int
    interventions: tuple[Intervention, ...]

    def said(self) -> str:
        return f"{', '.join(iv.spec() for iv in self.interventions)} at {self.block}:{self.step}"


def add_intervene_arguments(parser) -> None:
    parser.add_argument("--intervene", action="append", default=[], metavar="SPEC",
                        help='fork every generation at --at with this intervention, written as fork records it '
                             '("forbid 0=O", "set 4=sea", "topk 3"; repeatable), and table the paired change per regime '
                             "(docs/lab.md); batched or under torchrun, each generation is forked at batch 1")
    parser.add_argument("--at", metavar="BLOCK:STEP", help=f"with --intervene, the fork step: {STEP_HELP}; a bare STEP is of block 1")


def read_intervene(args) -> Intervene | None:
    """The asked-for intervention (None: none); CliError in one line for anything wrong, before a model loads."""
    if not args.intervene:
        if args.at:
            raise CliError("--at is the fork step of --intervene: give an intervention too")
        return None
    if not args.at:
        raise CliError("--intervene needs --at BLOCK:STEP, the step every generation is forked at")
    try:
        name = parse_step(args.at)
        interventions = tuple(parse_spec(spec.strip()) for spec in args.intervene)
    except (StepNameError, InterventionError) as exc:
        raise CliError(f"--at {exc}" if isinstance(exc, StepNameError) else str(exc)) from None
    if args.samplers:
        raise CliError("--intervene forks one sampler's runs: leave out --samplers")
    return Intervene(name.block or 1, name.step, interventions)


def run_pairs(backend, out, results, probes: dict, intervene: Intervene, check, cluster=None):
    """Fork every generation of `results` (ProbeResults, their traces under `out`), pair each with its branch;
    (pairs, unpaired) in the order of `results`. `probes` maps item ids to probes. Under torchrun (`cluster`)
    each rank forks its share and every rank gets all pairs. A branch already written for this parent and these
    interventions is read, not forked again."""
    numbered = list(enumerate(results))
    mine = cluster.deal(numbered) if cluster is not None else numbered
    done = [(index, _pair_one(backend, Path(out), result, probes, intervene, check, f"{index + 1}/{len(results)}"))
            for index, result in mine]
    if cluster is not None:
        done = sorted((item for share in cluster.gather(done) for item in share), key=lambda item: item[0])
    pairs = [outcome for _, outcome in done if not isinstance(outcome, Unpaired)]
    return pairs, [outcome for _, outcome in done if isinstance(outcome, Unpaired)]


def _pair_one(backend, out: Path, result, probes: dict, intervene: Intervene, check, count: str):
    """One generation's Pair, or Unpaired with the fork's one-line refusal."""
    from backends import BackendError
    from visualizer.plan import item_id

    probe = probes[item_id(result.regime, result.prompt_id, result.seed)]
    specs = tuple(iv.spec() for iv in intervene.interventions)
    data, parent = read_parent(out / result.trace_file)
    where = out / branch_file(result.trace_file)
    where.parent.mkdir(parents=True, exist_ok=True)
    try:
        if parent.start is not None and parent.start.batch:
            data, parent = _solo(backend, out / solo_file(result.trace_file), parent)
        branch = _kept(where, content_hash(data), intervene, specs)
        if branch is None:
            print(f"probe --intervene: {count} {result.regime}/{result.prompt_id} seed {result.seed}", file=sys.stderr)
            branch = write_branch(backend, parent, data, where, block=intervene.block, step=intervene.step,
                                  interventions=intervene.interventions)
    except BackendError as exc:
        return Unpaired(result.regime, result.prompt_id, result.seed, str(exc))
    return pair_of(probe, result.seed, result.trace_file, parent, branch, check)


def _solo(backend, path: Path, batched: Trace):
    """(bytes, Trace) of the generation of the batch row `batched` run alone (the parent a fork can re-run): the one
    at `path` when it is that generation's and complete, else recorded now and written whole."""
    from backends.run import record_trace
    from visualizer.files import write_atomically

    if path.exists():
        try:
            data = path.read_bytes()
            kept = Trace.from_json(data)
            if kept.finished and kept.prompt == batched.prompt and kept.settings == batched.settings:
                return data, kept
        except (OSError, TraceError):
            pass
    path.parent.mkdir(parents=True, exist_ok=True)
    solo = record_trace(backend, batched.prompt, batched.settings)
    write_atomically(path, solo.save)
    return path.read_bytes(), solo


def solo_file(trace_file: str) -> Path:
    """Where a batched generation's batch-1 re-run is written, relative to OUT: under solo/, not traces/."""
    return Path("solo") / Path(trace_file).relative_to("traces")


def branch_file(trace_file: str) -> Path:
    """Where a generation's branch is written, relative to OUT: its trace's path under branches/, not traces/."""
    return Path("branches") / Path(trace_file).relative_to("traces")


def _kept(path: Path, parent_hash: str, intervene: Intervene, specs: tuple[str, ...]):
    """The branch at `path` when it is this parent's with these interventions; None otherwise (fork it again)."""
    if not path.exists():
        return None
    try:
        branch = Trace.load(path)
    except TraceError:
        return None
    mark = branch.branch
    same = mark is not None and (mark.parent, mark.block, mark.step, mark.interventions) == (
        parent_hash, intervene.block, intervene.step, specs)
    return branch if same else None


def write_pairs(out, intervene: Intervene, pairs, unpaired, *, n_resamples: int) -> str:
    """Append the paired table to OUT/table.md and put it into OUT/table.json ("intervention"); the markdown."""
    out = Path(out)
    tables = paired_tables(pairs, unpaired, n_resamples=n_resamples)
    md = paired_markdown(tables, intervene.said())
    with (out / "table.md").open("a", encoding="utf-8") as f:
        f.write("\n" + md)
    path = out / "table.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["intervention"] = paired_json(tables, pairs, unpaired, {
        "at": [intervene.block, intervene.step], "interventions": [iv.spec() for iv in intervene.interventions]})
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    write_pairs_parquet(out / "results" / "pairs.parquet", pairs)
    return md


def write_pairs_parquet(path: Path, pairs) -> None:
    """One row per pair: the generation, both runs' figures side by side (parent_*, branch_*; null where a figure
    is undefined), whether the answer changed and both verdicts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from visualizer.files import write_atomically
    from visualizer.metrics import is_defined
    from visualizer.probe_pairs import FIGURES

    def value(x):
        return float(x) if is_defined(x) else None

    columns = {"regime": pa.array([p.regime for p in pairs], pa.string()),
               "prompt_id": pa.array([p.prompt_id for p in pairs], pa.string()),
               "seed": pa.array([p.seed for p in pairs], pa.int64()),
               "trace_file": pa.array([p.trace_file for p in pairs], pa.string())}
    for name, _, _ in FIGURES:
        for side in ("parent", "branch"):
            columns[f"{side}_{name}"] = pa.array([value(getattr(p, side)[name]) for p in pairs], pa.float64())
    columns |= {"answer_changed": pa.array([p.answer_changed for p in pairs], pa.bool_()),
                "correct_parent": pa.array([p.correct_parent for p in pairs], pa.bool_()),
                "correct_branch": pa.array([p.correct_branch for p in pairs], pa.bool_())}
    table = pa.table(columns)
    write_atomically(path, lambda where: pq.write_table(table, where))
