"""`metrics` prints the commit-order metrics of a saved trace as JSON.

    python -m visualizer metrics run.json [--no-positions]
"""

from __future__ import annotations

import json
import re

from visualizer.metrics import metrics_json

from .common import load_trace


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
    parser.set_defaults(run=metrics_command)


def metrics_command(args) -> int:
    trace = load_trace(args.trace)
    data = metrics_json(trace)
    if args.no_positions:
        for block in data["blocks"]:
            for name in ("commit_step", "settle_step", "commit_entropy_nats"):
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
