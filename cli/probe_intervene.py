"""`probe --intervene SPEC --at BLOCK:STEP`: every generation of the probe run twice, itself and its branch (docs/lab.md).

    python -m visualizer probe --regimes math --seeds 2 --intervene "forbid 0=O" --at 1:1 --out runs/forbid

The probe runs as always (its traces, results and tables); then each generation is forked at BLOCK:STEP with the
interventions, through `fork`'s own code (`cli.fork.write_branch`), into OUT/branches/ beside OUT/traces/, and the
paired effect per regime (`visualizer.probe_pairs`) is appended to table.md and written into table.json
("intervention"). A rerun keeps the branches already written for the same parent and interventions.
A fork re-runs its parent alone, so the generations run at batch 1, in one process.
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
                             "(docs/lab.md); runs at --batch-size 1 in one process")
    parser.add_argument("--at", metavar="BLOCK:STEP", help=f"with --intervene, the fork step: {STEP_HELP}; a bare STEP is of block 1")


def read_intervene(args) -> Intervene | None:
    """The asked-for intervention (None: none); CliError in one line for anything wrong, before a model loads."""
    from backends.sharded import under_torchrun

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
    if args.batch_size != "1":
        raise CliError("--intervene forks each generation, and a fork re-runs its parent alone (a parent that was one "
                       "row of a batch cannot be forked): use --batch-size 1")
    if args.samplers:
        raise CliError("--intervene forks one sampler's runs: leave out --samplers")
    if under_torchrun():
        raise CliError("--intervene runs in one process: run it without torchrun")
    return Intervene(name.block or 1, name.step, interventions)


def run_pairs(backend, out, results, probes: dict, intervene: Intervene, check):
    """Fork every generation of `results` (ProbeResults, their traces under `out`), pair each with its branch;
    (pairs, unpaired). `probes` maps item ids to probes. A branch already written for this parent and these
    interventions is read, not forked again."""
    from backends import BackendError
    from visualizer.plan import item_id

    out = Path(out)
    specs = tuple(iv.spec() for iv in intervene.interventions)
    pairs, unpaired = [], []
    for index, result in enumerate(results):
        probe = probes[item_id(result.regime, result.prompt_id, result.seed)]
        data, parent = read_parent(out / result.trace_file)
        where = out / branch_file(result.trace_file)
        where.parent.mkdir(parents=True, exist_ok=True)
        branch = _kept(where, content_hash(data), intervene, specs)
        if branch is None:
            print(f"probe --intervene: {index + 1}/{len(results)} {result.regime}/{result.prompt_id} seed {result.seed}",
                  file=sys.stderr)
            try:
                branch = write_branch(backend, parent, data, where, block=intervene.block, step=intervene.step,
                                      interventions=intervene.interventions)
            except BackendError as exc:
                unpaired.append(Unpaired(result.regime, result.prompt_id, result.seed, str(exc)))
                continue
        pairs.append(pair_of(probe, result.seed, result.trace_file, parent, branch, check))
    return pairs, unpaired


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
    return md
