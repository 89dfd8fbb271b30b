"""`probe --samplers`: the same prompts and seeds under each sampler, each run resumable in its own
folder, and the side-by-side table (end to end on the random model through the diffusers backend)."""

from __future__ import annotations

import json

from cli.main import main
from visualizer.trace import Trace


def test_probe_runs_every_sampler_side_by_side_and_resumes(tmp_path, capsys, random_model_dir):
    out = tmp_path / "probe"
    args = ["probe", "--out", str(out), "--regimes", "json", "--seeds", "1", "--per-regime", "4", "--samplers", "all",
            "--model", f"diffusers:{random_model_dir}", "--steps", "4", "--bootstrap", "50"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    table = (out / "samplers.md").read_text()
    assert printed.strip().endswith(table.strip().splitlines()[-1])
    for sampler in ("entropy-bound", "discrete-ddim", "block-refinement"):
        assert f"| json | {sampler} |" in table  # one row per regime and sampler
        data = json.loads((out / sampler / "table.json").read_text())
        assert data["meta"]["sampler"] == sampler and (out / sampler / "reliability.svg").exists()
        traces = sorted((out / sampler).rglob("*-seed0.json"))
        assert len(traces) == 2 and all(Trace.load(t).settings.sampler == sampler for t in traces)
    assert ">discrete-ddim<" in (out / "samplers-tau_b.svg").read_text() and (out / "samplers-tokens_per_step.png").exists()
    # the same prompts and seeds under each sampler
    names = {s: sorted(t.name for t in (out / s).rglob("*.json") if "traces" in t.parts) for s in ("entropy-bound", "block-refinement")}
    assert names["entropy-bound"] == names["block-refinement"]
    saved = {t: t.stat().st_mtime_ns for t in out.rglob("*-seed0.json")}
    assert main(args) == 0  # resumes: nothing left to generate, every trace kept as it was
    assert len(saved) == 6 and all(t.stat().st_mtime_ns == when for t, when in saved.items())
    assert (out / "samplers.md").read_text() == table


def test_a_sampler_the_backend_cannot_run_is_refused_in_one_line(tmp_path, capsys, random_model_dir):
    args = ["probe", "--out", str(tmp_path), "--regimes", "json", "--per-regime", "4", "--seeds", "1",
            "--samplers", "discrete-ddim", "--model", str(random_model_dir)]
    assert main(args) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == ["error: this model's backend only has the entropy-bound sampler (got 'discrete-ddim')"]
