"""The command line: record runs, render frames, measure commit order, export animations, run probes.

    python -m visualizer record --prompt "Why is the sky blue?" --seed 0 --out run.json
    python -m visualizer frame run.json --step 5 --out frame.png
    python -m visualizer metrics run.json
    python -m visualizer export run.json --gif run.gif --mp4 run.mp4 --webp run.webp
    python -m visualizer demos --out assets/demos
    python -m visualizer compare seed0.json seed1.json --gif both.gif --png end.png
    python -m visualizer probe --seeds 2 --out probe
    python -m visualizer probe-report probe
    python -m visualizer alternatives run.json --position 17 --step 5
    python -m visualizer budget run.json --step 5 --svg budget.svg

One module per command group; this one only assembles them.  Bad input ends with a one-line
`error: ...` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from .common import CliError
from .export import add_compare_command, add_demos_command, add_export_command
from .insight import add_alternatives_command, add_budget_command
from .metrics import add_metrics_command
from .probe import add_probe_command
from .record import add_frame_command, add_record_command
from .report import add_probe_report_command

COMMANDS = (
    add_record_command, add_frame_command, add_metrics_command, add_probe_command, add_probe_report_command,
    add_export_command, add_demos_command, add_compare_command, add_alternatives_command, add_budget_command,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m visualizer", description="Watch DiffusionGemma denoise.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
