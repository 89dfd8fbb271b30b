"""Score a model folder on the sampler scan's development set (not the evaluation set).

The development set is the held-out tasks of the training generators' visitor families and 20
off-family prompts of its own (experiments/2026-11-25-sampler-scan/scan.py says how it was
written apart from the evaluation set).  Used to choose between third stages without looking at the
evaluation set; answers go to OUT_FILE for reading.

    python experiments/2026-11-25-gather-retrain/devscore.py runs/final 60 15 dev-final.txt
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from training.evaluate import run_items  # noqa: E402

_spec = importlib.util.spec_from_file_location("scan", HERE.parent / "2026-11-25-sampler-scan" / "scan.py")
scan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scan)


def main() -> None:
    model, per_family, workers, out_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    results = run_items(scan.items(per_family, seed=0), model=model, device="cpu", workers=workers, threads=1)
    found = scan.scores(results)
    print(model, {f: f"{n}/{per_family}" for f, n in found.items()}, flush=True)
    scan.write_answers(results, out_file, header=f"{model} {found} of {per_family} each\n")


if __name__ == "__main__":
    main()
