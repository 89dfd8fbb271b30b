"""The runs of one app session as a tree: a root run and its branches ("Fork here"), named as the visitor sees them.

Pure and immutable so a Gradio session can keep one in gr.State and replace it on each change. Names follow the
tree: the root is "root", its branches "branch 1", "branch 2", a branch of branch 1 is "branch 1.1", and so on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .states import frame_refs
from .trace import Trace

ROOT = "root"


@dataclass(frozen=True)
class TreeRun:
    name: str  # "root", "branch 1", "branch 1.2"
    parent: str | None  # the parent's name; None for the root
    summary: str  # "forbid 11=moon at 1:10" for a branch; "" for the root


@dataclass(frozen=True)
class RunTree:
    runs: tuple[TreeRun, ...] = ()

    def add_root(self) -> RunTree:
        """A fresh tree holding only a new root run (a new live run or a loaded trace starts over)."""
        return RunTree((TreeRun(ROOT, None, ""),))

    def add_branch(self, parent: str, block: int, step: int, specs: tuple[str, ...]) -> tuple[RunTree, str]:
        """The tree with a new branch of `parent` forked at block `block`, step `step` (both from 1), and its name."""
        if parent not in self.names():
            raise ValueError(f"no run named {parent!r} in this session")
        children = sum(1 for run in self.runs if run.parent == parent)
        prefix = "branch " if parent == ROOT else parent + "."
        name = f"{prefix}{children + 1}"
        summary = f"{', '.join(specs) or 'no intervention'} at {block}:{step}"
        return replace(self, runs=(*self.runs, TreeRun(name, parent, summary))), name

    def add_start(self, source: str, block: int, step: int, texts: tuple[str, ...] = ()) -> tuple[RunTree, str]:
        """The tree with a new run warm-started from `source`'s canvas at block:step (from 1), and `texts` ("POS=TEXT")
        placed over it, and its name: "start 1", "start 2", ... under its source, so it is counted with the branches
        (the hosted cap). A start from text alone is a new root, as a generated run is (`RunSession.show`)."""
        if source not in self.names():
            raise ValueError(f"no run named {source!r} in this session")
        name = f"start {sum(1 for run in self.runs if run.name.startswith('start ')) + 1}"
        summary = f"warm start from {source}'s canvas at {block}:{step}" + (f" and text {'; '.join(texts)}" if texts else "")
        return replace(self, runs=(*self.runs, TreeRun(name, source, summary))), name

    def names(self) -> list[str]:
        return [run.name for run in self.runs]

    def branch_count(self) -> int:
        return sum(1 for run in self.runs if run.parent is not None)

    def labels(self) -> list[str]:
        """One line per run, for the session's run dropdown: "root", "branch 1 (forbid 11=moon at 1:10)"."""
        return [f"{run.name} ({run.summary})" if run.summary else run.name for run in self.runs]


def branch_cap_refusal(tree: RunTree, cap: int | None) -> str | None:
    """The one-line refusal once a session holds `cap` branches (hosted mode); None while another fits or no cap."""
    if cap is None or tree.branch_count() < cap:
        return None
    return f"This session already holds {cap} branch{'' if cap == 1 else 'es'}, the most a hosted session may run; reload the page to start over."


def fork_point(trace: Trace, frame: int) -> tuple[int, int]:
    """The replay frame `frame` as a fork point (block, step), both from 1 as the app's captions count them.

    A block's commit frame forks at that block's last step, the step whose result the frame shows. ValueError
    with one line for a frame outside the run."""
    refs = frame_refs(trace)
    if not 0 <= frame < len(refs):
        raise ValueError(f"frame {frame} is outside this run (it has frames 0 to {len(refs) - 1})")
    ref = refs[frame]
    if ref.kind == "step":
        record = trace.steps[ref.index]
        return record.block + 1, record.step + 1
    last = max(s.step for s in trace.steps if s.block == ref.block)
    return ref.block + 1, last + 1
