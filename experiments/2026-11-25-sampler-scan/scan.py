"""Sampler settings of the built-in model on a development set (not the evaluation set).

The development set is the held-out tasks of the *training* generators' visitor families
(json_paraphrase, math_paraphrase, acrostic_paraphrase: held out by hash, never trained on, and
written apart from prompts/tasks/paraphrase_eval.py) and 20 off-family prompts written for this
scan, none of them in either evaluation sample.  Each setting is the shipped checkpoint with a
changed generation_config.json, in a temporary folder; answers go to NAME-s{seed}.txt here.

    python experiments/2026-11-25-sampler-scan/scan.py default 30 0 2 '{}'
    python experiments/2026-11-25-sampler-scan/scan.py cool 30 0 2 '{"t_min": 0.2, "t_max": 0.4}'
"""

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from prompts.tasks import heldout_tasks  # noqa: E402
from training.evaluate import DEFAULT_MODEL, run_items  # noqa: E402

OFF_FAMILY_DEV = (
    "Write a short poem about autumn leaves.", "Describe a busy train station.", "What is a Python dictionary?",
    "Explain how rain forms in one sentence.", "Tell me about giraffes.", "Why do people travel?",
    "Give me tips for learning to cook.", "How does a refrigerator work?", "What makes a good teacher?",
    "Write a few sentences about tea.", "Tell me a story about a lost cat.", "Write a birthday message for my sister.",
    "What is the difference between a lake and a sea?", "How do birds fly?", "Describe the taste of chocolate.",
    "What should I read next?", "Tell me something interesting about bees.", "Summarize what a computer does.",
    "Explain why the sky gets dark at night.", "Write a short note to a neighbor.",
)
FAMILIES = ("json_paraphrase", "math_paraphrase", "acrostic_paraphrase")


def items(per_family: int, seed: int) -> list[dict]:
    out = [{"kind": "heldout", "family": family, "id": f"{family}-{i}", "prompt": task.prompt, "answer": task.answer,
            "seed": seed} for family in FAMILIES for i, task in enumerate(heldout_tasks(family, per_family))]
    out += [{"kind": "off_family", "family": "off", "id": f"off-{i}", "prompt": prompt, "answer": None, "seed": seed}
            for i, prompt in enumerate(OFF_FAMILY_DEV)]
    return out


def with_settings(folder: Path, changes: dict) -> str:
    """The shipped checkpoint's files, linked, with generation_config.json changed."""
    for f in DEFAULT_MODEL.iterdir():
        if f.name != "generation_config.json":
            (folder / f.name).symlink_to(f)
    config = json.loads((DEFAULT_MODEL / "generation_config.json").read_text())
    for key, value in changes.items():
        if key == "entropy_bound":
            config["sampler_config"]["entropy_bound"] = value
        else:
            config[key] = value
    (folder / "generation_config.json").write_text(json.dumps(config, indent=2))
    return str(folder)


def scores(results: list[dict]) -> dict[str, int]:
    """Right answers per visitor family."""
    return {family: sum(r["ok"] for r in results if r["family"] == family) for family in FAMILIES}


def write_answers(results: list[dict], path, header: str = "") -> None:
    with open(path, "w") as out:
        out.write(header)
        for r in results:
            out.write(f"[{r['family']} ok={r['ok']} steps={r['steps_used']}] Q: {r['prompt']}\n  A: {r['response']}\n")


def main() -> None:
    name, per_family, seed, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    changes = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    with tempfile.TemporaryDirectory() as folder:
        results = run_items(items(per_family, seed), model=with_settings(Path(folder), changes), device="cpu",
                            workers=workers, threads=1)
    steps = [r["steps_used"] for r in results if r.get("steps_used")]
    print(name, changes, {f: f"{n}/{per_family}" for f, n in scores(results).items()},
          f"mean steps {sum(steps) / len(steps):.1f}")
    write_answers(results, HERE / f"{name}-s{seed}.txt")


if __name__ == "__main__":
    main()
