"""Per-position states from hand-made records: new, kept, remasked, noise, committed, empty."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fake_records import NOISE_ID, fake_trace
from visualizer.states import State, frame_refs, frame_state
from visualizer.trace import Trace

N, W, K, R, C, E = State.NOISE, State.NEW, State.KEPT, State.REMASKED, State.COMMITTED, State.EMPTY


def row(trace, frame, block=0):
    return [State(s) for s in frame_state(trace, frame).states[block]]


def test_new_kept_remasked_and_noise_follow_the_accepted_masks():
    trace = fake_trace(["1000", "1100", "0110", "1111"], canvas_length=4)
    assert row(trace, 0) == [W, N, N, N]
    assert row(trace, 1) == [K, W, N, N]
    assert row(trace, 2) == [R, K, W, N]  # position 0 went back to noise: re-masked
    assert row(trace, 3) == [W, K, K, W]  # accepted again after a re-mask counts as new
    assert row(trace, 4) == [C, C, C, C]  # the commit frame


def test_noise_and_remasked_positions_never_display_a_token():
    trace = fake_trace(["1100", "0100"], canvas_length=4)
    state = frame_state(trace, 1)
    assert state.token_ids[0].tolist() == [-1, 11, -1, -1]
    assert NOISE_ID not in state.token_ids


def test_kept_position_flags_a_resample_that_changed_the_token():
    trace = fake_trace(["1100", "1100", "1100"], canvas_length=4, changes={(1, 1): 50})
    assert not frame_state(trace, 0).changed.any()
    changed = frame_state(trace, 1).changed[0]
    assert changed.tolist() == [False, True, False, False]
    assert frame_state(trace, 1).token_ids[0, 1] == 50
    # step 2 resamples 11 again: it differs from step 1's 50, so it is flagged once more
    assert frame_state(trace, 2).changed[0].tolist() == [False, True, False, False]


def test_counts_match_the_states():
    trace = fake_trace(["1100", "0111"], canvas_length=4)
    counts = frame_state(trace, 1).counts
    assert counts == {"accepted": 3, "new": 2, "kept": 1, "changed": 0, "remasked": 1, "noise": 0, "committed": 0}


def test_multi_block_runs_show_earlier_blocks_committed_and_later_ones_empty():
    trace = fake_trace(["10", "11"], ["01", "11"], ["11"], canvas_length=2)
    refs = frame_refs(trace)
    assert [(r.kind, r.block) for r in refs] == [
        ("step", 0), ("step", 0), ("commit", 0), ("step", 1), ("step", 1), ("commit", 1), ("step", 2), ("commit", 2)
    ]
    first = frame_state(trace, 0)
    assert [State(s) for s in first.states[1]] == [E, E] and [State(s) for s in first.states[2]] == [E, E]
    middle = frame_state(trace, 3)  # block 1, step 0
    assert [State(s) for s in middle.states[0]] == [C, C]
    assert [State(s) for s in middle.states[1]] == [N, W]
    assert middle.token_ids[0].tolist() == [10, 11]  # committed tokens of block 0
    assert middle.step == 0 and middle.block == 1
    # a new block starts with nothing accepted before: its first accepted positions are new, not kept
    assert frame_state(trace, 6).states[2].tolist() == [W, W]
    last = frame_state(trace, -1)
    assert (last.states == C).all()


def test_eos_block_commits_pad_after_the_eos():
    trace = fake_trace(["1111"], canvas_length=4, eos_at=1)
    last = frame_state(trace, -1)
    assert last.token_ids[0].tolist() == [10, 1, 0, 0]


def test_an_unfinished_block_has_step_frames_but_no_commit_frame():
    trace = fake_trace(["10", "11"], canvas_length=2, finished=False)
    trace.blocks.clear()  # as if the run was cancelled before the block committed
    refs = frame_refs(trace)
    assert [r.kind for r in refs] == ["step", "step"]
    assert np.array_equal(frame_state(trace, -1).states[0], [K, W])


def test_count_counts_one_state_in_one_block_or_in_all():
    """FrameState.count, as the charts and the MLX tests use it (mutation testing found it untested)."""
    trace = fake_trace(["1100", "1111"], ["0110"], canvas_length=4)
    frame = frame_state(trace, 3)  # block 1's step 0: block 0 committed
    assert frame.count(C) == 4 and frame.count(C, block=0) == 4 and frame.count(C, block=1) == 0
    assert frame.count(W) == 2 and frame.count(N, block=1) == 2 and frame.count(R) == 0


def test_frame_state_arrays_and_indexes():
    """The dtypes and fill values renderers and the live encoder rely on, negative frame indexes
    (counted from the end, and reported as the frame they name), and the error on an empty trace."""
    trace = fake_trace(["1000", "1100"], ["0000"], canvas_length=4, finished=False)
    frame = frame_state(trace, 0)
    assert frame.states.dtype == np.uint8 and frame.token_ids.dtype == np.int32
    assert frame.token_ids[0].tolist() == [10, -1, -1, -1] and frame.token_ids[1].tolist() == [-1] * 4  # -1: nothing shown
    last = len(frame_refs(trace)) - 1
    assert frame_state(trace, -1).frame == last and frame_state(trace, -2).frame == last - 1
    empty = Trace(model=trace.model, prompt="p")
    empty.append(trace.start)
    with pytest.raises(IndexError, match=r"^the trace has no frames yet$"):
        frame_state(empty, 0)
