"""`alternatives` prints what the model weighed at one position; `budget` why a step accepted what it did.

    python -m visualizer alternatives run.json --position 17              # at its block's last step
    python -m visualizer alternatives run.json --position 17 --step 5     # at step 5 of its block
    python -m visualizer budget run.json --step 2:5 [--svg budget.svg]    # block 2, step 5
    python -m visualizer layers run.json --out-dir views [--block 1] [--position 14]

`--position` counts over the whole output from 0 (position 300 of a 256-token canvas is position
44 of block 2); a step is BLOCK:STEP from 1, as the app's captions show it (`visualizer.step_names`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from .common import CliError, add_step_argument, load_trace, locate_step_arg


def add_alternatives_command(subparsers) -> None:
    p = subparsers.add_parser("alternatives", help="print a position's top-k candidates at a step and at its commit step")
    p.add_argument("trace", help="a trace recorded with candidates (record --topk K, on by default)")
    p.add_argument("--position", type=int, required=True, help="position in the output, from 0 over all blocks")
    add_step_argument(p, bare="of the position's block", default="its block's last step")
    p.set_defaults(run=run_alternatives)


def run_alternatives(args) -> int:
    from visualizer.alternatives import AlternativesError, alternatives_text, position_alternatives

    trace = load_trace(args.trace)
    canvas = trace.canvas_length
    started = len({s.block for s in trace.steps})
    if not 0 <= args.position < started * canvas:
        raise CliError(f"--position must be from 0 to {started * canvas - 1} ({started} block(s) of {canvas})")
    block, position = divmod(args.position, canvas)
    step = None
    if args.step is not None:
        at = locate_step_arg(trace, args.step, block=block + 1)
        if at.block != block:
            raise CliError(f"--step {args.step} is in block {at.block + 1}; position {args.position} is in block {block + 1}")
        step = at.step
    try:
        alt = position_alternatives(trace, block, position, step)
    except AlternativesError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    print(alternatives_text(alt))
    return 0


def add_budget_command(subparsers) -> None:
    p = subparsers.add_parser("budget", help="why a step accepted the positions it did (the sampler's rule, replayed)")
    p.add_argument("trace", help="a trace file (.json)")
    add_step_argument(p, bare="of --block")
    p.add_argument("--block", type=int, default=1, help="the block of a STEP alone, from 1 (default 1)")
    p.add_argument("--svg", help="also write the accept-budget chart to this .svg file")
    p.add_argument("--show", type=int, default=12, help="positions to list, lowest entropy first (default 12)")
    p.set_defaults(run=run_budget)


def run_budget(args) -> int:
    from visualizer.accept_budget import BudgetError, EntropyBudget, accept_budget, budget_sentence
    from visualizer.insight_charts import accept_budget_svg
    from visualizer.states import frame_refs

    if args.block < 1:
        raise CliError("--block counts from 1")
    trace = load_trace(args.trace)
    at = locate_step_arg(trace, args.step, block=args.block)
    block, step = at.block, at.step
    try:
        budget = accept_budget(trace, block, step)
    except BudgetError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    print(budget_sentence(budget))
    if isinstance(budget, EntropyBudget):
        print(f"{'rank':>4} {'position':>8} {'entropy':>10} {'spent before':>13}  verdict")
        for rank in range(min(args.show, budget.order.size)):
            verdict = "fits" if rank < budget.fits else f"missed by {budget.spent_before[rank] - budget.bound:.3g}"
            print(f"{rank + 1:>4} {int(budget.order[rank]):>8} {budget.entropy[rank]:>10.4g} {budget.spent_before[rank]:>13.4g}  {verdict}")
    else:
        print(f"{'rank':>4} {'position':>8} {'probability':>12}  revealed")
        for rank in range(min(args.show, budget.positions.size)):
            print(f"{rank + 1:>4} {int(budget.positions[rank]):>8} {budget.probability[rank]:>12.4f}  {'yes' if budget.revealed[rank] else 'no'}")
    if args.svg:
        refs = frame_refs(trace)
        frame = next(i for i, r in enumerate(refs) if r.kind == "step" and r.index == at.index)
        out = Path(args.svg)
        if not out.parent.exists():
            raise CliError(f"folder {out.parent} does not exist")
        out.write_text(accept_budget_svg(trace, frame), encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)
    return 0


def add_layers_command(subparsers) -> None:
    p = subparsers.add_parser("layers", help="write the inside-the-network views of a trace as SVG: per-layer RMS, "
                              "the step-to-step shift, a position's lens ranks")
    p.add_argument("trace", help="a trace recorded with --layers (and the shift, on by default)")
    p.add_argument("--out-dir", required=True, help="folder to write layer_rms.svg, shift.svg and lens_rank.svg into")
    p.add_argument("--block", type=int, default=1, help="block, from 1 (default 1)")
    p.add_argument("--position", type=int, help="position within the block, from 0, for the lens-rank grid "
                   "(default: the first pinned position, else 0)")
    p.set_defaults(run=run_layers)


def run_layers(args) -> int:
    from visualizer.layer_charts import kl_heatmap_svg, kl_to_final_heatmap_svg, layer_rms_svg, lens_rank_svg, recorded_layers

    trace = load_trace(args.trace)
    started = len({s.block for s in trace.steps})
    if not 1 <= args.block <= max(started, 1):
        raise CliError(f"--block must be from 1 to {max(started, 1)}")
    block = args.block - 1
    pins = trace.start.pins if trace.start and block == 0 else ()
    position = args.position if args.position is not None else (pins[0][0] if pins else 0)
    if not 0 <= position < trace.canvas_length:
        raise CliError(f"--position must be from 0 to {trace.canvas_length - 1}")
    out = Path(args.out_dir)
    if out.exists() and not out.is_dir():
        raise CliError(f"{out} is a file, not a folder")
    out.mkdir(parents=True, exist_ok=True)  # the folder is the output, as `export --out` and `probe --out` make theirs
    views = {"layer_rms.svg": layer_rms_svg(trace, block), "shift.svg": kl_heatmap_svg(trace, block),
             "lens_rank.svg": lens_rank_svg(trace, block, position)}
    if any(s.kl_to_final_nats is not None for s in trace.steps):  # recorded with --kl-to-final
        views["kl_to_final.svg"] = kl_to_final_heatmap_svg(trace, block)
    for name, svg in views.items():
        (out / name).write_text(svg, encoding="utf-8")
    layers = recorded_layers(trace)
    print(f"wrote {', '.join(views)} to {out} (block {args.block}, lens position {position}; "
          f"layers {', '.join(map(str, layers)) if layers else 'none recorded'})", file=sys.stderr)
    return 0
