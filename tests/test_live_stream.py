"""The live log: decoding its deltas reproduces every frame; it stays small; a ring loses no frame."""

from __future__ import annotations

import base64
import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trace_factory import trace_from_masks, trace_from_text
from visualizer.layout import grid_layout, text_layout
from visualizer.live_decode import LiveState
from visualizer.live_stream import KEY_EVERY, RING, LiveEncoder, LiveRing, layout_message, replay_log, replay_value
from visualizer.metrics import live_readout
from visualizer.replay import example_traces
from visualizer.states import frame_refs, frame_state
from visualizer.trace import Trace


@st.composite
def random_traces(draw):
    """Runs of 1-3 blocks with arbitrary (also non-monotone: re-masking) accepted masks and argmax."""
    canvas = draw(st.sampled_from([4, 8, 16]))
    n_blocks = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    blocks, argmax = [], []
    for _ in range(n_blocks):
        steps = draw(st.integers(1, 6))
        blocks.append([rng.random(canvas) < rng.random() for _ in range(steps)])
        argmax.append([rng.integers(10, 40, canvas) for _ in range(steps)])
    unfinished = draw(st.integers(0, 1))
    return trace_from_masks(blocks, argmax=argmax, unfinished=unfinished)


PANEL = ("readout", "point", "final", "pending")


def lines_of(log: str) -> list[str]:
    return [line for line in log.splitlines() if line]


@settings(max_examples=60, deadline=None)
@given(random_traces(), st.sampled_from([1, 3, KEY_EVERY]))
def test_applying_the_deltas_reproduces_every_frame(trace, key_every):
    """Fed one record at a time, as in a live run: after each frame line the decoder holds exactly
    the states, tokens and changed marks of `frame_state` at that frame."""
    records = [trace.start, *trace.steps, *trace.blocks, trace.end]
    records = sorted(records[1:-1], key=lambda r: (r.block, getattr(r, "step", 1 << 30)))
    live = Trace(model=trace.model, prompt=trace.prompt, created=trace.created)  # the start line carries it: a second boundary crossed between the two made this flaky
    live.append(trace.start)
    encoder = LiveEncoder(live, key_every=key_every)
    decoder = LiveState()
    sent = encoder.start_line()
    decoder.apply(sent)
    for record in [*records, trace.end]:
        live.append(record)
        new = encoder.frame_lines()
        sent += new
        for line in lines_of(new):
            decoder.apply(line)
            expected = frame_state(live, decoder.frames - 1)
            assert np.array_equal(decoder.states, expected.states)
            assert np.array_equal(decoder.tokens, expected.token_ids)
            assert np.array_equal(decoder.changed, expected.changed)
            assert np.array_equal(decoder.thought, np.zeros_like(decoder.changed) if expected.thought is None else expected.thought)
            # every token id the canvas shows has had its text sent
            assert set(decoder.tokens[decoder.tokens >= 0].tolist()) <= set(decoder.pieces)
    assert decoder.frames == len(frame_refs(trace))
    if key_every == KEY_EVERY:  # a saved run replays the canvas its live run sent (the panel of a block's
        # last step reads final values once the block record is there, so it is left out here)
        canvas_only = lambda log: [{k: v for k, v in json.loads(line).items() if k not in PANEL} for line in lines_of(log)]  # noqa: E731
        assert canvas_only(replay_log(trace)) == canvas_only(sent + encoder.end_line())


@settings(max_examples=30, deadline=None)
@given(random_traces())
def test_a_reader_can_start_at_any_key_frame(trace):
    """A late reader skips to the newest key frame and from there holds every frame exactly."""
    lines = lines_of(replay_log(trace))
    encoder_lines = lines_of(LiveEncoder(trace, key_every=2).frame_lines())
    keys = [i for i, line in enumerate(encoder_lines) if json.loads(line).get("key")]
    start = keys[-1]
    decoder = LiveState()
    decoder.apply(lines[0])
    for line in encoder_lines[start:]:
        decoder.apply(line)
        expected = frame_state(trace, decoder.frames - 1)
        assert np.array_equal(decoder.states, expected.states) and np.array_equal(decoder.tokens, expected.token_ids)


def test_a_step_sends_only_what_changed_and_each_token_text_once():
    masks = [np.array([1, 0, 0, 0, 0, 0, 0, 0], bool), np.array([1, 1, 0, 0, 0, 0, 0, 0], bool),
             np.array([1, 1, 0, 0, 0, 0, 0, 0], bool)]
    trace = trace_from_masks([masks])
    frames = [json.loads(line) for line in lines_of(LiveEncoder(trace, key_every=100).frame_lines())]
    first, second, third = (np.array(f["cells"]).reshape(-1, 4) for f in frames[:3])
    assert len(first) == 8  # a key frame: every cell
    # step 2: position 0 went new -> kept, position 1 noise -> new; nothing else
    assert second[:, 0].tolist() == [0, 1] and second[:, 1].tolist() == [3, 2]
    assert third[:, 0].tolist() == [1]  # position 1 new -> kept
    sent = [t for f in frames for t in f.get("tokens", {})]
    assert len(sent) == len(set(sent))  # no token text sent twice
    assert frames[-1]["kind"] == "commit" and frames[-1]["final"] == 1


def test_entropy_and_argmax_for_tooltips():
    entropy = [[np.linspace(0, 3, 8)] * 2]
    argmax = [[np.arange(10, 18), np.array([10, 11, 12, 13, 14, 15, 16, 30])]]
    trace = trace_from_masks([[np.zeros(8, bool), np.ones(8, bool)]], entropy=entropy, argmax=argmax)
    frames = [json.loads(line) for line in lines_of(LiveEncoder(trace).frame_lines())]
    decoded = np.frombuffer(base64.b64decode(frames[0]["entropy"]), dtype="<f2")
    assert np.allclose(decoded, entropy[0][0], atol=2e-3)
    assert len(frames[0]["argmax"]) == 16 and frames[1]["argmax"] == [7, 30]  # step 2: only the change


def test_text_tokens_are_plain_strings_in_json():
    """Token text goes into JSON strings (escaped by json), never as markup."""
    trace = trace_from_masks([[np.ones(4, bool)]])
    trace.pieces[10] = '<img src=x onerror="alert(1)">'
    frames = [json.loads(line) for line in lines_of(LiveEncoder(trace).frame_lines())]
    assert frames[0]["tokens"]["10"]["p"] == '<img src=x onerror="alert(1)">'


def test_layouts_travel_as_numbers():
    trace = trace_from_masks([[np.ones(16, bool)]] * 2)
    grid = layout_message(grid_layout(2, 16))
    assert len(grid["cells"]) == 2 * 16 * 3 and grid["headers"] == [[0, 0], [1, 2]]
    end = json.loads(lines_of(replay_log(trace))[-1])
    assert end["type"] == "end" and end["text_layout"] == layout_message(text_layout(trace))


def test_example_runs_stay_small_per_step():
    """A 256-token canvas: each frame line stays far below the 4 KB goal (the benchmark measures the wire)."""
    for path in example_traces():
        lines = lines_of(replay_log(Trace.load(path)))
        frames = lines[1:-1]
        assert sum(map(len, frames)) / len(frames) < 4096, path.name


def ring_values(trace: Trace) -> list[list[str]]:
    """The values a live run of `trace` yields, one record at a time."""
    live = Trace(model=trace.model, prompt=trace.prompt)
    live.append(trace.start)
    encoder = LiveEncoder(live)
    ring = LiveRing(encoder.start_line())
    values = [ring.value()]
    records = sorted([*trace.steps, *trace.blocks], key=lambda r: (r.block, getattr(r, "step", 1 << 30)))
    for record in [*records, trace.end]:
        live.append(record)
        ring.add(encoder.frame_lines() + (encoder.end_line() if live.finished else ""))
        values.append(ring.value())
    return values


@settings(max_examples=40, deadline=None)
@given(random_traces(), st.data())
def test_updates_seen_together_lose_no_frame(trace, data):
    """The browser sees only some of the values (the rest arrive together and only the newest is
    kept): as long as it misses fewer than RING frames in a row, it still applies every frame, and
    after each value it holds exactly the newest frame."""
    values = ring_values(trace)
    seen = [v for i, v in enumerate(values) if i == len(values) - 1 or data.draw(st.booleans(), label=f"see {i}")]
    decoder, applied = LiveState(), []
    for value in seen:
        applied += decoder.read_value(value)
        expected = frame_state(trace, decoder.frames - 1) if decoder.frames else None
        if expected is not None:
            assert np.array_equal(decoder.states, expected.states) and np.array_equal(decoder.tokens, expected.token_ids)
    assert applied == list(range(len(frame_refs(trace))))
    assert decoder.ended is not None


def test_a_long_stall_restarts_at_a_key_frame():
    masks = [np.random.default_rng(1).random(8) < 0.1 * t for t in range(3 * RING)]
    trace = trace_from_masks([masks], step_budget=3 * RING)
    values = ring_values(trace)
    decoder = LiveState()
    decoder.read_value(values[2])
    applied = decoder.read_value(values[-1])  # missed more frames than the ring holds
    assert applied[0] > 2 and applied[-1] == len(frame_refs(trace)) - 1
    assert json.loads(values[-1][2 + applied[0] % RING]).get("key")
    assert np.array_equal(decoder.states, frame_state(trace, -1).states)


def test_the_ring_stays_small_and_a_saved_run_is_one_value():
    trace = trace_from_masks([[np.ones(8, bool)] * 3] * 30)  # 30 blocks, 120 frames
    values = ring_values(trace)
    assert max(len(v) for v in values) == 2 + RING
    whole = replay_value(trace)
    decoder = LiveState()
    assert decoder.read_value(whole) == list(range(len(frame_refs(trace))))


def test_a_closed_run_value_ends_it_without_frames():
    trace = trace_from_masks([[np.ones(4, bool)] * 2])
    values = ring_values(trace)
    ring = LiveRing(values[0][0])
    ring.add("\n".join(line for line in values[-1][1:] if line))
    closed = ring.closed()
    assert closed[:2] == values[-1][:2] and not any(closed[2:])
    decoder = LiveState()
    for value in values + [closed]:
        decoder.read_value(value)
    assert decoder.frames == len(frame_refs(trace)) and decoder.ended["type"] == "end"


THINKING = ["<|channel>", "thought", "\n", "plan", " it", "<channel|>", "O", "cean", "\n", "C", "alm"]


def test_thought_tokens_are_flagged_per_cell_and_the_finished_run_carries_its_structure_figure():
    trace = trace_from_text([THINKING], [[0, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4]])
    decoder = LiveState()
    value = replay_value(trace)
    decoder.read_value(value)
    expected = frame_state(trace, -1)
    assert decoder.thought[0, :6].all() and not decoder.thought[0, 6:].any()
    assert np.array_equal(decoder.thought, expected.thought)
    start, end = json.loads(value[0]), json.loads(value[1])
    assert start["palettes"]["standard"]["thought"] == ["#7dd3fc", "#0ea5e9"] and start["thought_label"] == "thought"
    assert end["structure_svg"].startswith("<svg") and "Structure first" in end["structure_svg"]
    last = json.loads(value[-1])
    assert "answer tokens only (6 thought tokens excluded)" in last["readout"]["status"]  # the readout says what it measured
    # the same with the thoughts counted rides along, so the browser's switch needs no server
    both = live_readout(trace, -1, include_thought=True)
    assert last["with_thoughts"]["readout"]["status"].endswith("answer and thought tokens (6 thought)")
    assert last["with_thoughts"]["point"][3] == both.measured_length == 11 and last["point"][3] == 5
    assert "answer and thought tokens" in end["structure_svg_with_thoughts"] and "answer tokens only" in end["structure_svg"]
    plain = replay_value(trace_from_text([THINKING[6:]], [[0, 1, 2, 3, 4]]))  # no channel: nothing extra sent
    assert "with_thoughts" not in plain[-1] and "structure_svg_with_thoughts" not in plain[1]


def test_the_start_line_carries_what_the_browser_reads():
    """The keys live_view.js reads from the start line, by name (mutation testing found a renamed key
    went unnoticed): the prompt and seed the header shows, the thinking flag, per-palette state colours,
    the readout's names and tips."""
    from visualizer.palette import PALETTES
    from visualizer.states import State

    trace = trace_from_text([["a", "b"]], [[0, 1]], prompt="a tiny run", settings={"seed": 3, "thinking": False})
    start = json.loads(LiveEncoder(trace).start_line())
    assert start["type"] == "start" and start["prompt"] == "a tiny run" and start["seed"] == 3
    assert start["thinking"] is False
    assert start["states"] == [s.name.lower() for s in State]
    assert set(start["palettes"]) == set(PALETTES)
    for palette in start["palettes"].values():
        assert len(palette["states"]) == len(State) and all(len(pair) == 2 for pair in palette["states"])
    assert len(start["readout"]["names"]) == len(start["readout"]["tips"]) > 0


def test_the_panel_point_carries_the_readout_numbers():
    """Each frame's chart point: tau_b rounded to 4 places, an undefined control as null (JSON has
    no NaN), then the counts, as live_readout computes them."""
    trace = trace_from_text([["a", "b", "c"]], [[0, 1, 1]])
    encoder = LiveEncoder(trace)
    encoder.start_line()
    last = json.loads(encoder.frame_lines().splitlines()[-1])
    readout = live_readout(trace, len(frame_refs(trace)) - 1)
    assert last["point"][0] == round(float(readout.tau_b), 4) and last["point"][0] is not None
    assert last["point"][1] is None  # the control is undefined for a single block
    assert last["point"][2:] == [readout.committed, readout.measured_length, readout.new_commits, readout.remasked_now]
