"""`metrics` prints a saved trace's commit-order metrics: a short summary, or every figure as JSON (`--json`).

    python -m visualizer metrics run.json                       # a few lines: tau_b, structure first, decided vs accepted
    python -m visualizer metrics run.json --json [--no-positions] [--include-thought] [--family lines] [--svg structure.svg]
                                          [--trajectory-svg finalized.svg]

The summary counts blocks and steps from 1, as the app's captions do; the JSON keeps the trace's 0-based indices
(its `definitions.indices` says so).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from visualizer.insight_charts import structure_first_svg
from visualizer.metrics import metrics_json
from visualizer.metrics.structure import FAMILIES
from visualizer.trajectory_charts import finalized_svg

from .common import CliError, load_trace


def add_metrics_command(subparsers) -> None:
    """Register the `metrics` subcommand on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "metrics",
        help="print the commit-order metrics of a saved trace (a summary; --json: every figure)",
        description="Print the commit-order metrics of a saved trace: a few lines by default, blocks and steps counted "
        "from 1 as the app counts them; with --json every figure, undefined values null with the reason in a sibling "
        "'<name>_undefined' field.",
    )
    parser.add_argument("trace", help="a trace file saved by the app or the CLI (run.json)")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON instead of the summary")
    parser.add_argument("--no-positions", action="store_true", help="JSON without the per-position lists (implies --json)")
    parser.add_argument("--include-thought", action="store_true",
                        help="measure the thinking channel's tokens too, in the commit-order figures and structure first "
                        "(default: the answer only)")
    parser.add_argument("--family", choices=tuple(FAMILIES), help="structure first: the rules to classify tokens by (default: from the prompt)")
    parser.add_argument("--svg", help="also write the structure-first chart to this .svg file")
    parser.add_argument("--trajectory-svg", help="also write the finalized-vs-accepted chart (each block's share of the "
                        "answer decided and accepted by each fraction of its steps) to this .svg file")
    parser.set_defaults(run=metrics_command)


def metrics_command(args) -> int:
    trace = load_trace(args.trace)
    data = metrics_json(trace, include_thought=args.include_thought, family=args.family)
    charts = {args.svg: lambda: structure_first_svg(trace, family=args.family, include_thought=args.include_thought),
              args.trajectory_svg: lambda: finalized_svg(trace)}
    for path, chart in charts.items():
        if not path:
            continue
        out = Path(path)
        if not out.parent.exists():
            raise CliError(f"folder {out.parent} does not exist")
        out.write_text(chart(), encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    if not (args.json or args.no_positions):
        print(summary(data))
        return 0
    if args.no_positions:
        for block in data["blocks"]:
            for name in ("commit_step", "settle_step", "commit_entropy_nats", "measured_positions"):
                block.pop(name)
        for block in data["trajectory"]["blocks"]:
            for name in ("finalized_step", "argmax_flips", "commit_after_finalized_steps", "commit_confidence"):
                block.pop(name)
    print(_compact_lists(json.dumps(data, indent=2, ensure_ascii=False)))
    return 0


def summary(data: dict) -> str:
    """A few lines a person reads: what the run is, its commit order against its control, structure first, and
    when its answer was decided against when it was accepted. Blocks and steps from 1, as the app counts them."""
    blocks = data["blocks"]
    used, budget = sum(b["steps_used"] for b in blocks), sum(b["step_budget"] for b in blocks)
    lines = [f"{data['model']} · finished: {data['finish_reason']} · {_count(len(blocks), 'block')}, "
             f"{used} of {budget} steps used",
             f"commit order ({data['measured']}, {_count(data['measured_tokens'], 'token')}): tau_b {_num(data['tau_b_mean'])} "
             f"(1: left to right; a block-sequential process of the same length gives {_num(data['control_tau_b_mean'])})",
             f"  {_num(data['tokens_per_accept_step'])} tokens a step that accepted any, "
             f"{_num(100 * data['same_step_fraction'] if data['same_step_fraction'] is not None else None)}% of token pairs "
             f"in the same step, {_count(data['remask_events'], 're-mask')}"]
    structure = data.get("structure_first") or {}
    if structure.get("mean_step_structural") is not None and structure.get("mean_step_free") is not None:
        lines.append(f"structure first ({structure['family']}): structural tokens commit at step "
                     f"{_num(structure['mean_step_structural'] + 1)} on average, the others at "
                     f"{_num(structure['mean_step_free'] + 1)} (AUROC {_num(structure.get('auroc'))})")
    trajectory = data.get("trajectory") or {}
    if trajectory.get("mean_finalized_step") is not None:
        lines.append(f"decided (argmax already final) at step {_num(trajectory['mean_finalized_step'] + 1)} on average, "
                     f"accepted {_num(trajectory['mean_commit_after_finalized_steps'])} steps later; "
                     f"{_num(100 * trajectory['finalized_at_half'])}% decided by half its block")
    for b in blocks:
        lines.append(f"block {b['block'] + 1}: {b['steps_used']} of {b['step_budget']} steps ({b['stop_reason'].replace('_', ' ')}), "
                     f"{_count(b['content_length'], 'content token')}, tau_b {_num(b['tau_b'])}")
    lines.append("every figure, with its definition: --json")
    return "\n".join(lines)


def _num(value) -> str:
    """One number format: three significant digits, 'undefined' for a figure without a value."""
    return "undefined" if value is None else f"{value:.3g}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _compact_lists(text: str) -> str:
    """Put lists of numbers on one line (JSON strings never hold a raw newline, so this is safe)."""
    return re.sub(
        r"\[\n\s+([-+0-9.eE,\snul]+?)\n\s*\]",
        lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
        text,
    )
