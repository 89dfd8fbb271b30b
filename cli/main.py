"""The command line: record runs, render frames, measure commit order, export animations, run probes.

    python -m visualizer record --prompt "Why is the sky blue?" --seed 0 --out run.json
    python -m visualizer frame run.json --step 1:5 --out frame.png
    python -m visualizer metrics run.json
    python -m visualizer export run.json --gif run.gif --mp4 run.mp4 --webp run.webp
    python -m visualizer demos --out assets/demos
    python -m visualizer compare seed0.json seed1.json --gif both.gif --png end.png
    python -m visualizer probe --seeds 2 --out probe
    python -m visualizer probe-report probe
    python -m visualizer alternatives run.json --position 17 --step 5
    python -m visualizer budget run.json --step 2:5 --svg budget.svg
    python -m visualizer layers run.json --out-dir views --position 14
    python -m visualizer fork run.json --at 1:10 --forbid 11=moon --out branch.json

One module per command group; this one only assembles them.  A step is BLOCK:STEP from 1 on every
command, as the app's captions show it (`visualizer.step_names`).  Bad input ends with a one-line
`error: ...` and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from .common import CliError
from .export import add_compare_command, add_demos_command, add_export_command
from .fork import add_fork_command
from .insight import add_alternatives_command, add_budget_command, add_layers_command
from .metrics import add_metrics_command
from .probe import add_probe_command
from .record import add_frame_command, add_record_command
from .report import add_probe_report_command

COMMANDS = (
    add_record_command, add_frame_command, add_metrics_command, add_probe_command, add_probe_report_command,
    add_export_command, add_demos_command, add_compare_command, add_alternatives_command, add_budget_command,
    add_layers_command, add_fork_command,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m visualizer", description="Watch DiffusionGemma denoise.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(subparsers)
    return parser


# The commands that run under torchrun, and what they do there; any other is refused in one line before it loads
# anything (N processes would each write the same files).
UNDER_TORCHRUN = {"record": "shards one model over the processes (--parallel, default expert)",
                  "probe": "deals its generations over the processes"}


def main(argv=None) -> int:
    from backends.sharded import is_follower, under_torchrun

    args = build_parser().parse_args(argv)
    try:
        if under_torchrun() and args.command not in UNDER_TORCHRUN:
            said = "; ".join(f"{name} {what}" for name, what in UNDER_TORCHRUN.items())
            raise CliError(f"{args.command} runs in one process: start it with python -m visualizer, not torchrun "
                           f"(under torchrun, {said})")
        return args.run(args)
    except CliError as exc:
        # Under torchrun every rank meets the same error: rank 0 alone says it and carries the status. A follower
        # leaves with 0: torchrun's agent ends every sibling as soon as one rank fails, so a follower failing first
        # (it has nothing to print) could end rank 0 before its line is written (seen under load).
        if is_follower():
            return 0
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2


def run_as_process(argv=None) -> int:
    """`main` as a process's entry point (`python -m visualizer`, the console script): under torchrun,
    every path out then ends the process group in order, so a finished run exits 0
    (backends/process_group.py); without torchrun that is a no-op."""
    from backends.process_group import end_process

    try:
        status = main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (`metrics run.json | head -1`): what it took is all it wanted, so no traceback. Python's
        # documented way out: point stdout at devnull so the interpreter's last flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 1
    return end_process(status)


if __name__ == "__main__":
    sys.exit(run_as_process())
