"""The study's figures, drawn from a probe run's results alone: tau_b and tokens per accept step per regime.

    tables = regime_tables(read_results("runs/probe"))                   # from generations.parquet
    paths = write_figures("runs/probe", {"": tables})                    # one run
    paths = write_figures("runs/probe", {"entropy-bound": t1, "discrete-ddim": t2}, prefix="samplers-")

Each figure is written as SVG (the page's theme) and PNG (posts), beside reliability.svg:
- `tau_b`: the mean token tau_b of each regime with its prompt-clustered 95 % CI, and the
  block-sequential control (the hollow mark: what clean left-to-right blocks of 16 would score at
  the same content lengths);
- `tokens_per_step`: content tokens first accepted per accepting step, with its CI;
- `found_then_lost`: per scorable regime, accuracy at the end against "correct at any step" (the argmax's answer
  scored at every step, `metrics.found_lost`), each with its CI: the gap is the answers found, then lost;
- `calibration`: per scorable regime, the reliability diagram of mean commit confidence (10 equal-width bins, each
  bin's accuracy as a bar with its count) against the diagonal, with ECE and Brier, within the regime only.
Several series (samplers) are drawn side by side within each regime, one colour each.  The
numbers are `visualizer.probe_tables.regime_tables`' over the reported split, so the figures and
table.md agree; `python -m visualizer probe-report OUT` redraws them for a finished or partial run.
"""

from __future__ import annotations

import math
from pathlib import Path

from .figure import INK, Figure
from .metrics import Undefined
from .svg import CONTROL_COLOR

SERIES_COLORS = ("#7c3aed", "#0ea5e9", "#f59e0b", "#16a34a", "#ef4444", "#64748b")


def write_figures(out, tables: dict[str, list[dict]], *, prefix: str = "", split: str = "confirmatory") -> list[Path]:
    """OUT/<prefix>tau_b.svg|png and OUT/<prefix>tokens_per_step.svg|png from each series'
    `regime_tables` (one series: one run; several: samplers side by side); the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    figures = [("tau_b", tau_b_figure(tables, split=split)), ("tokens_per_step", tokens_per_step_figure(tables, split=split))]
    if len(tables) == 1:  # one run's regimes (samplers side by side get each sampler's own, in its folder)
        figures += [("found_then_lost", found_then_lost_figure(tables, split=split)),
                    ("calibration", calibration_figure(tables, split=split))]
    for name, figure in figures:
        svg, png = out / f"{prefix}{name}.svg", out / f"{prefix}{name}.png"
        svg.write_text(figure.svg(label=name.replace("_", " ")), encoding="utf-8")
        figure.png().save(png, optimize=True)
        written += [svg, png]
    return written


def tau_b_figure(tables: dict[str, list[dict]], *, split: str = "confirmatory") -> Figure:
    """Mean token tau_b per regime (dot), its 95 % CI (whisker) and the block-sequential control (ring)."""
    lows = [v for rows in tables.values() for t in rows
            for v in (t["tau_b"], *(t["tau_b_ci"] if isinstance(t["tau_b_ci"], tuple) else ())) if not isinstance(v, Undefined)]
    low = max(-1.0, min(-0.25, math.floor(min(lows + [0.0]) / 0.25) * 0.25))  # room below 0: JSON's was negative
    return _dot_figure(tables, value="tau_b", ci="tau_b_ci", control="control_tau_b", low=low, high=1.0,
                       title=f"Token tau_b per regime, 95% CI over prompts ({split})",
                       axis="tau_b: commit step vs position (1 = left to right, 0 = no order)", digits=3)


def tokens_per_step_figure(tables: dict[str, list[dict]], *, split: str = "confirmatory") -> Figure:
    """Content tokens first accepted per accepting step, per regime, with its 95 % CI."""
    top = max([_top(t) for rows in tables.values() for t in rows] + [1.0])
    high = math.ceil(top / 5) * 5 if top > 5 else math.ceil(top)
    return _dot_figure(tables, value="tokens_per_accept_step", ci="tokens_per_accept_step_ci", control=None,
                       low=0.0, high=float(high), title=f"Tokens per accept step per regime, 95% CI over prompts ({split})",
                       axis="content tokens first accepted per step that accepted any", digits=1)


def found_then_lost_figure(tables: dict[str, list[dict]], *, split: str = "confirmatory") -> Figure:
    """Accuracy at the end and correct at any step per scorable regime (first series' run), each with its 95 % CI."""
    rows = [t for t in next(iter(tables.values()), []) if not isinstance(t.get("correct_at_any_step"), Undefined)]
    series = {"correct at the end": [dict(t, value=t["accuracy_at_end"], ci=t["accuracy_at_end_ci"]) for t in rows],
              "correct at any step": [dict(t, value=t["correct_at_any_step"], ci=t["correct_at_any_step_ci"]) for t in rows]}
    return _dot_figure(series, value="value", ci="ci", control=None, low=0.0, high=1.0,
                       title=f"Found, then lost: right at the end vs right at some step, 95% CI over prompts ({split})",
                       axis="share of scored generations (the gap: answers found, then lost)", digits=2)


def calibration_figure(tables: dict[str, list[dict]], *, split: str = "confirmatory") -> Figure:
    """One reliability diagram per scorable regime (all steps): accuracy per confidence bin, with its count."""
    rows = [t for t in next(iter(tables.values()), []) if not isinstance(t.get("calibration", {}).get("all", Undefined("")), Undefined)]
    panel_w, panel_h = 180, 170
    fig = Figure(max(480, 20 + panel_w * max(len(rows), 1)), panel_h + 70)
    fig.text(8, 14, f"Calibration of commit confidence within each regime, all steps ({split})", size=11)
    if not rows:
        fig.text(20, 80, "no regime has scored generations with a commit confidence (record_topk 0?)")
        return fig
    for i, t in enumerate(rows):
        c = t["calibration"]["all"]
        x0, y0 = 40 + i * panel_w, 40
        size = panel_w - 50
        fig.line(x0, y0 + size, x0 + size, y0, INK, opacity=0.35, dash=True)  # perfect calibration
        fig.line(x0, y0 + size, x0 + size, y0 + size, INK, opacity=0.3)
        fig.line(x0, y0, x0, y0 + size, INK, opacity=0.3)
        for b in c["reliability"]:
            if b["count"] == 0:
                continue
            left, w = x0 + b["low"] * size, (b["high"] - b["low"]) * size
            bar_h = max(b["accuracy"] * size, 1.0)  # a bin of wrong answers: a 1-pixel bar at 0, still visible
            top = y0 + size - bar_h
            fig.rect(left + 1, top, w - 2, bar_h, SERIES_COLORS[0], opacity=0.75,
                     tip=f"{t['regime']}: confidence {b['low']:.1f}-{b['high']:.1f}, accuracy {b['accuracy']:.2f}, n={b['count']}")
            fig.text(left + w / 2, top - 3, str(b["count"]), size=8, anchor="middle")
        fig.text(x0 + size / 2, y0 + size + 14, t["regime"], size=10, anchor="middle")
        fig.text(x0 + size / 2, y0 + size + 26, f"ECE {_num(c['ece'])} · Brier {_num(c['brier'])} · n {c['generations']}",
                 size=8, anchor="middle")
    fig.text(8, fig.height - 6, "x: mean commit confidence (10 bins); y: accuracy; bar labels: generations; dashed: calibrated",
             size=9)
    return fig


def _num(value) -> str:
    return "–" if isinstance(value, Undefined) else f"{value:.3f}"


def _top(row: dict) -> float:
    ci = row.get("tokens_per_accept_step_ci")
    values = [row["tokens_per_accept_step"], *(ci if isinstance(ci, tuple) else ())]
    return max([v for v in values if not isinstance(v, Undefined)] + [0.0])


def _dot_figure(tables: dict[str, list[dict]], *, value: str, ci: str, control: str | None, low: float, high: float,
                title: str, axis: str, digits: int) -> Figure:
    series = list(tables)
    regimes = list(dict.fromkeys(t["regime"] for rows in tables.values() for t in rows))
    legend_h = 16 if len(series) > 1 or control else 0
    width = max(480, 90 * max(len(regimes), 1) * (1 + 0.35 * (len(series) - 1)) + 70)
    fig = Figure(int(width), 270 + legend_h)
    x0, x1, y0, y1 = 52, fig.width - 14, 30 + legend_h, fig.height - 46
    y = lambda v: y1 - (min(max(v, low), high) - low) / (high - low) * (y1 - y0)  # noqa: E731
    fig.text(x0 - 44, 14, title, size=11)
    legend = [(name, SERIES_COLORS[k % len(SERIES_COLORS)], False) for k, name in enumerate(series)] if len(series) > 1 else []
    if control:
        legend.append(("block-sequential control", CONTROL_COLOR, True))
    for k, (name, color, hollow) in enumerate(legend):  # one row under the title
        left = x0 + sum(len(n) * 6.2 + 30 for n, _, _ in legend[:k])
        fig.circle(left + 4, 26, 4, color, hollow=hollow)
        fig.text(left + 12, 30, name, size=10)
    for tick in _ticks(low, high):
        fig.line(x0, y(tick), x1, y(tick), INK, opacity=0.35 if tick == 0 else 0.1)
        fig.text(x0 - 5, y(tick) + 3, f"{tick:g}", size=9, anchor="end")
    fig.text(x0 - 44, fig.height - 6, axis, size=9)
    if not regimes:
        fig.text((x0 + x1) / 2, (y0 + y1) / 2, "no generations yet", anchor="middle")
        return fig
    slot = (x1 - x0) / len(regimes)
    for i, regime in enumerate(regimes):
        cx = x0 + (i + 0.5) * slot
        fig.text(cx, y1 + 14, regime, size=10, anchor="middle")
        for k, name in enumerate(series):
            row = next((t for t in tables[name] if t["regime"] == regime), None)
            if row is None:
                continue
            color = SERIES_COLORS[k % len(SERIES_COLORS)]
            px = cx + (k - (len(series) - 1) / 2) * min(26, slot / (len(series) + 1))
            interval = row[ci]
            if not isinstance(interval, Undefined):
                fig.line(px, y(interval[0]), px, y(interval[1]), color, width=2)
                for end in interval:
                    fig.line(px - 4, y(end), px + 4, y(end), color, width=1.5)
            if control and not isinstance(row[control], Undefined):
                fig.circle(px, y(row[control]), 5, CONTROL_COLOR, hollow=True,
                           tip=f"{regime}: block-sequential control {row[control]:.2f}")
            mean = row[value]
            n = f"{row['prompts']}×{row['generations'] // max(row['prompts'], 1)}"
            if isinstance(mean, Undefined):
                fig.text(px, y1 - 4, "–", anchor="middle", color=color)
                continue
            tip = f"{regime}{' ' + name if name else ''}: {mean:.{digits}f}" + ("" if isinstance(interval, Undefined)
                                                           else f" [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]")
            fig.circle(px, y(mean), 3.5, color, tip=f"{tip}, {n} prompts × seeds")
            if len(series) == 1:
                fig.text(px + 8, y(mean) + 3, f"{mean:.{min(digits, 2)}f}", size=9, color=color)
        fig.text(cx, y1 + 26, n, size=8, anchor="middle")
    return fig


def _ticks(low: float, high: float) -> list[float]:
    span = high - low
    step = next(s for s in (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500) if span / s <= 8)
    first = round(low / step) * step
    return [round(first + k * step, 6) for k in range(int(span / step + 1e-9) + 1)]
