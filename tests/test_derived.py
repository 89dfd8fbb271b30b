"""The metrics' caches hang off the trace they describe (`trace.derived`), not module globals."""

from __future__ import annotations

import copy
import pickle
import threading

from tests.trace_factory import trace_from_text
from visualizer.derived import Derived
from visualizer.metrics import live_readout
from visualizer.metrics.live import tau_series
from visualizer.thinking import CHANNEL_CLOSE, CHANNEL_OPEN, channel_marker_ids
from visualizer.trace import Trace

TEXT = [["O", "cean", "\n", "C", "alm"], ["Wave", "s"]]
COMMITS = [[0, 1, 1, 2, 3], [0, 2]]


def test_values_are_kept_on_their_trace_and_a_copy_computes_its_own():
    trace = trace_from_text(TEXT, COMMITS)
    assert len(trace.derived) == 0
    series = tau_series(trace, 0)
    filled = len(trace.derived)
    assert filled >= len(series)  # one entry per step point, at least
    assert tau_series(trace, 0) == series and len(trace.derived) == filled  # asked again: served, nothing added
    same = Trace.from_json(trace.to_json())
    assert len(same.derived) == 0 and tau_series(same, 0) == series
    assert live_readout(same, -1) == live_readout(trace, -1)
    twin = copy.deepcopy(trace)
    assert len(twin.derived) == 0 and twin == trace  # a lock cannot be copied: a fresh cache, not compared
    assert tau_series(twin, 0) == series
    thawed = pickle.loads(pickle.dumps(trace))
    assert len(thawed.derived) == 0 and tau_series(thawed, 0) == series


def test_channel_markers_are_found_again_when_new_pieces_arrive():
    trace = trace_from_text(TEXT, COMMITS)
    assert channel_marker_ids(trace) == (frozenset(), frozenset())
    trace.pieces.update({900: CHANNEL_OPEN, 901: CHANNEL_CLOSE})  # what a record's new pieces do
    assert channel_marker_ids(trace) == (frozenset({900}), frozenset({901}))


def test_a_value_is_computed_again_only_at_another_version_and_threads_share_the_cache():
    cache, calls = Derived(), []

    def compute():
        calls.append(1)
        return len(calls)

    assert cache.get("k", compute, version=1) == 1 and cache.get("k", compute, version=1) == 1
    assert cache.get("k", compute, version=2) == 2 and len(calls) == 2
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(cache.get("k", compute, version=2))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [2] * 8 and len(calls) == 2
