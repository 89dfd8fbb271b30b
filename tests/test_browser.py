"""The app in a real headless browser: frames drawn by the browser change during a run, the replay
slider follows the run and then shows exactly the recorded frames, saved runs replay the same way.

Uses Debian's Chromium through Playwright (no browser download); `.ci/run` installs Chromium.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from visualizer.layout import text_layout
from visualizer.live_stream import KEY_EVERY, RING, LiveRing, replay_value
from visualizer.replay import example_traces
from visualizer.states import frame_refs
from visualizer.trace import Trace

from tests.browser import FAKE_CLOCK, READ_CELLS, REAL_CLOCK, VIEW, CHROMIUM, advance, expected_cells, load_trace_file, show

pytestmark = [pytest.mark.browser, pytest.mark.app,
              pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)")]

STATS = "() => window.dvLiveView.stats()"


def assert_slider_matches(page, trace: Trace, indexes) -> None:
    n = len(frame_refs(trace))
    assert page.locator("input.dv-replay").get_attribute("max") == str(n)
    for index in indexes:
        show(page, index)
        assert page.evaluate(READ_CELLS) == expected_cells(trace, index), f"frame {index}"
        assert page.locator(".dv-status").text_content().startswith(f"Frame {index + 1}/{n} · ")
        assert page.locator("input.dv-replay").input_value() == str(index + 1)  # one numbering: slider, label, status
        assert page.locator(".dv-replay-label").text_content() == f"Replay: frame {index + 1}/{n}"


def test_frames_change_during_a_run_and_the_slider_replays_them(page, tmp_path):
    page.get_by_label("Demo prompt").click()
    page.get_by_role("option", name="Eight planets, one per line, each with a fun fact").click()
    page.wait_for_function("() => document.querySelector('textarea').value.includes('eight planets')")
    page.get_by_role("button", name="Generate").click()

    # while the model runs: two different canvases drawn, and the slider following the run
    page.wait_for_function("() => { const s = window.dvLiveView.stats(); return s && s.shownIndex >= 1 && !s.ended; }", timeout=60_000)
    first = page.evaluate(READ_CELLS), page.locator("input.dv-replay").input_value()
    page.wait_for_function(f"() => {{ const s = window.dvLiveView.stats(); return s.shownIndex >= {int(first[1]) + 2}; }}", timeout=60_000)
    second = page.evaluate(READ_CELLS), page.locator("input.dv-replay").input_value()
    assert not page.evaluate(STATS)["ended"] or int(second[1]) < 40, "the run ended before we could watch it"
    assert first[0] != second[0] and int(second[1]) > int(first[1])
    assert len(first[0]) == 256  # one cell per canvas position, laid out before any token arrived

    page.wait_for_function("() => window.dvLiveView.stats().ended", timeout=120_000)
    page.wait_for_function("() => document.querySelectorAll('.dv-canvas .dv-committed').length === 256")
    committed = page.locator("#dv-final-text textarea")  # its label holds the copy button too: no accessible name
    page.wait_for_function("() => document.querySelector('#dv-final-text textarea').value.trim().length > 0")
    assert committed.input_value().strip()

    # the recorded run, saved through the app: the slider shows exactly its frames
    page.get_by_text("Save, load and export").click()
    page.get_by_role("button", name="Save trace (.json)").click()
    link = page.locator("a[download^=trace-]").first
    link.wait_for(timeout=30_000)
    trace = Trace.from_json(page.request.get(link.get_attribute("href")).body())
    n = len(frame_refs(trace))
    assert page.evaluate(STATS)["shownFrames"] == n
    assert_slider_matches(page, trace, [0, 1, 2, n // 2, n - 2, n - 1])

    # the colour-blind palette redraws the same frame in the browser, without the server
    page.get_by_label("colorblind").check()
    page.wait_for_function("() => getComputedStyle(document.querySelector('.dv-canvas .dv-committed')).color !== ''")
    show(page, 2)
    assert page.evaluate(READ_CELLS) == expected_cells(trace, 2, "colorblind")
    page.get_by_label("standard").check()


def test_a_saved_run_replays_in_the_same_browser_view(page):
    path = next(p for p in example_traces() if p.stem == "sky")
    trace = Trace.load(path)
    n = len(frame_refs(trace))
    load_trace_file(page, path, n)
    assert_slider_matches(page, trace, sorted({0, 3, n - 1}))
    assert page.locator(".dv-canvas *:not(span)").count() == 0  # token text is only ever text
    # the text layout (a finished run) is laid out from the server's text_layout, drawn by the browser
    page.get_by_label("Text (after the run)").check()
    page.wait_for_function("() => document.querySelector('.dv-canvas').textContent.includes('\u220e')")  # EOS glyph
    assert page.evaluate(READ_CELLS) == expected_cells(trace, n - 1, layout=text_layout(trace))
    page.get_by_label("Grid").check()


def receive_in(page, value) -> dict:
    """Hand the view a live value as the server would; its pacing state right after it read it."""
    return page.evaluate(f"""(value) => {{ const v = {VIEW}; v.receive(value);
        return {{ target: v.target, pace: v.pace && [v.pace.from, v.pace.goal, v.pace.span], drawn: v.stats.framesShown }}; }}""", value)


@pytest.fixture
def offline_view(page):
    """The page's live view with the server's trigger replaced by a recorder, on a clock the test moves."""
    # startLine forgotten: the next value starts a new run in the view, whatever an earlier test left there
    page.evaluate(f"() => {{ const v = {VIEW}; v.savedTrigger = v.trigger; v.asked = []; v.trigger = (what) => v.asked.push(what); v.startLine = null; }}")
    page.evaluate(FAKE_CLOCK)
    try:
        yield page
    finally:
        page.evaluate(REAL_CLOCK)
        page.evaluate(f"() => {{ const v = {VIEW}; v.trigger = v.savedTrigger; }}")


def test_an_update_of_several_frames_is_played_out_and_the_end_jumps_to_the_last_frame(offline_view):
    """The server sends a few updates a second, each with several frames (app.py LIVE_MIN_INTERVAL_S):
    the view draws them one by one, but a new update or the end of the run goes to the newest
    frame at once, so it never plays back a backlog (issue 12)."""
    page = offline_view
    trace = Trace.load(next(p for p in example_traces() if p.stem == "story"))
    start, end, *frames = replay_value(trace)
    n = len(frames)
    ring = LiveRing(start)

    def update(upto: int, finished: bool = False) -> list[str]:
        ring.add("\n".join(frames[:upto] + ([end] if finished else [])))
        return ring.value()

    receive_in(page, update(2))
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === 1")
    advance(page, 150)  # the next update comes 150 ms after the last
    state = receive_in(page, update(10))  # eight new frames: played out from the first new one
    assert state["pace"] == [1, 9, 150] and state["target"] == 2
    for shown in range(2, 10):  # each frame in turn as the clock reaches it, not one jump
        page.wait_for_function(f"() => {VIEW}.stats.shownIndex === {shown}")
        advance(page, 150 / 8 + 0.01)
    assert page.evaluate(f"() => {VIEW}.stats.framesShown") - state["drawn"] >= 8

    advance(page, 150)
    state = receive_in(page, update(18))
    assert state["pace"][:2] == [9, 17]
    advance(page, 10)  # the next update, while this one is still being played out
    state = receive_in(page, update(26))  # a new update while the last is played out: its newest frame at once
    assert state["pace"][:2] == [17, 25] and state["target"] == 18
    advance(page, 150)
    state = receive_in(page, update(n))  # the block's committed frame, before the end line: at once, not played out
    assert json.loads(frames[-1])["kind"] == "commit" and state["pace"] is None and state["target"] == n - 1
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === {n - 1}")
    state = receive_in(page, update(n, finished=True))  # the end: the last frame, nothing played out
    assert state["pace"] is None and state["target"] == n - 1


def test_a_browser_that_fell_behind_restarts_at_a_key_frame_then_asks_for_every_frame(offline_view):
    """A browser that misses more frames than the live value's ring holds (visualizer/live_stream.py
    RING) restarts at the newest key frame it still gets, and draws exactly the frame Python draws;
    at the end of the run, with frames missing, it asks the server for all of them (`need_frames`)
    and then holds every frame."""
    page = offline_view
    trace = Trace.load(next(p for p in example_traces() if p.stem == "story"))
    start, end, *frames = replay_value(trace)
    n = len(frames)
    newest = 3 + RING + 4  # a gap: frames 3.. fell out of the ring before this browser read them
    assert n > newest + 1 and RING > KEY_EVERY
    ring = LiveRing(start)
    ring.add("\n".join(frames[:3]))
    receive_in(page, ring.value())
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === 2")

    ring.add("\n".join(frames[3 : newest + 1]))
    held = sorted(json.loads(line)["i"] for line in ring.value()[2:] if line)
    assert held[0] > 3  # the ring no longer holds the next frame this browser needs
    keys = [i for i in held if json.loads(frames[i]).get("key")]
    receive_in(page, ring.value())  # the clock did not move: no pacing, straight to the newest frame
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === {newest}")
    have = page.evaluate(f"() => {VIEW}.frames.map((f, i) => f ? i : -1).filter((i) => i >= 0)")
    assert have == [0, 1, 2] + list(range(keys[0], newest + 1))  # restarted at the first key frame it got
    assert page.evaluate(READ_CELLS) == expected_cells(trace, newest)

    ring.add("\n".join(frames[newest + 1 :] + [end]))
    receive_in(page, ring.value())
    assert page.evaluate(f"() => {VIEW}.asked").count("need_frames") == 1  # (and the accept budget, as after any run)
    runs = page.evaluate(f"() => {VIEW}.stats.runs")
    receive_in(page, replay_value(trace))  # the server's answer: every frame of the run
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === {n - 1}")
    assert page.evaluate(f"() => {VIEW}.frames.filter((f) => f).length") == n
    assert page.evaluate(f"() => {VIEW}.stats.runs") == runs  # read again from its start, still the same run
    assert page.evaluate(READ_CELLS) == expected_cells(trace, n - 1)


def test_the_browser_decodes_the_float16_entropies_python_sent(offline_view):
    """Entropies travel as float16 in base64 (live_stream._entropy_b64); the browser's decoder gives
    back exactly the float16 values of the recorded entropies, at every step frame."""
    page = offline_view
    trace = Trace.load(next(p for p in example_traces() if p.stem == "sky"))
    receive_in(page, replay_value(trace))
    refs = frame_refs(trace)
    page.wait_for_function(f"() => {VIEW}.frames.length === {len(refs)}")
    decoded = page.evaluate(f"() => {VIEW}.frames.map((f) => f.entropy ? Array.from(f.entropy) : null)")
    steps = 0
    for ref, values in zip(refs, decoded):
        if ref.kind != "step":
            assert values is None
            continue
        expected = trace.steps[ref.index].entropy_nats.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(np.array(values, dtype=np.float32), expected)
        steps += 1
    assert steps == len(trace.steps)
    # the values cover float16's range as the model gives it: subnormal-free zeros, small and large entropies
    assert any(v and min(v) < 0.01 for v in decoded) and any(v and max(v) > 1 for v in decoded)


def test_a_new_runs_start_line_clears_the_last_runs_status_replay_and_charts(offline_view):
    """Between a new run's start line and its first frame (the model's first step), nothing of the run before stays
    on screen: the status waits for the first step, the replay label and slider are empty, the charts are cleared."""
    page = offline_view
    trace = Trace.load(next(p for p in example_traces() if p.stem == "sky"))
    start, end, *frames = replay_value(trace)
    receive_in(page, [start, end, *frames])
    page.wait_for_function(f"() => {VIEW}.stats.shownIndex === {len(frames) - 1}")
    shown = page.evaluate(f"() => {{ const v = {VIEW}; return [v.status.textContent, v.sliderLabel.textContent, "
                          "v.tauSvg.childElementCount, v.commitSvg.childElementCount]; }")
    assert shown[0].startswith("Frame ") and shown[1].startswith("Replay: frame ") and shown[2] > 0 and shown[3] > 0

    again = json.loads(start) | {"run": "the next run"}  # another run's start line, alone: no frame yet
    receive_in(page, [json.dumps(again), None])
    page.evaluate(f"() => {VIEW}.schedule()")
    waiting = page.evaluate(f"() => {{ const v = {VIEW}; return [v.status.textContent, v.sliderLabel.textContent, "
                            "v.tauSvg.childElementCount, v.commitSvg.childElementCount, v.slider.disabled, v.slider.max]; }")
    assert waiting == ["Waiting for the first step\u2026", "Replay: frame \u2013", 0, 0, True, "1"]
