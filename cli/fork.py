"""`fork` re-runs a recorded run from its seed and changes what the model sees from one step on (docs/lab.md).

    python -m visualizer fork run.json --at 1:10 --forbid 11=moon --out branch.json
    python -m visualizer fork run.json --at 1:5 --set 11=storm --remask 3-6 --knob t_min=0.5 --out branch.json

`--at BLOCK:STEP` counts both from 1, as the app's captions do (`1:10` is the tenth step of the first block);
positions count from 0, as pins do. The branch equals its parent up to that step (checked), is written in the
same trace format, and records its parent's hash, the fork point and the interventions (`"branch"`). A refused
fork writes nothing and leaves the parent as it was; the branch file is written whole or not at all.
`--at` is read as every command reads a step (`visualizer.step_names`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from visualizer.files import write_atomically
from visualizer.interventions import KINDS, InterventionError, parse_intervention, plan_problems
from visualizer.step_names import STEP_HELP, StepNameError, locate_step, parse_step

from .common import CliError
from .progress import RunProgress


class _Intervene(argparse.Action):
    """Every intervention flag appends (kind, argument) to one list, so they keep the order given."""

    def __call__(self, parser, namespace, value, option_string=None):
        namespace.interventions = [*(namespace.interventions or []), (self.dest_kind, value)]


def add_fork_command(subparsers) -> None:
    p = subparsers.add_parser("fork", help="re-run a trace from its seed with interventions from block:step on")
    p.add_argument("trace", help="the parent trace (.json); it is only read")
    p.add_argument("--at", required=True, metavar="BLOCK:STEP", help=f"the fork step: {STEP_HELP}; a bare STEP is of block 1")
    p.add_argument("--out", required=True, help="the branch's trace file to write (.json)")
    for kind in KINDS.values():
        action = p.add_argument(f"--{kind.name}", action=_Intervene, metavar=kind.usage, dest="interventions",
                                default=[], help=f"{kind.help} (repeatable)")
        action.dest_kind = kind.name
    p.add_argument("--model", help="hub id or folder of the parent's model (default: the one the trace names)")
    p.add_argument("--backend", help="default: the parent's")
    p.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda when available)")
    p.add_argument("--quiet", action="store_true", help="no per-step progress on stderr")
    p.set_defaults(run=run_fork)


def run_fork(args) -> int:
    from backends import BACKENDS, BackendError, default_model, load_backend

    try:
        name = parse_step(args.at)
    except StepNameError as exc:
        raise CliError(f"--at {exc}") from None
    try:
        interventions = tuple(parse_intervention(kind, arg) for kind, arg in args.interventions)
    except InterventionError as exc:
        raise CliError(str(exc)) from None
    parent_path, out = Path(args.trace), Path(args.out)
    if not out.parent.exists():
        raise CliError(f"folder {out.parent} does not exist")
    if out.exists() and parent_path.exists() and out.resolve() == parent_path.resolve():
        raise CliError("--out is the parent trace: write the branch to another file, the parent stays as recorded")
    data, parent = read_parent(parent_path)

    # everything the trace alone can refuse, before a model loads
    kind = args.backend or parent.model.backend
    entry = BACKENDS.get(kind)
    if entry is None:
        raise CliError(f"unknown backend {kind!r}: use one of {', '.join(BACKENDS)}")
    if not _forks(entry):
        forks = [name for name, e in BACKENDS.items() if _forks(e)]
        from backends.interventions import no_fork_reason

        raise CliError(f"the {kind} backend cannot fork a run ({no_fork_reason(kind)}); forks run on: {', '.join(forks)}")
    try:
        at = locate_step(parent, name)
    except StepNameError as exc:
        raise CliError(f"--at {exc}") from None
    block, step = at.block + 1, at.step + 1
    refuse = plan_problems(interventions, parent.canvas_length)
    if refuse:
        raise CliError(refuse[0])

    source = args.model or (default_model() if parent.model.builtin else parent.model.source)
    try:
        backend = load_backend(source, backend=kind, sampler=parent.settings.sampler, device=args.device)
        progress = None if args.quiet else RunProgress(sys.stderr, label="branch")
        try:
            branch = write_branch(backend, parent, data, out, block=block, step=step, interventions=interventions,
                                  on_record=progress)
        finally:
            if progress is not None:
                progress.close()
    except BackendError as exc:
        raise CliError(str(exc)) from None
    said = ", ".join(iv.spec() for iv in interventions) or "no intervention"
    end = branch.end
    print(f"wrote {out}: branch of {parent_path} at {block}:{step} ({said}); {len(branch.steps)} steps, "
          f"finished: {end.finish_reason}" + (f" ({end.error})" if end.error else ""), file=sys.stderr)
    return 1 if end.finish_reason == "error" else 0


def read_parent(path: Path):
    """(the file's bytes, its Trace): the parent of a fork, only read; CliError in one line."""
    from visualizer.trace import Trace, TraceError

    try:
        data = path.read_bytes()
        return data, Trace.from_json(data)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    except TraceError as exc:
        raise CliError(f"{path}: {exc}") from None


def write_branch(backend, parent, data: bytes, out: Path, *, block: int, step: int, interventions, on_record=None):
    """The branch of `parent` (whose file held `data`) at block:step, from 1, written to `out` whole or not at all;
    BackendError in one line when the fork is refused (then nothing is written). `probe --intervene` forks here too."""
    from backends.interventions import fork_trace
    from visualizer.interventions import content_hash

    branch = fork_trace(backend, parent, content_hash(data), block=block, step=step, interventions=interventions,
                        on_record=on_record)
    write_atomically(out, branch.save)  # a refused or broken write leaves no branch file
    return branch


def _forks(entry) -> bool:
    """The backend declares interventions (read from its capabilities; a backend whose libraries are missing cannot)."""
    try:
        return bool(entry.capabilities.interventions)
    except ImportError:
        return False
