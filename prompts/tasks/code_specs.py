"""Small Python functions the code families ask for: signature, docstring, body, example inputs.

Each `FunctionSpec` is written once and used three ways: with doctests (the demo family),
HumanEval-style (complete a signature + docstring) and MBPP-style (a one-line description).
Expected outputs are computed by running the spec's own body, so examples can never disagree
with the code the model is trained to write.

    spec = function_specs()[0]
    spec.call(("level",))          # True
    spec.source()                  # 'def is_palindrome(s):\n    return s == s[::-1]\n'
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache
from typing import Callable

from .bank import NUMBER_WORDS

WORDS = (
    "level", "hello", "radar", "python", "noon", "apple", "kayak", "banana", "civic", "river", "stats", "music",
    "refer", "table", "madam", "ocean", "rotor", "garden", "a", "abba", "moon", "tenet", "cat", "racecar",
)
PHRASES = ("the quick fox", "hello world", "a b c", "good morning", "diffusion models are fun", "one two three four",
           "open the door", "red green blue")


def _word(rng):
    return rng.choice(WORDS)


def _phrase(rng):
    return rng.choice(PHRASES)


def _small_int(rng):
    return rng.randint(0, 12)


def _signed_int(rng):
    return rng.randint(-9, 12)


def _int_list(rng):
    return [rng.randint(0, 9) for _ in range(rng.randint(1, 5))]


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    params: str  # "s" or "a, b"
    doc: str  # one line, imperative: "Return True if ..."
    body: str  # the function body, indented by four spaces, one statement per line
    make_args: Callable[[random.Random], tuple] = field(compare=False)

    @property
    def description(self) -> str:
        """The doc as an MBPP-style clause: 'returns True if ...' (no final period)."""
        text = self.doc.rstrip(".")
        return text[0].lower() + text[1:] if not text.startswith("Return") else "returns" + text[len("Return"):]

    def source(self, *, docstring: str | None = None) -> str:
        lines = [f"def {self.name}({self.params}):"]
        if docstring is not None:
            lines.append(docstring)
        lines.append(self.body)
        return "\n".join(lines) + "\n"

    def call(self, args: tuple):
        return _compiled(self.name, self.params, self.body)(*args)

    def example(self, rng: random.Random) -> tuple[str, str]:
        """One (call, expected repr) pair, e.g. ("is_palindrome('noon')", "True")."""
        args = self.make_args(rng)
        call = f"{self.name}({', '.join(repr(a) for a in args)})"
        return call, repr(self.call(args))


@cache
def _compiled(name: str, params: str, body: str):
    namespace: dict = {}
    exec(f"def {name}({params}):\n{body}\n", namespace)  # the project's own spec code, never model output
    return namespace[name]


def _fixed_specs() -> list[FunctionSpec]:
    return [
        FunctionSpec("is_palindrome", "s", "Return True if s reads the same forwards and backwards.",
                     "    return s == s[::-1]", lambda r: (_word(r),)),
        FunctionSpec("reverse_string", "s", "Return the string s reversed.", "    return s[::-1]", lambda r: (_word(r),)),
        FunctionSpec("count_vowels", "s", "Return the number of vowels in s.",
                     "    return sum(1 for c in s if c in 'aeiou')", lambda r: (_word(r),)),
        FunctionSpec("is_even", "n", "Return True if n is even.", "    return n % 2 == 0", lambda r: (_small_int(r),)),
        FunctionSpec("is_odd", "n", "Return True if n is odd.", "    return n % 2 == 1", lambda r: (_small_int(r),)),
        FunctionSpec("square", "n", "Return n multiplied by itself.", "    return n * n", lambda r: (_signed_int(r),)),
        FunctionSpec("cube", "n", "Return n to the power of three.", "    return n ** 3", lambda r: (_signed_int(r),)),
        FunctionSpec("factorial", "n", "Return the product of the numbers from 1 to n.",
                     "    result = 1\n    for i in range(2, n + 1):\n        result *= i\n    return result",
                     lambda r: (r.randint(0, 7),)),
        FunctionSpec("sum_list", "numbers", "Return the sum of the numbers in the list.", "    return sum(numbers)",
                     lambda r: (_int_list(r),)),
        FunctionSpec("max_of_list", "numbers", "Return the largest number in the list.", "    return max(numbers)",
                     lambda r: (_int_list(r),)),
        FunctionSpec("min_of_list", "numbers", "Return the smallest number in the list.", "    return min(numbers)",
                     lambda r: (_int_list(r),)),
        FunctionSpec("count_words", "s", "Return the number of words in s.", "    return len(s.split())",
                     lambda r: (_phrase(r),)),
        FunctionSpec("capitalize_words", "s", "Return s with the first letter of every word in capitals.",
                     "    return s.title()", lambda r: (_phrase(r),)),
        FunctionSpec("remove_spaces", "s", "Return s without any spaces.", "    return s.replace(' ', '')",
                     lambda r: (_phrase(r),)),
        FunctionSpec("double_all", "numbers", "Return a new list with every number doubled.",
                     "    return [2 * x for x in numbers]", lambda r: (_int_list(r),)),
        FunctionSpec("only_even", "numbers", "Return the even numbers of the list, in order.",
                     "    return [x for x in numbers if x % 2 == 0]", lambda r: (_int_list(r),)),
        FunctionSpec("absolute", "n", "Return the absolute value of n.", "    return n if n >= 0 else -n",
                     lambda r: (_signed_int(r),)),
        FunctionSpec("is_sorted", "numbers", "Return True if the list is in increasing order.",
                     "    return numbers == sorted(numbers)", lambda r: (_int_list(r),)),
        FunctionSpec("first_char", "s", "Return the first character of s.", "    return s[0]", lambda r: (_word(r),)),
        FunctionSpec("last_char", "s", "Return the last character of s.", "    return s[-1]", lambda r: (_word(r),)),
        FunctionSpec("string_length", "s", "Return the number of characters in s.", "    return len(s)",
                     lambda r: (_word(r),)),
        FunctionSpec("add", "a, b", "Return the sum of a and b.", "    return a + b",
                     lambda r: (_small_int(r), _small_int(r))),
        FunctionSpec("subtract", "a, b", "Return a minus b.", "    return a - b",
                     lambda r: (_small_int(r), _small_int(r))),
        FunctionSpec("multiply", "a, b", "Return the product of a and b.", "    return a * b",
                     lambda r: (_small_int(r), _small_int(r))),
        FunctionSpec("larger", "a, b", "Return the larger of a and b.", "    return a if a > b else b",
                     lambda r: (_signed_int(r), _signed_int(r))),
        FunctionSpec("to_upper", "s", "Return s in capital letters.", "    return s.upper()", lambda r: (_word(r),)),
        FunctionSpec("count_items", "items", "Return how many items the list has.", "    return len(items)",
                     lambda r: (_int_list(r),)),
    ]


def _parametrized_specs() -> list[FunctionSpec]:
    """Families of one-constant functions: many distinct items for held-out probes."""
    specs = []
    for k in range(2, 10):
        w = NUMBER_WORDS[k]
        specs += [
            FunctionSpec(f"add_{w}", "x", f"Return x plus {k}.", f"    return x + {k}", lambda r: (_signed_int(r),)),
            FunctionSpec(f"multiply_by_{w}", "x", f"Return x times {k}.", f"    return x * {k}",
                         lambda r: (_signed_int(r),)),
            FunctionSpec(f"is_divisible_by_{w}", "n", f"Return True if n is divisible by {k}.",
                         f"    return n % {k} == 0", lambda r: (r.randint(0, 40),)),
            FunctionSpec(f"repeat_{w}_times", "s", f"Return the string s repeated {k} times.", f"    return s * {k}",
                         lambda r: (r.choice(("ab", "x", "hi", "no", "z")),)),
        ]
    for c in "aeiorst":
        specs += [
            FunctionSpec(f"count_{c}", "s", f"Return how many times the letter '{c}' appears in s.",
                         f"    return s.count('{c}')", lambda r: (_word(r),)),
            FunctionSpec(f"starts_with_{c}", "word", f"Return True if word starts with the letter '{c}'.",
                         f"    return word.startswith('{c}')", lambda r: (_word(r),)),
        ]
    return specs


@cache
def function_specs() -> tuple[FunctionSpec, ...]:
    return tuple(_fixed_specs() + _parametrized_specs())


def distinct_examples(spec: FunctionSpec, rng: random.Random, count: int) -> list[tuple[str, str]]:
    """`count` examples with distinct calls (fewer if the spec has fewer distinct inputs)."""
    seen, out = set(), []
    for _ in range(count * 20):
        call, expected = spec.example(rng)
        if call not in seen:
            seen.add(call)
            out.append((call, expected))
            if len(out) == count:
                break
    return out
