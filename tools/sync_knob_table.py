"""Write docs/running.md's knob table from the knob table itself (`visualizer.settings.KNOBS`) and, for where
each knob is read, the backends' declared capabilities (each backend's own knobs and each sampler's).

    python -m tools.sync_knob_table      # rewrites the part of docs/running.md between the knob-table markers

tests/test_docs.py fails when the page and the declarations drift apart.
"""

from pathlib import Path

from backends.registry import BACKENDS
from visualizer.settings import KNOBS

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "running.md"
START, END = "<!-- knob-table:start -->", "<!-- knob-table:end -->"


def knob_table() -> str:
    """The Markdown table: one row per knob, in the declarations' order."""
    rows = ["| knob | CLI flag | default | read by: backend (samplers) | what it does |", "|---|---|---|---|---|"]
    for knob in KNOBS.values():  # knob: the API's name
        default = {True: "on", False: "off"}[knob.default] if knob.kind is bool else knob.default if knob.default not in (None, ()) else "none"
        where = "" if knob.in_app else " (command line only)"
        rows.append(f"| `{knob.name}` | `{knob.cli_flag}` | {default} | {read_by(knob.name)} | {knob.help}{where} |")
    return "\n".join(rows) + "\n"


def read_by(name: str) -> str:
    """Where a run reads the knob, from each backend's declared capabilities: "every backend", or each backend
    that reads it, with the samplers that do where not all of its samplers do."""
    out = []
    for backend, entry in BACKENDS.items():
        capabilities = entry.capabilities
        samplers = [spec.name for spec in capabilities.samplers if name in capabilities.knobs_for(spec.name)]
        if samplers:
            out.append(backend if len(samplers) == len(capabilities.samplers) else f"{backend} ({', '.join(samplers)})")
    return "every backend" if len(out) == len(BACKENDS) and all("(" not in b for b in out) else ", ".join(out)


def page_text(page: str) -> str:
    """`page` with its knob table rewritten."""
    before, rest = page.split(START, 1)
    return f"{before}{START}\n{knob_table()}{END}{rest.split(END, 1)[1]}"


if __name__ == "__main__":
    PAGE.write_text(page_text(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
