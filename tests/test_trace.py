"""Trace round trip (nothing lost) and validation of bad files (clear TraceError, never a crash)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.fake_records import fake_trace
from visualizer import trace_format as trace_module
from visualizer.records import RunEnd, RunStart, StepRecord
from visualizer.settings import GenerationSettings
from visualizer.trace import Trace, TraceError


@pytest.fixture(scope="module")
def live_trace(random_backend):
    trace = Trace(model=random_backend.info, prompt="Write a haiku about rain")
    for record in random_backend.generate(trace.prompt, GenerationSettings(seed=2, max_new_tokens=300, max_denoising_steps=10)):
        trace.append(record)
    return trace


def test_round_trip_of_a_live_run_loses_nothing(live_trace, tmp_path):
    path = live_trace.save(tmp_path / "run.json")
    loaded = Trace.load(path)
    assert loaded == live_trace
    assert loaded.pieces == live_trace.pieces
    for a, b in zip(loaded.steps, live_trace.steps):
        assert a.entropy_nats.dtype == np.float32 and np.array_equal(a.entropy_nats, b.entropy_nats)
        assert a.wall_time_s == b.wall_time_s
    assert loaded.end.text == live_trace.end.text
    assert loaded.settings == live_trace.settings
    # and a second round trip writes the very same bytes
    assert loaded.to_json() == live_trace.to_json()


def test_trace_records_what_the_run_needs(live_trace):
    data = live_trace.to_dict()
    assert data["model"]["backend"] == "transformers" and data["model"]["canvas_length"] == 256
    assert data["settings"]["seed"] == 2 and data["settings"]["max_denoising_steps"] == 10
    assert data["prompt"]["ids"][0] == 2  # <bos> from the chat template
    assert len(data["steps"]) == len(live_trace.steps) > 0
    assert all(s["wall_time_s"] > 0 for s in data["steps"])
    assert set(live_trace.displayed_ids()) <= set(live_trace.pieces)
    assert "logits" not in json.dumps(data)[:10000]


def test_records_are_read_only(live_trace):
    with pytest.raises(ValueError):
        live_trace.steps[0].accepted[0] = True


def good_dict():
    return fake_trace(["1100", "1111"], canvas_length=4, eos_at=2).to_dict()


def with_candidates(data: dict, k: int = 2) -> dict:
    """A version-2 dict whose steps carry k candidates per position (ids 10..13 have pieces)."""
    data["settings"]["record_topk"] = k
    for step in data["steps"]:
        step["topk_ids"] = [[10 + (p + j) % 4 for j in range(k)] for p in range(4)]
        step["topk_probs"] = [[0.5 / (j + 1) for j in range(k)] for p in range(4)]
    return data


def mutate_v2(change):
    data = with_candidates(good_dict())
    change(data)
    return json.dumps(data)


def mutate(change):
    data = good_dict()
    change(data)
    return json.dumps(data)


BAD = {
    "not json": ("{'format': nope", "not a trace: the file"),
    "truncated": (json.dumps(good_dict())[:-40], "not a trace: the file"),
    "a list": ("[1, 2, 3]", "JSON object"),
    "other format": (mutate(lambda d: d.update(format="something")), "not a trace file"),
    "newer version": (mutate(lambda d: d.update(version=99)), "newer tool"),
    "missing steps": (mutate(lambda d: d.pop("steps")), "missing 'steps'"),
    "unknown field": (mutate(lambda d: d.update(run_this="import os")), "unknown field"),
    "string canvas length": (mutate(lambda d: d["model"].update(canvas_length="4")), "canvas_length must be int"),
    "huge canvas": (mutate(lambda d: d["model"].update(canvas_length=10**9)), "canvas_length must be from"),
    "short accepted": (mutate(lambda d: d["steps"][0].update(accepted=[1, 0])), "accepted must be 4"),
    "id out of vocab": (mutate(lambda d: d["steps"][0].update(argmax=[10, 11, 12, 5000])), "token ids from 0"),
    "negative id": (mutate(lambda d: d["blocks"][0]["tokens"].__setitem__(0, -1)), "token ids from 0"),
    "nan entropy": (mutate(lambda d: d["steps"][0]["entropy_nats"].__setitem__(0, float("nan"))), "between 0 and ln"),
    "negative wall time": (mutate(lambda d: d["steps"][0].update(wall_time_s=-1)), "non-negative"),
    "steps out of order": (mutate(lambda d: d["steps"].reverse()), "expected step"),
    "steps_used mismatch": (mutate(lambda d: d["blocks"][0].update(steps_used=5)), "steps_used"),
    "eos position wrong": (mutate(lambda d: d["blocks"][0].update(eos_position=0)), "first EOS"),
    "no pad after eos": (mutate(lambda d: d["blocks"][0]["tokens"].__setitem__(3, 13)), "must be pad"),
    "sequence mismatch": (mutate(lambda d: d["end"]["sequence"].__setitem__(0, 12)), "end.sequence"),
    "missing piece": (mutate(lambda d: d["pieces"].pop("11")), "no piece"),
    "bad piece key": (mutate(lambda d: d["pieces"].update({"x1": "a"})), "not a token id"),
    "bad settings key": (mutate(lambda d: d["settings"].update(turbo=True)), "unknown setting"),
    "bool as int": (mutate(lambda d: d["steps"][0].update(step=True)), "step must be int"),
    "candidates without record_topk": (mutate_v2(lambda d: d["settings"].pop("record_topk")), "come together"),
    "record_topk without candidates": (mutate(lambda d: d["settings"].update(record_topk=3)), "no topk_ids"),
    "candidate ids alone": (mutate_v2(lambda d: d["steps"][1].pop("topk_probs")), "come together"),
    "candidate row too short": (mutate_v2(lambda d: d["steps"][0]["topk_ids"][2].pop()), "4 lists of 2"),
    "candidate id out of vocab": (mutate_v2(lambda d: d["steps"][0]["topk_ids"][0].__setitem__(1, 5000)), "token ids from 0"),
    "candidate probability above 1": (mutate_v2(lambda d: d["steps"][0]["topk_probs"][0].__setitem__(0, 1.5)), "from 0 to 1"),
    "candidate without piece": (mutate_v2(lambda d: d["steps"][0]["topk_ids"][0].__setitem__(0, 700)), "no piece"),
    "sample probability short": (mutate(lambda d: d["steps"][0].update(sample_probability=[0.5])), "sample_probability"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_malformed_traces_are_rejected_with_a_clear_message(case):
    text, expected = BAD[case]
    with pytest.raises(TraceError, match=expected):
        Trace.from_json(text)


def test_the_good_fixture_itself_loads():
    assert Trace.from_json(json.dumps(good_dict())).end.finish_reason == "eos"


def test_oversized_files_are_refused_before_parsing(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(good_dict()))
    monkeypatch.setattr(trace_module, "MAX_TRACE_BYTES", 100)
    with pytest.raises(TraceError, match="limit"):
        Trace.load(path)


def test_deeply_nested_json_is_a_trace_error_not_a_crash():
    with pytest.raises(TraceError):
        Trace.from_json("[" * 100000 + "]" * 100000)


def test_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot read"):
        Trace.load(tmp_path / "absent.json")


def test_append_enforces_record_order():
    trace = fake_trace(["11"], canvas_length=2)
    with pytest.raises(TraceError, match="after RunEnd"):
        trace.append(trace.steps[0])
    empty = Trace(model=trace.model, prompt="p")
    with pytest.raises(TraceError, match="before RunStart"):
        empty.append(trace.steps[0])
    empty.append(RunStart(prompt_ids=np.array([2], np.int32), settings={}, max_blocks=1))
    with pytest.raises(TraceError, match="twice"):
        empty.append(RunStart(prompt_ids=np.array([2], np.int32), settings={}, max_blocks=1))


def test_cancelled_run_with_an_unfinished_block_round_trips():
    trace = fake_trace(["10", "11"], canvas_length=2, finished=False)
    trace.blocks.clear()
    trace.append(RunEnd(finish_reason="cancelled", sequence=np.zeros(0, np.int32), text="", wall_time_s=0.2))
    again = Trace.from_json(trace.to_json())
    assert again == trace and isinstance(again.steps[-1], StepRecord)


def test_candidates_round_trip_exactly():
    text = json.dumps(with_candidates(good_dict(), k=3))
    trace = Trace.from_json(text)
    step = trace.steps[0]
    assert step.topk == 3 and step.topk_ids.dtype == np.int32 and step.topk_probs.dtype == np.float16
    assert step.topk_ids.shape == (4, 3) and not step.topk_ids.flags.writeable
    assert trace.settings.record_topk == 3
    again = Trace.from_json(trace.to_json())
    assert again == trace and again.to_json() == trace.to_json()
    assert json.loads(trace.to_json())["version"] == trace_module.TRACE_VERSION == 5  # version 5: the lens in the blocks


def test_a_version_1_file_still_loads_as_a_run_without_candidates():
    """tests/data/trace_v1.json was written by the version-1 tool (a copy of an old example run)."""
    from pathlib import Path

    path = Path(__file__).parent / "data" / "trace_v1.json"
    raw = json.loads(path.read_text())
    assert raw["version"] == 1 and "record_topk" not in raw["settings"]
    trace = Trace.load(path)
    assert trace.settings.record_topk == 0 and all(s.topk_ids is None for s in trace.steps)
    assert len(trace.steps) == len(raw["steps"]) and trace.end.text == raw["end"]["text"]
    resaved = json.loads(trace.to_json())
    assert resaved["version"] == 5 and resaved["steps"][0].keys() == raw["steps"][0].keys()
    assert resaved["sampler_rule"] == {"renoises": True, "last_step_samples": True, "budget": "entropy-bound"}
    assert Trace.from_json(trace.to_json()) == trace


def test_error_messages_say_where_the_problem_is():
    """The one-line messages name the place in the file (mutation testing found them unchecked)."""
    data = json.loads(fake_trace(["111111111100", "111111111111"], canvas_length=12).to_json())

    def problem(edit) -> str:
        broken = json.loads(json.dumps(data))
        edit(broken)
        with pytest.raises(TraceError) as caught:
            trace_module.parse_trace(broken)
        return str(caught.value)

    assert problem(lambda d: d["steps"][1].update(extra=1)) == "steps[1] has unknown field(s): extra"
    assert problem(lambda d: d.update(settings=[])) == "trace.settings must be dict, not list"
    many = problem(lambda d: d.update(pieces={}))  # every displayed id loses its text: 8 named, then "..."
    assert int(many.split()[0]) > 8 and many.endswith(" ...") and len(many.split(": ")[1].split(", ")) == 8
    one = problem(lambda d: d["pieces"].pop("10"))
    assert one == "1 displayed token id(s) have no piece in 'pieces': 10"


def _set(path, value):
    def edit(d):
        for key in path[:-1]:
            d = d[key]
        d[path[-1]] = value
    return edit


def _pop(path):
    def edit(d):
        for key in path[:-1]:
            d = d[key]
        d.pop(path[-1])
    return edit


# Every message names the field and says what was wanted (mutation testing found most unchecked:
# a message emptied or its place renamed passed the tests that only match a word of it).
EXACT = {
    'top': (lambda d: [1], 'a trace is a JSON object at the top level'),
    'version str': (_set(["version"], "3"), '"version" must be an integer'),
    'version 0': (_set(["version"], 0), 'unknown trace version 0'),
    'model unknown': (_set(["model", "colour"], "red"), 'model has unknown field(s): colour'),
    'model missing name': (_pop(["model", "name"]), "model is missing 'name'"),
    'model name int': (_set(["model", "name"], 3), 'model.name must be str, not int'),
    'pad str': (_set(["model", "pad_token_id"], "0"), 'model.pad_token_id must be an integer or null'),
    'canvas 0': (_set(["model", "canvas_length"], 0), f'model.canvas_length must be from 1 to {trace_module.MAX_CANVAS_LENGTH}'),
    'vocab 0': (_set(["model", "vocab_size"], 0), f'model.vocab_size must be from 1 to {trace_module.MAX_VOCAB_SIZE}'),
    'eos out': (_set(["model", "eos_token_ids"], [1000]), 'model.eos_token_ids must be token ids inside the vocabulary'),
    'pad out': (_set(["model", "pad_token_id"], 1000), 'model.pad_token_id must be inside the vocabulary'),
    'builtin int': (_set(["model", "builtin"], 1), 'model.builtin must be bool, not int'),
    'prompt unknown': (_set(["prompt", "lang"], "en"), 'prompt has unknown field(s): lang'),
    'prompt text int': (_set(["prompt", "text"], 5), 'prompt.text must be str, not int'),
    'prompt text long': (_set(["prompt", "text"], "x" * (trace_module.MAX_TEXT_CHARS + 1)), 'prompt.text is too long'),
    'prompt ids missing': (_pop(["prompt", "ids"]), "prompt is missing 'ids'"),
    'prompt ids too long': (_set(["prompt", "ids"], [5] * (trace_module.MAX_PROMPT_TOKENS + 1)), f'prompt.ids holds more than {trace_module.MAX_PROMPT_TOKENS} ids'),
    'prompt id out': (_set(["prompt", "ids"], [2, 1000]), 'prompt.ids must hold token ids from 0 to 999'),
    'settings problem': (_set(["settings", "max_new_tokens"], 0), 'settings: max new tokens must be a whole number from 1 to 8192 (got 0)'),
    'max_blocks 0': (_set(["max_blocks"], 0), f'max_blocks must be from 1 to {trace_module.MAX_BLOCKS} (got 0)'),
    'max_blocks str': (_set(["max_blocks"], "1"), 'trace.max_blocks must be int, not str'),
    'piece long': (_set(["pieces", "10"], "x" * (trace_module.MAX_PIECE_CHARS + 1)), f'pieces[10] must be a string of at most {trace_module.MAX_PIECE_CHARS} characters'),
    'piece key big': (_set(["pieces", "1000"], "x"), "pieces: key '1000' is not a token id below the vocabulary size 1000"),
    'created int': (_set(["created"], 5), '"created" must be a date string'),
    'batch list': (_set(["batch"], [1]), '"batch" must be an object {"size": int, "row": int} or null'),
    'batch unknown': (_set(["batch"], {"size": 2, "row": 0, "rank": 1}), 'batch has unknown field(s): rank'),
    'batch size 0': (_set(["batch"], {"size": 0, "row": 0}), f'batch.size must be from 1 to {trace_module.MAX_BATCH} (got 0)'),
    'batch row 2': (_set(["batch"], {"size": 2, "row": 2}), 'batch.row must be from 0 to 1 (got 2)'),
    'batch missing row': (_set(["batch"], {"size": 2}), "batch is missing 'row'"),
    'steps too many': (lambda d: d.update(steps=[{}] * (trace_module.MAX_STEPS + 1)), f'{trace_module.MAX_STEPS + 1} steps is more than the limit of {trace_module.MAX_STEPS}'),
    'step not obj': (lambda d: d["steps"].__setitem__(1, 5), 'steps[1] must be an object'),
    'step block 1': (_set(["steps", 1, "block"], 1), 'steps[1].block 1 is outside 0..0'),
    'step block neg': (_set(["steps", 0, "block"], -1), 'steps[0].block -1 is outside 0..0'),
    'step remaining 0': (_set(["steps", 1, "steps_remaining"], 0), 'steps[1]: step must be >= 0 and steps_remaining >= 1'),
    'step neg step': (_set(["steps", 0, "step"], -1), 'steps[0]: step must be >= 0 and steps_remaining >= 1'),
    'step accepted 2': (_set(["steps", 0, "accepted"], [1, 1, 2, 0]), 'steps[0].accepted must be 4 values of 0 or 1'),
    'step entropy short': (_set(["steps", 0, "entropy_nats"], [0.5]), 'steps[0].entropy_nats must be 4 numbers'),
    'step entropy big': (_set(["steps", 0, "entropy_nats"], [0.5, 0.5, 0.5, 99.0]), 'steps[0].entropy_nats must lie between 0 and ln(vocab) = 6.908 nats'),
    'step wall inf': (_set(["steps", 0, "wall_time_s"], "x"), 'steps[0].wall_time_s must be int or float, not str'),
    'step canvas short': (_set(["steps", 0, "canvas"], [10]), 'steps[0].canvas must hold 4 token ids (got 1)'),
    'step missing canvas': (_pop(["steps", 1, "canvas"]), "steps[1] is missing 'canvas'"),
    'step missing block': (_pop(["steps", 1, "block"]), "steps[1] is missing 'block'"),
    'step remaining skip': (_set(["steps", 1, "steps_remaining"], 5), 'steps[1].steps_remaining must count down by one'),
    'step step 2': (_set(["steps", 1, "step"], 2), 'steps[1] is step 2 of block 0; expected step 1'),
    'blocks too many': (lambda d: d["blocks"].append(d["blocks"][0]), '2 blocks recorded but max_blocks is 1'),
    'block not obj': (lambda d: d["blocks"].__setitem__(0, "b"), 'blocks[0] must be an object'),
    'block unknown': (_set(["blocks", 0, "colour"], 1), 'blocks[0] has unknown field(s): colour'),
    'block eos 9': (_set(["blocks", 0, "eos_position"], 9), 'blocks[0].eos_position must be null or a position in 0..3'),
    'block reason': (_set(["blocks", 0, "stop_reason"], "tired"), 'blocks[0].stop_reason must be one of converged, out_of_steps'),
    'block number': (_set(["blocks", 0, "block"], 1), 'blocks[0] says block 1; blocks must come in order from 0'),
    'block tokens short': (_set(["blocks", 0, "tokens"], [10, 11, 1]), 'blocks[0].tokens must hold 4 token ids (got 3)'),
    'block missing steps_used': (_pop(["blocks", 0, "steps_used"]), "blocks[0] is missing 'steps_used'"),
    'end list': (_set(["end"], [1]), 'end must be an object or null'),
    'end unknown': (_set(["end", "colour"], 1), 'end has unknown field(s): colour'),
    'end reason': (_set(["end", "finish_reason"], "bored"), 'end.finish_reason must be one of eos, length, cancelled, error'),
    'end error int': (_set(["end", "error"], 5), 'end.error must be a string or null'),
    'end text int': (_set(["end", "text"], 5), 'end.text must be str, not int'),
    'end text long': (_set(["end", "text"], "x" * (trace_module.MAX_TEXT_CHARS + 1)), 'end.text is too long'),
    'end wall neg': (_set(["end", "wall_time_s"], -1), 'end.wall_time_s must be a non-negative number'),
    'end wall str': (_set(["end", "wall_time_s"], "1"), 'end.wall_time_s must be int or float, not str'),
    'end seq big': (_set(["end", "sequence"], [10, 11, 1, 1000]), 'end.sequence must hold token ids from 0 to 999'),
    'end missing seq': (_pop(["end", "sequence"]), "end is missing 'sequence'"),
    'no blocks finished': (lambda d: d.update(blocks=[]), 'a finished run must commit every block it started'),
    'cand topk ids str': (lambda d: with_candidates(d) and d["steps"][0]["topk_probs"][0].__setitem__(0, "x"), 'steps[0].topk_probs must hold numbers'),
    'a step skips a block': (lambda d: d.update(max_blocks=3) or d['steps'][1].update(block=2), 'steps[1] is block 2, step 1; expected block 0'),
    'steps past the blocks': (lambda d: d.update(max_blocks=3, end=None) or d['steps'].extend(dict(d['steps'][0], block=b) for b in (1, 2)), 'steps reach block 2 but only 1 block(s) were committed'),
    'newer version': (_set(['version'], 99), f'trace version 99 was written by a newer tool; this one reads up to {trace_module.TRACE_VERSION}'),
    'other format': (_set(['format'], 'x'), 'not a trace file: "format" must be "diffusion-visualizer-trace"'),
}


@pytest.mark.parametrize("case", list(EXACT))
def test_each_problem_is_named_exactly(case):
    edit, message = EXACT[case]
    data = good_dict()
    data = edit(data) or data  # an edit either changes the dict or returns the value to parse
    with pytest.raises(TraceError) as caught:
        trace_module.parse_trace(json.loads(json.dumps(data)))
    assert str(caught.value) == message


def test_a_trace_records_its_sampler_rule_and_any_sampler_with_a_rule_loads():
    """Version 3: the sampler's accept rule travels in the trace, so a sampler no backend here
    runs still loads (its rule says how to read its frames); version 2 traces derive theirs."""
    raw = good_dict()
    raw["version"] = 3
    raw["settings"]["sampler"] = "discrete-ddim"
    raw["sampler_rule"] = {"renoises": False, "last_step_samples": True, "budget": None}
    trace = Trace.from_dict(raw)
    assert trace.sampler_rule.renoises is False and trace.sampler_rule.budget is None
    assert json.loads(trace.to_json())["sampler_rule"] == raw["sampler_rule"]
    del raw["sampler_rule"]  # an unknown sampler without a rule cannot be read
    with pytest.raises(TraceError, match="did not record its accept rule"):
        Trace.from_dict(raw)
    raw["sampler_rule"] = {"renoises": "yes", "last_step_samples": True, "budget": None}
    with pytest.raises(TraceError, match="true or false"):
        Trace.from_dict(raw)
    raw["sampler_rule"] = {"renoises": True, "last_step_samples": True, "budget": "guess"}
    with pytest.raises(TraceError, match="budget must be one of"):
        Trace.from_dict(raw)


def test_values_at_the_edge_of_what_is_allowed_load():
    """The limits are inclusive where the format says so: batch row 0 and the last row, a piece of
    exactly MAX_PIECE_CHARS characters, a model without the optional builtin/parameters fields."""
    for row in (0, 2):
        raw = good_dict()
        raw["batch"] = {"size": 3, "row": row}
        assert trace_module.parse_trace(raw).start.batch == {"size": 3, "row": row}
    raw = good_dict()
    raw["pieces"]["10"] = "x" * trace_module.MAX_PIECE_CHARS
    raw["model"].pop("builtin")
    raw["model"].pop("parameters")
    parts = trace_module.parse_trace(raw)
    assert len(parts.pieces[10]) == trace_module.MAX_PIECE_CHARS and parts.model.builtin is False


def test_a_version_2_trace_gets_the_rule_its_backend_and_sampler_used():
    """Before version 3 the rule was not written: it follows from the backend and the sampler (an
    MLX confidence-threshold run reveals by probability and never renoises)."""
    raw = good_dict()
    raw["version"] = 2
    del raw["sampler_rule"]
    raw["model"]["backend"] = "mlx"
    raw["settings"]["sampler"] = "confidence-threshold"
    rule = trace_module.parse_trace(raw).start.sampler_rule
    assert rule == {"renoises": False, "last_step_samples": False, "budget": "confidence-threshold"}
