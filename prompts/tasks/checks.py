"""Checkers: does a response satisfy its task?  One pure function per kind of answer.

Code is never run in this process: `run_python` starts a fresh isolated interpreter with a
timeout and (on POSIX) CPU and memory limits, in an empty temporary folder.

    check_acrostic("OCEANS", response)          # True when each line starts with its letter
    check_json_schema(schema, response)          # True when it parses and matches the schema
    run_python("assert 1 + 1 == 2")              # True when the code exits cleanly in time
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile

CODE_TIMEOUT_S = 5.0
_CODE_MEMORY_BYTES = 512 * 1024 * 1024
_FENCE = re.compile(r"```(?:[a-zA-Z]+)?\n(.*?)```", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def content_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines() if line.strip()]


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def extract_code(text: str) -> str:
    """The first fenced code block, or the whole text when there is none."""
    match = _FENCE.search(text)
    return match.group(1) if match else text


# ---- demo families -----------------------------------------------------------------------------
def check_acrostic(letters: str, response: str) -> bool:
    lines = content_lines(response)
    if len(lines) != len(letters):
        return False
    return all(line.lstrip("-*0123456789. ")[:1].upper() == letter.upper() for line, letter in zip(lines, letters))


def check_sentence_count(count: int, response: str) -> bool:
    text = response.strip()
    return bool(text) and text[-1] in ".!?" and len(sentences(text)) == count


def check_numbered_list(items: tuple[str, ...], count: int, response: str) -> bool:
    """`count` lines "1. Item: fact", each naming a different item of the category."""
    lines = content_lines(response)
    if len(lines) != count:
        return False
    named = []
    for number, line in enumerate(lines, start=1):
        match = re.match(rf"{number}\.\s+(.+?):\s+\S", line)
        if not match or match.group(1) not in items:
            return False
        named.append(match.group(1))
    return len(set(named)) == count


def check_same_first_and_last_sentence(response: str) -> bool:
    parts = sentences(response)
    return len(parts) >= 3 and parts[0].strip() == parts[-1].strip()


def count_syllables(word: str) -> int:
    """English syllables by vowel groups, with the usual silent-e rules: good enough for our lines."""
    word = re.sub(r"[^a-z]", "", word.lower())
    if not word:
        return 0
    groups = re.findall(r"[aeiouy]+", word)
    count = len(groups)
    if word.endswith("e") and not re.search(r"[^aeiouy]le$", word) and not word.endswith(("ee", "ye")) and count > 1:
        count -= 1  # silent e: "stone", "pale"; but "cir-cle" keeps it
    if re.search(r"[^aeiouy]es$", word) and not re.search(r"([^aeiouy]l|s|z|ch|sh|g|c)es$", word) and count > 1:
        count -= 1  # "flames", "waves"; but "pud-dles", "chan-ges" keep it
    if word.endswith("ed") and not word.endswith(("ted", "ded")) and count > 1:
        count -= 1  # "rolled"
    return max(count, 1)


def line_syllables(line: str) -> int:
    return sum(count_syllables(w) for w in line.split())


def check_haiku(response: str) -> bool:
    """Three lines of 5, 7, 5 syllables, then an explanation that names the pattern."""
    blocks = [b for b in re.split(r"\n\s*\n", response.strip()) if b.strip()]
    if len(blocks) < 2:
        return False
    lines = content_lines(blocks[0])
    explanation = " ".join(blocks[1:]).lower()
    return (
        [line_syllables(line) for line in lines] == [5, 7, 5]
        and ("5-7-5" in explanation or ("five" in explanation and "seven" in explanation))
    )


def check_doctests(name: str, count: int, response: str) -> bool:
    """The function is defined and at least `count` doctest examples run, all passing."""
    code = extract_code(response)
    if not re.search(rf"^def {re.escape(name)}\(", code, re.MULTILINE):
        return False
    program = (
        "import doctest, sys\n"
        f"source = {code!r}\n"
        "namespace = {'__name__': 'candidate'}\n"
        "exec(compile(source, 'candidate', 'exec'), namespace)\n"
        "finder = doctest.DocTestFinder()\n"
        "runner = doctest.DocTestRunner(verbose=False)\n"
        f"for test in finder.find(namespace[{name!r}], {name!r}, globs=namespace):\n"
        "    runner.run(test, out=lambda s: None)\n"
        "result = runner.summarize(verbose=False)\n"
        f"sys.exit(0 if result.failed == 0 and result.attempted >= {count} else 1)\n"
    )
    return run_python(program)


def check_code_tests(tests: tuple[str, ...], response: str) -> bool:
    """The response's code, followed by the hidden asserts, exits cleanly."""
    return run_python(extract_code(response) + "\n\n" + "\n".join(tests) + "\n")


# ---- probe regimes -----------------------------------------------------------------------------
def final_number(response: str) -> float | None:
    """The number after the last "answer is", else the last number in the text."""
    tail = response.lower().rsplit("answer is", 1)
    numbers = _NUMBER.findall(tail[-1] if len(tail) == 2 else response)
    if not numbers:
        return None
    return float(numbers[0] if len(tail) == 2 else numbers[-1])


def check_number(answer: float, response: str) -> bool:
    value = final_number(response.replace(",", ""))
    return value is not None and abs(value - answer) < 1e-6


def check_fact(answer: str, response: str) -> bool:
    return re.search(rf"(?<![A-Za-z]){re.escape(answer)}(?![A-Za-z])", response, re.IGNORECASE) is not None


def parse_json_object(response: str):
    """The JSON value of the response (a fenced block or the bare text), or None when it does not parse."""
    try:
        return json.loads(extract_code(response).strip())
    except ValueError:
        return None


_JSON_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def matches_schema(value, schema: dict) -> bool:
    """The JSON Schema subset our tasks use: type, properties, required, additionalProperties, items."""
    kind = schema.get("type")
    if kind is not None and not _JSON_TYPES[kind](value):
        return False
    if kind == "array" and "items" in schema:
        return all(matches_schema(item, schema["items"]) for item in value)
    if kind == "object":
        properties = schema.get("properties", {})
        if any(key not in value for key in schema.get("required", ())):
            return False
        if schema.get("additionalProperties", True) is False and set(value) - set(properties):
            return False
        return all(matches_schema(value[key], sub) for key, sub in properties.items() if key in value)
    return True


def check_json_schema(schema: dict, response: str) -> bool:
    value = parse_json_object(response)
    return value is not None and matches_schema(value, schema)


# ---- running code safely -----------------------------------------------------------------------
# The child limits itself before it runs the candidate, so no preexec_fn is needed (that hook is
# unsafe in a multithreaded parent, such as a process that holds a torch model).
_BOOTSTRAP = (
    "import sys\n"
    "try:\n"
    "    import resource\n"
    "    resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))\n"
    "    resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
    "except (ImportError, ValueError, OSError):\n"
    "    pass  # no POSIX limits here (Windows): the timeout still applies\n"
    "source = sys.stdin.read()\n"
    "exec(compile(source, 'candidate', 'exec'), {{'__name__': '__main__'}})\n"
)


def run_python(code: str, *, timeout_s: float = CODE_TIMEOUT_S) -> bool:
    """Run `code` in a fresh isolated interpreter (-I: no site, no env, no cwd on the path).

    True when it exits with status 0 within the timeout; anything else (exception, timeout,
    CPU or memory limit) is False.  The child runs in an empty temporary folder and reads the
    code from stdin, so the code never touches the command line or the disk.
    """
    bootstrap = _BOOTSTRAP.format(cpu=int(timeout_s) + 1, memory=_CODE_MEMORY_BYTES)
    with tempfile.TemporaryDirectory() as folder:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-c", bootstrap],
                cwd=folder,
                input=code.encode("utf-8"),
                capture_output=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return False
    return done.returncode == 0
