"""How the math families write their working: two-digit sums and differences split at the tens.

Every number below 200 is one token of the built-in model's tokenizer, so "39 + 48 = 87" asks it
to hold 39 + 48 as a fact of its own: one of 3,600 sums and 2,400 differences in the visitors'
range, each seen a few dozen times in a training run. It learned the template range (operands up
to 20) and missed half the visitors' larger ones (`29 - 22 = 41`). Written the way people do it
in their heads,

    39 + 48 = 39 + 40 + 8 = 79 + 8 = 87.
    52 - 49 = 52 - 40 - 9 = 12 - 9 = 3.
    8 + 48 = 48 + 8 = 56.

every step is a fact of a small family (add or take a multiple of ten; add or take one digit) that
every other problem practises too. The sampler commits the easy tokens first, so the working fills
in before the result, which a visitor also sees in the canvas.

    worked(39, "+", 48)   # "39 + 48 = 39 + 40 + 8 = 79 + 8 = 87."
"""

from __future__ import annotations

_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a // b}


def worked(a: int, symbol: str, b: int) -> str:
    """One sentence from `a symbol b` to its result, with the working a small model can check."""
    answer = _APPLY[symbol](a, b)
    if symbol == "+" and a < 10 <= b:  # the larger number first: 8 + 48 is 48 + 8
        return f"{a} + {b} = {b} + {a} = {answer}."
    if symbol in "+-" and a >= 10 and b > 10 and b % 10:
        tens, ones = b - b % 10, b % 10
        middle = _APPLY[symbol](a, tens)
        return f"{a} {symbol} {b} = {a} {symbol} {tens} {symbol} {ones} = {middle} {symbol} {ones} = {answer}."
    return f"{a} {symbol} {b} = {answer}."
