"""The probe at scale without processes: the batch plan, results as Parquet, prompt sets, flags.

The runs under torchrun (several processes, a killed worker, two local nodes) are in
tests/test_probe_distributed.py.
"""

import dataclasses
import json
import threading

import pandas as pd
import pyarrow.parquet as pq
import pytest
from tests.scripted_probe import PROBES, ScriptedBackend, check

from cli import main
from cli.distributed import Cluster
from cli.probe_runner import run_probe
from prompts.probes import probe_suite
from prompts.sets import PromptSetError, load_prompt_set
from visualizer.plan import Plan, make_plan
from visualizer.probe_tables import ProbeError, regime_tables, result_from_trace
from visualizer.trace import Trace


# ---- the plan ------------------------------------------------------------------------------------
def test_plan_batches_never_mix_seeds_and_batch_size_one_is_one_prompt_at_a_time():
    items = [(r, f"{r}-{i}", seed) for seed in range(3) for r in ("math", "json") for i in range(5)]
    plan = make_plan(items, batch_size=4)
    assert [len(b.items) for b in plan.batches] == [4, 4, 2] * 3
    assert all(b.items[0].endswith(f"seed{b.seed}") for b in plan.batches)
    assert all(all(i.endswith(f"seed{b.seed}") for i in b.items) for b in plan.batches)
    assert [i for b in plan.batches for i in b.items] == [f"{r}/{p}/seed{s}" for r, p, s in items]
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert all(len(b.items) == 1 for b in make_plan(items, batch_size=1).batches)
    with pytest.raises(ValueError, match="at least 1"):
        make_plan(items, batch_size=0)


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_dealing_gives_every_batch_to_exactly_one_rank(world):
    todo = list(range(10))
    shares = [Cluster(rank, world, rank).deal(todo) for rank in range(world)]
    assert sorted(b for share in shares for b in share) == todo
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


# ---- results as a dataset ---------------------------------------------------------------------------
@pytest.mark.processes
def test_results_are_parquet_files_and_the_tables_come_from_them(tmp_path):
    backend = ScriptedBackend()
    results = run_probe(backend, PROBES, seeds=2, out=tmp_path, check=check, batch_size=3)
    generations = pd.read_parquet(tmp_path / "results" / "generations.parquet")
    positions = pd.read_parquet(tmp_path / "results" / "positions.parquet")
    assert len(generations) == len(results) == 16 and backend.calls == 16
    assert set(generations["batch_rows"]) == {3, 2} and generations["batch"].max() == 5  # 8 a seed: 3 + 3 + 2
    assert {"regime", "prompt_id", "seed", "correct", "tau_b", "bin_tau_b_64", "remask_events", "heldout"} <= set(generations)
    assert len(positions) == generations["content_tokens"].sum()
    assert {"commit_step", "settle_step", "commit_entropy_nats", "remasks", "token"} <= set(positions)

    # the tables read from the files equal the tables of the traces themselves
    from_traces = [result_from_trace(p, r.seed, Trace.load(tmp_path / r.trace_file), r.trace_file, check)
                   for r in results for p in PROBES if p.prompt_id == r.prompt_id]
    by_file = regime_tables(results, n_resamples=50)
    by_trace = regime_tables(from_traces, n_resamples=50)
    assert json.dumps(by_file, default=str) == json.dumps(by_trace, default=str)

    one = generations.iloc[0]
    trace = Trace.load(tmp_path / one["trace_file"])
    assert positions[(positions.prompt_id == one.prompt_id) & (positions.seed == one.seed)]["token"].tolist()[:3] \
        == [trace.piece(t) for t in trace.blocks[0].tokens[:3]]


@pytest.mark.processes
def test_a_rerun_skips_finished_batches_and_redoes_a_missing_one(tmp_path):
    run_probe(ScriptedBackend(), PROBES, seeds=1, out=tmp_path, check=check, batch_size=3)
    before = pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist()
    (tmp_path / "results" / "parts" / "batch-000001-generations.parquet").unlink()  # as if killed before it
    again = ScriptedBackend()
    run_probe(again, PROBES, seeds=1, out=tmp_path, check=check, batch_size=3)
    assert again.calls == 3  # batch 1 only
    assert pq.read_table(tmp_path / "results" / "generations.parquet").to_pylist() == before


@pytest.mark.processes
def test_a_rerun_with_another_plan_is_refused(tmp_path):
    run_probe(ScriptedBackend(), PROBES, seeds=1, out=tmp_path, check=check, batch_size=3)
    with pytest.raises(ProbeError, match="planned as 3 batches of up to 3 rows"):
        run_probe(ScriptedBackend(), PROBES, seeds=1, out=tmp_path, check=check, batch_size=2)
    with pytest.raises(ProbeError, match="planned as"):
        run_probe(ScriptedBackend(), PROBES[:5], seeds=1, out=tmp_path, check=check, batch_size=3)


# ---- prompt sets -------------------------------------------------------------------------------------
def test_per_regime_continues_with_training_items_once_held_out_ones_run_out():
    probes = probe_suite(["factual"], per_regime=40)
    assert len({p.prompt for p in probes}) == 40
    assert [p.heldout for p in probes] == [True] * 32 + [False] * 8  # factual has 32 held-out prompts
    assert probes[:20] == probe_suite(["factual"], per_regime=20)


def test_jsonl_parquet_and_dataset_prompt_sets_load_with_checkers(tmp_path):
    rows = [{"prompt": "Sam has 3 apples and buys 4. How many?", "regime": "math", "answer": "3 + 4 = 7\n#### 7"},
            {"prompt": "Name a colour.", "regime": "open"},
            {"prompt": "Capital of France?", "regime": "factual", "answer": "Paris", "prompt_id": "fr"}]
    jsonl = tmp_path / "set.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    probes = load_prompt_set(str(jsonl))
    assert [p.prompt_id for p in probes] == ["math-00001", "open-00002", "fr"]
    assert probes[0].answer == 7 and probes[1].answer is None and probes[2].answer == "Paris"
    assert all(p.split == "confirmatory" for p in probes)
    pd.DataFrame(rows).to_parquet(tmp_path / "set.parquet")  # missing cells become null
    assert load_prompt_set(str(tmp_path / "set.parquet")) == probes

    folder = tmp_path / "dataset"  # a dataset folder, as datasets.load_dataset reads one (no hub needed)
    folder.mkdir()
    (folder / "test.jsonl").write_text("\n".join(json.dumps({"question": r["prompt"], "answer": r.get("answer", "")})
                                                 for r in rows[:1]) + "\n")
    from_hub = load_prompt_set(f"hf:{folder}", columns={"prompt": "question"}, regime="math", split="test")
    assert [(p.prompt, p.regime, p.answer) for p in from_hub] == [(rows[0]["prompt"], "math", 7)]


@pytest.mark.parametrize("lines, message", [
    (['{"prompt": "a", "regime": "math"}', '{"regime": "math"}'], "row 2: field 'prompt' is missing"),
    (['{"prompt": "a", "regime": "math"}', "{not json"], "row 2: not valid JSON"),
    (['{"prompt": ""}'], "row 1: field 'prompt' must be a non-empty text"),
    (['{"prompt": "a"}'], "row 1: field 'regime' is missing"),
    (['{"prompt": "a", "regime": "math", "answer": "none"}'], "row 1: field 'answer' has no number"),
    (['{"prompt": "a", "regime": "json", "answer": "[1"}'], "row 1: field 'answer' must be a JSON schema"),
    (['{"prompt": "a", "regime": "open", "split": "train"}'], "row 1: field 'split' must be"),
    (['{"prompt": "a", "regime": "open", "prompt_id": "x"}', '{"prompt": "b", "regime": "open", "prompt_id": "x"}'],
     "row 2: field 'prompt_id': 'x' is used by an earlier row"),
    (["[1, 2]"], "row 1: expected a JSON object"),
])
def test_a_malformed_prompt_set_names_the_row_and_the_field(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PromptSetError) as error:
        load_prompt_set(str(path))
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


# ---- flags -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (["--batch-size", "0"], "--batch-size must be a whole number of at least 1 or 'auto' (got '0')"),
    (["--batch-size", "many"], "--batch-size must be a whole number"),
    (["--per-regime", "4", "--prompts", "x.jsonl"], "--per-regime draws prompts"),
    (["--columns", "prompt=q"], "--columns and --regime describe a --prompts file"),
    (["--prompts", "missing.jsonl"], "missing.jsonl: no such file"),
    (["--prompts", "BAD", "--columns", "prompt"], "--columns takes FIELD=COLUMN pairs"),
    (["--per-regime", "1000"], "regime 'code_task' has only 438 distinct prompts (asked for 1000)"),
])
def test_bad_scale_flags_are_answered_in_one_line(tmp_path, capsys, flags, message):
    bad = tmp_path / "BAD"
    bad.write_text('{"prompt": "a", "regime": "math"}\n')
    flags = [str(bad) if f == "BAD" else f for f in flags]
    assert main(["probe", "--out", str(tmp_path / "out"), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and len(err.strip().splitlines()) == 1


def test_a_malformed_prompts_file_is_one_line_naming_the_row(tmp_path, capsys):
    path = tmp_path / "set.jsonl"
    path.write_text('{"prompt": "a", "regime": "math"}\n{"prompt": 3, "regime": "math"}\n')
    assert main(["probe", "--out", str(tmp_path / "out"), "--prompts", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}: row 2: field 'prompt' must be a non-empty text\n"


# ---- failures ----------------------------------------------------------------------------------------
def test_a_failing_rank_says_which_items_it_held_and_why(tmp_path, capsys):
    from cli.distributed import RunFailed, run_plan
    from cli.probe import _describe

    plan = make_plan([("math", f"m{i}", 0) for i in range(3)], batch_size=2)

    def work(plan, batches, after_batch):
        raise ProbeError("batch 0 (math/m0/seed0, math/m1/seed0): math/m1/seed0 did not finish: Out of GPU memory")

    finished = []
    with pytest.raises(RunFailed, match="1 of 1 ranks failed"):
        run_plan(Cluster(0, 1, 0), prepare=lambda world: (plan, list(plan.batches)), work=work,
                 finish=finished.append, describe=_describe)
    err = capsys.readouterr().err
    assert err.startswith("error: rank 0 of 1, holding batches 0, 1 (math/m0/seed0, math/m1/seed0, math/m2/seed0), "
                          "failed: batch 0") and "Out of GPU memory" in err
    assert finished == []  # no tables from a partial run


@pytest.mark.processes
def test_an_out_of_memory_row_names_the_largest_batch_that_fits(tmp_path, monkeypatch):
    import dataclasses

    import backends.memory

    class OutOfMemory(ScriptedBackend):
        def scripted(self, prompt, settings):
            for record in super().scripted(prompt, settings):
                if type(record).__name__ == "RunEnd":
                    record = dataclasses.replace(record, finish_reason="error",
                                                 error="Out of GPU memory during generation: lower max new tokens")
                yield record

    monkeypatch.setattr(backends.memory, "rows_that_fit", lambda backend, shift=True, compiled=False: 2)
    with pytest.raises(ProbeError) as error:
        run_probe(OutOfMemory(), PROBES, seeds=1, out=tmp_path, check=check, batch_size=3)
    message = str(error.value)
    assert message.startswith("batch 0 (math/m0/seed0, math/m1/seed0, math/m2/seed0): math/m0/seed0 did not finish: Out of GPU")
    assert "the largest batch that fits this GPU now is about 2 rows" in message and "plan stays at 3 rows" in message
    assert json.loads((tmp_path / "probe.json").read_text())["plan"]["batch_size"] == 3  # the plan never changes


# ---- the runner's own cost out of the model's way ------------------------------------------------------
class InOrder(ScriptedBackend):
    """Runs that queue on one model thread (`runs_in_order`), as the transformers backend's: the
    runner starts the next batch while one generates. The first batch waits until the next one has
    started, so a runner that does not overlap them fails the test (after 10 s), with no clock read."""

    runs_in_order = True

    def __init__(self, fail_batch_with: str | None = None):
        super().__init__()
        self.lock, self.active, self.most = threading.Lock(), 0, 0
        self.overlapped = threading.Event()
        self.fail_with = fail_batch_with

    def generate_rows(self, prompts, settings, stop=None):
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
            if self.active > 1:
                self.overlapped.set()
        try:
            self.overlapped.wait(10)
            for records in super().generate_rows(prompts, settings, stop):
                if self.fail_with and prompts[0] == self.fail_with and type(records[0][1]).__name__ == "RunEnd":
                    records = [(row, dataclasses.replace(r, finish_reason="error", error="boom")) for row, r in records]
                yield records
        finally:
            with self.lock:
                self.active -= 1


@pytest.mark.processes
def test_the_next_batch_starts_while_one_generates_and_the_results_are_the_same(tmp_path):
    overlapping = InOrder()
    run_probe(overlapping, PROBES, seeds=2, out=tmp_path / "ahead", check=check, batch_size=3)
    run_probe(ScriptedBackend(), PROBES, seeds=2, out=tmp_path / "one-by-one", check=check, batch_size=3)
    assert overlapping.overlapped.is_set() and overlapping.most == 2  # one ahead, never more
    ahead, plain = (pq.read_table(tmp_path / f / "results" / "generations.parquet").to_pylist() for f in ("ahead", "one-by-one"))
    assert ahead == plain


@pytest.mark.processes
def test_a_failing_batch_stops_the_one_started_after_it_and_leaves_no_thread(tmp_path):
    with pytest.raises(ProbeError, match="did not finish: boom"):
        run_probe(InOrder(fail_batch_with=PROBES[0].prompt), PROBES, seeds=1, out=tmp_path, check=check, batch_size=3)
    assert not [t for t in threading.enumerate() if t.name.startswith("probe-batch")]
    assert not (tmp_path / "results" / "parts" / "batch-000000-generations.parquet").exists()


class _CountsRows(ScriptedBackend):
    """The scripted backend, keeping the number of prompts of every batched call."""

    def __init__(self):
        super().__init__()
        self.rows_per_call = []

    def generate_rows(self, prompts, settings, stop=None):
        self.rows_per_call.append(len(prompts))
        yield from super().generate_rows(prompts, settings, stop)


@pytest.mark.processes
def test_a_compiled_run_fills_each_seeds_short_batch_so_it_meets_one_batch_shape(tmp_path):
    """8 prompts a seed in batches of 3 end each seed with 2 rows: compiled, those run as 3 (a new row count is a
    new compile), the filler's trace is dropped, and the tables hold the planned generations alone; eager, they
    run as they are."""
    from visualizer.settings import GenerationSettings

    compiled = _CountsRows()
    settings = GenerationSettings(compiled=True)
    results = run_probe(compiled, PROBES, seeds=2, out=tmp_path / "compiled", check=check, batch_size=3, settings=settings)
    assert compiled.rows_per_call == [3] * 6
    generations = pd.read_parquet(tmp_path / "compiled" / "results" / "generations.parquet")
    assert len(results) == len(generations) == 16
    assert sorted(zip(generations.prompt_id, generations.seed)) == sorted((p.prompt_id, s) for p in PROBES for s in range(2))
    assert set(generations["batch_rows"]) == {3, 2}  # the plan's rows: the filler is no generation

    eager = _CountsRows()
    run_probe(eager, PROBES, seeds=2, out=tmp_path / "eager", check=check, batch_size=3)
    assert eager.rows_per_call == [3, 3, 2, 3, 3, 2]
