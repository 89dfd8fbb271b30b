"""The "why" charts as self-contained inline SVG: the accept budget of a step, structure first, reliability.

    svg = accept_budget_svg(trace, frame)          # why this step accepted k positions
    svg = structure_first_svg(trace)               # commit steps of structural vs free tokens, per block
    svg = reliability_svg(tables)                  # accuracy per tertile of commit entropy, per regime

Pure functions of their inputs, like `charts`: text and axes follow the page's theme
(`currentColor`), hover targets carry `<title>` tooltips, steps and blocks are shown from 1.
A request the trace cannot answer (no candidates, an older trace, no committed block) gives a
small chart with a one-line reason, never an error.
"""

from __future__ import annotations

from html import escape

import numpy as np

from .accept_budget import BudgetError, ConfidenceBudget, EntropyBudget, accept_budget, budget_sentence
from .alternatives import AlternativesError, frame_position
from .numbers import number
from .metrics import Undefined
from .metrics.structure import StructureFirst, structure_first
from .svg import COMMIT_COLOR, CONTROL_COLOR, MARK_COLOR, TAU_COLOR, Plot, bar, hline, hover_rect, svg_text, title_text
from .trace import Trace

FIT_COLOR = COMMIT_COLOR  # accepted by the rule: green, as a first acceptance
MISSED_COLOR = MARK_COLOR  # the one that just missed
OTHER_COLOR = CONTROL_COLOR
BOUND_COLOR = "#f59e0b"
MAX_BARS = 48  # the accept-budget chart shows the lowest-entropy positions, up to this many
STRUCTURAL_COLOR = TAU_COLOR
FREE_COLOR = CONTROL_COLOR


# ---- accept budget ---------------------------------------------------------------------------------
def accept_budget_svg(trace: Trace, frame: int, *, width: int = 560, height: int = 210) -> str:
    """The step shown at `frame`: each candidate position's entropy, sorted ascending, with the bound."""
    plot = Plot(width, height, left=40, right=14, top=22, bottom=40)
    try:
        block, step = frame_position(trace, frame)
        budget = accept_budget(trace, block, step)
    except (AlternativesError, BudgetError) as exc:
        return _message(plot, "accept budget", str(exc))
    if isinstance(budget, ConfidenceBudget):
        return _confidence_svg(plot, budget)
    return _entropy_svg(plot, budget)


def _entropy_svg(plot: Plot, b: EntropyBudget) -> str:
    # Up to MAX_BARS bars: all from the lowest when few fit, else the window around the boundary
    # (the last that fit and the first left out), where the decision was made.
    total = b.order.size
    shown = min(total, max(b.fits + 8, 16), MAX_BARS)
    lo = max(0, min(b.fits + 8, total) - shown)
    ranks = range(lo, lo + shown)
    spent_after = b.spent_before + b.entropy  # cumulative entropy through each position
    first_missed = b.fits if b.fits < total else None
    top = max(b.bound * 1.6, float(b.spent_before[min(b.fits, total - 1)]) * 1.15, 1e-6)
    y = lambda v: plot.y1 - min(v, top) / top * plot.h  # noqa: E731
    bar_w = plot.w / shown
    parts = [title_text(plot, budget_sentence(b))]
    for value in (0, b.bound):
        parts.append(svg_text(plot.x0 - 4, y(value) + 3, f"{value:g}", anchor="end", size=9))
    parts.append(hline(plot, plot.y1, opacity=0.4))
    for k, rank in enumerate(ranks):
        color = FIT_COLOR if rank < b.fits else MISSED_COLOR if rank == first_missed else OTHER_COLOR
        height = plot.y1 - y(float(b.entropy[rank]))
        x = plot.x0 + k * bar_w
        parts.append(bar(x + bar_w * 0.15, plot.y1 - height, bar_w * 0.7, max(height, 0.5), color, opacity=0.85))
        if b.entropy[rank] > top:
            parts.append(svg_text(x + bar_w / 2, plot.y0 + 8, "▲", anchor="middle", size=8, fill=color))
        position = int(b.order[rank])
        verdict = ("fits" if rank < b.fits else
                   f"missed: {b.spent_before[rank]:.4g} nats already spent > bound {b.bound:g} (by {number(b.spent_before[rank] - b.bound)})")
        recorded = "accepted" if b.recorded[rank] else "not accepted"
        tip = (f"#{rank + 1} lowest: position {position}, entropy {b.entropy[rank]:.4g} nats; spent before it "
               f"{b.spent_before[rank]:.4g} nats; {verdict}; the sampler: {recorded}")
        parts.append(hover_rect(x, plot.y0, bar_w, plot.h, tip))
    # the budget spent before each position (the sampler's left-hand side), against the bound
    points = " ".join(f"{plot.x0 + (k + 0.5) * bar_w:.1f},{y(float(b.spent_before[r])):.1f}" for k, r in enumerate(ranks))
    parts.append(f'<polyline points="{points}" fill="none" stroke="currentColor" stroke-width="1.2" stroke-dasharray="2 2"/>')
    parts.append(f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{y(b.bound):.1f}" y2="{y(b.bound):.1f}" stroke="{BOUND_COLOR}" stroke-width="1.5"/>')
    # labelled at the left, where the bars are lowest, so the tall ones on the right never hide it
    parts.append(svg_text(plot.x0 + 2, y(b.bound) - 4, f"bound {b.bound:g} nats", size=9, fill=BOUND_COLOR))
    which = f"#{lo + 1} to #{lo + shown} lowest of {total}" if lo else f"{shown} of {total}"
    legend = (f"bars: entropy of each position, lowest first ({which}); dotted: entropy spent "
              f"before it; green fit, red just missed")
    parts.append(svg_text(plot.x0, plot.y1 + 14, legend, size=9))
    parts.append(svg_text(plot.x0, plot.y1 + 27, f"spent through #{lo + shown}: {float(spent_after[lo + shown - 1]):.3g} nats", size=9))
    return plot.svg(parts, label=budget_sentence(b))


def _confidence_svg(plot: Plot, b: ConfidenceBudget) -> str:
    shown = min(b.positions.size, MAX_BARS)
    parts = [title_text(plot, budget_sentence(b))]
    if shown == 0:
        parts.append(svg_text(plot.x0 + plot.w / 2, plot.y0 + plot.h / 2, "every position was already revealed", anchor="middle"))
        return plot.svg(parts, label="accept budget")
    y = lambda v: plot.y1 - v * plot.h  # noqa: E731
    bar_w = plot.w / shown
    for value in (0, 0.5, 1):
        parts.append(svg_text(plot.x0 - 4, y(value) + 3, f"{value:g}", anchor="end", size=9))
    parts.append(hline(plot, plot.y1, opacity=0.4))
    below_best = next((r for r in range(shown) if b.probability[r] < b.threshold), None)
    for rank in range(shown):
        p = float(b.probability[rank])
        color = FIT_COLOR if b.revealed[rank] else MISSED_COLOR if rank == below_best else OTHER_COLOR
        x = plot.x0 + rank * bar_w
        parts.append(bar(x + bar_w * 0.15, y(p), bar_w * 0.7, max(plot.y1 - y(p), 0.5), color, opacity=0.85))
        state = "revealed (forced: none reached the threshold)" if b.revealed[rank] and b.forced else \
            "revealed" if b.revealed[rank] else f"stays hidden ({b.threshold - p:.3g} below the threshold)"
        parts.append(hover_rect(x, plot.y0, bar_w, plot.h, f"position {int(b.positions[rank])}: sample probability {p:.4f}; {state}"))
    parts.append(f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{y(b.threshold):.1f}" y2="{y(b.threshold):.1f}" stroke="{BOUND_COLOR}" stroke-width="1.5"/>')
    parts.append(svg_text(plot.x1 - 2, y(b.threshold) - 4, f"threshold {b.threshold:g}", anchor="end", size=9, fill=BOUND_COLOR))
    parts.append(svg_text(plot.x0, plot.y1 + 14, f"bars: probability of the token sampled at each hidden position, highest first ({shown} of {b.positions.size})", size=9))
    return plot.svg(parts, label=budget_sentence(b))


# ---- structure first ------------------------------------------------------------------------------
def structure_first_svg(trace: Trace, *, family: str | None = None, include_thought: bool = False,
                        width: int = 560, height: int = 190) -> str:
    """Mean commit step of structural and free tokens in each committed block, with the difference and AUROC."""
    result = structure_first(trace, family=family, include_thought=include_thought)
    return structure_first_chart(result, width=width, height=height)


def structure_first_chart(result: StructureFirst, *, width: int = 560, height: int = 190) -> str:
    plot = Plot(width, height, left=70, right=14, top=22, bottom=40)
    title = (f"Structure first ({result.family} rules, {result.measured}): free − structural = "
             + (f"{result.difference:.2f} steps, AUROC {_fmt(result.auroc)}" if not isinstance(result.difference, Undefined)
                else f"undefined: {result.difference.reason}"))
    if not result.blocks:
        return _message(plot, "structure first", str(result.difference.reason))
    steps = [v for blk in result.blocks for v in (blk.mean_step_structural, blk.mean_step_free) if not isinstance(v, Undefined)]
    top = max(steps + [1.0]) * 1.1
    x = lambda v: plot.x0 + v / top * plot.w  # noqa: E731
    row_h = plot.h / len(result.blocks)
    parts = [title_text(plot, title)]
    for i, blk in enumerate(result.blocks):
        cy = plot.y0 + (i + 0.5) * row_h
        parts.append(svg_text(plot.x0 - 6, cy + 3, f"block {blk.block + 1}", anchor="end", size=9))
        parts.append(f'<line x1="{plot.x0}" x2="{plot.x1}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="currentColor" stroke-opacity="0.12"/>')
        values = [(blk.mean_step_structural, STRUCTURAL_COLOR, f"structural ({blk.structural})"),
                  (blk.mean_step_free, FREE_COLOR, f"free ({blk.free})")]
        defined = [(v, c, n) for v, c, n in values if not isinstance(v, Undefined)]
        if len(defined) < 2:  # a class is empty in this block: say so on the chart, not only in the tooltip
            parts.append(svg_text(plot.x1, cy - 8, f"undefined: {getattr(blk.difference, 'reason', 'a class is empty')}",
                                  anchor="end", size=9))
        if len(defined) == 2:
            parts.append(f'<line x1="{x(defined[0][0]):.1f}" x2="{x(defined[1][0]):.1f}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="currentColor" stroke-width="2" stroke-opacity="0.5"/>')
        for value, color, name in defined:
            parts.append(f'<circle cx="{x(value):.1f}" cy="{cy:.1f}" r="5" fill="{color}"><title>{escape(f"{name}: mean commit step {value + 1:.2f}")}</title></circle>')
        tip = (f"block {blk.block + 1}: structural {blk.structural}, free {blk.free} tokens; "
               f"free − structural {_fmt(blk.difference, 2)} steps; AUROC {_fmt(blk.auroc)}"
               + (f" ({blk.difference.reason})" if isinstance(blk.difference, Undefined) else ""))
        parts.append(hover_rect(plot.x0, cy - row_h / 2, plot.w, row_h, tip))
    for value in np.linspace(0, top, 5):
        parts.append(svg_text(x(value), plot.y1 + 12, f"{value + 1:.0f}" if top >= 8 else f"{value + 1:.1f}", anchor="middle", size=9))
    parts.append(svg_text(plot.x1, plot.y1 + 24, "mean commit step (first acceptance)", anchor="end", size=9))
    parts.append(f'<circle cx="{plot.x0 + 4}" cy="{plot.y1 + 30}" r="4" fill="{STRUCTURAL_COLOR}"/>')
    parts.append(svg_text(plot.x0 + 12, plot.y1 + 33, "structural", size=9))
    parts.append(f'<circle cx="{plot.x0 + 80}" cy="{plot.y1 + 30}" r="4" fill="{FREE_COLOR}"/>')
    parts.append(svg_text(plot.x0 + 88, plot.y1 + 33, "free", size=9))
    return plot.svg(parts, label=title)


# ---- reliability ----------------------------------------------------------------------------------
def reliability_svg(tables: list[dict], *, width: int = 480, height: int = 220) -> str:
    """Accuracy in each tertile of commit entropy, one line per regime, with the clustered CIs (probe tables)."""
    plot = Plot(width, height, left=40, right=110, top=22, bottom=34)
    curves = [(t["regime"], t["reliability"]) for t in tables if not isinstance(t.get("reliability"), Undefined)]
    if not curves:
        return _message(plot, "reliability", "no regime has an answer checker with scored generations")
    palette = ["#7c3aed", "#16a34a", "#f59e0b", "#0ea5e9", "#ef4444", "#64748b"]
    x = lambda k: plot.x0 + (k + 0.5) * plot.w / 3  # noqa: E731
    y = lambda v: plot.y1 - v * plot.h  # noqa: E731
    parts = [title_text(plot, "Reliability: accuracy per tertile of commit entropy (95% CI)")]
    for value in (0, 0.5, 1):
        parts.append(hline(plot, y(value), opacity=0.12))
        parts.append(svg_text(plot.x0 - 4, y(value) + 3, f"{value:g}", anchor="end", size=9))
    for k, name in enumerate(("low", "middle", "high")):
        parts.append(svg_text(x(k), plot.y1 + 13, f"{name} entropy", anchor="middle", size=9))
    for i, (regime, rows) in enumerate(curves):
        color = palette[i % len(palette)]
        dx = (i - (len(curves) - 1) / 2) * 5  # regimes side by side, so their CIs do not hide each other
        points = [(x(k) + dx, y(r["accuracy"])) for k, r in enumerate(rows) if not isinstance(r["accuracy"], Undefined)]
        parts.append('<polyline points="' + " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
                     + f'" fill="none" stroke="{color}" stroke-width="1.8"/>')
        for k, r in enumerate(rows):
            if isinstance(r["accuracy"], Undefined):
                continue
            cx = x(k) + dx
            if not isinstance(r["accuracy_ci"], Undefined):
                low, high = r["accuracy_ci"]
                parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}" stroke="{color}" stroke-width="1.2"/>')
            tip = f"{regime}, {r['tertile']} entropy: accuracy {r['accuracy']:.2f} over {r['generations']} generation(s)"
            parts.append(f'<circle cx="{cx:.1f}" cy="{y(r["accuracy"]):.1f}" r="3" fill="{color}"><title>{escape(tip)}</title></circle>')
        parts.append(svg_text(plot.x1 + 8, plot.y0 + 12 + i * 14, regime, size=10, fill=color))
    return plot.svg(parts, label="reliability curve")


def _message(plot: Plot, label: str, message: str) -> str:
    return plot.svg([title_text(plot, label), svg_text(plot.x0, plot.y0 + plot.h / 2, message, size=10)], label=label)


def _fmt(value, digits: int = 3) -> str:
    return "undefined" if isinstance(value, Undefined) else f"{value:.{digits}f}"
