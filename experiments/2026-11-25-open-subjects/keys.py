"""Key-by-key counts of the visitor JSON answers in a `training.evaluate --json` file written before the
report counted them (training.evaluate.key_copies): the asked keys are found again from the prompt.

    python experiments/2026-11-25-open-subjects/keys.py eval results.json
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from training.evaluate import format_report, keys_written, summarize, visitor_tasks  # noqa: E402


def main() -> None:
    visitor_set, path = sys.argv[1], sys.argv[2]
    schemas = {t.prompt: t.answer for t in visitor_tasks(visitor_set, 60) if t.family == "json_paraphrase"}
    results = json.load(open(path))["results"]
    for r in results:
        r["ok"] = r["ok"] in (True, "True")
        r["keys_written"] = keys_written(schemas.get(r["prompt"]), r["response"])
    report = format_report({**summarize(results), "targets": [], "families": [], "demos": [], "off_family": []})
    print(report.split("\n\ntarget")[0].strip().split("\n\n")[-1])


if __name__ == "__main__":
    main()
