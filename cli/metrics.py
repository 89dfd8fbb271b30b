"""`metrics` prints the commit-order metrics of a saved trace as JSON.

    python -m visualizer metrics run.json [--no-positions] [--include-thought] [--family lines] [--svg structure.svg]
                                          [--trajectory-svg finalized.svg]
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
        help="print the commit-order metrics of a saved trace as JSON",
        description="Print the commit-order metrics of a saved trace as JSON. Undefined values are null, "
        "with the reason in a sibling '<name>_undefined' field.",
    )
    parser.add_argument("trace", help="a trace file saved by the app or the CLI (run.json)")
    parser.add_argument("--no-positions", action="store_true", help="leave out the per-position lists")
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
    if args.no_positions:
        for block in data["blocks"]:
            for name in ("commit_step", "settle_step", "commit_entropy_nats", "measured_positions"):
                block.pop(name)
        for block in data["trajectory"]["blocks"]:
            for name in ("finalized_step", "argmax_flips", "commit_after_finalized_steps", "commit_confidence"):
                block.pop(name)
    print(_compact_lists(json.dumps(data, indent=2, ensure_ascii=False)))
    return 0


def _compact_lists(text: str) -> str:
    """Put lists of numbers on one line (JSON strings never hold a raw newline, so this is safe)."""
    return re.sub(
        r"\[\n\s+([-+0-9.eE,\snul]+?)\n\s*\]",
        lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
        text,
    )
