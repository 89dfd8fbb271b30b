"""Write docs/running.md's knob table from the knob table itself (`visualizer.settings.KNOBS`).

    python -m tools.sync_knob_table      # rewrites the part of docs/running.md between the knob-table markers

tests/test_docs.py fails when the page and the declarations drift apart.
"""

from pathlib import Path

from visualizer.settings import KNOBS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "running.md"
START, END = "<!-- knob-table:start -->", "<!-- knob-table:end -->"


def knob_table() -> str:
    """The Markdown table: one row per knob, in the declarations' order."""
    rows = ["| knob | CLI flag | default | read by | what it does |", "|---|---|---|---|---|"]  # knob: the API's name
    for knob in KNOBS.values():
        default = knob.default if knob.kind is not bool and knob.default is not None else {True: "on", False: "off", None: "none"}[knob.default]
        samplers = ", ".join(knob.samplers) if knob.samplers else "every sampler"
        where = "" if knob.in_app else " (command line only)"
        rows.append(f"| `{knob.name}` | `{knob.cli_flag}` | {default} | {samplers} | {knob.help}{where} |")
    return "\n".join(rows) + "\n"


def page_text(page: str) -> str:
    """`page` with its knob table rewritten."""
    before, rest = page.split(START, 1)
    return f"{before}{START}\n{knob_table()}{END}{rest.split(END, 1)[1]}"


if __name__ == "__main__":
    PAGE.write_text(page_text(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
