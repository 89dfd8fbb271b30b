"""One way to write the numbers a reader sees in the readouts, the inspector and the tooltips:
three significant digits, never an exponent, and anything nearer zero than a thousandth as "< 0.001".

    number(0.4548)     # '0.455'
    number(1.0)        # '1'
    number(1.55e-06)   # '< 0.001'

live_view.js's `number` writes the same for the numbers the browser formats itself (tests/test_readouts.py).
"""

from __future__ import annotations

import math

SMALLEST = 0.001  # below this a probability, an entropy or a KL is "about zero" to a reader


def number(value: float) -> str:
    value = float(value)
    if not math.isfinite(value):
        return "n/a"
    if value == 0:
        return "0"
    if abs(value) < SMALLEST:
        return "< 0.001" if value > 0 else "> -0.001"
    text = f"{value:.3g}"
    if "e" in text:  # 1234.5 -> '1235', not '1.23e+03'; halves away from zero, as the browser's toFixed
        return str(int(math.copysign(math.floor(abs(value) + 0.5), value)))
    return text
