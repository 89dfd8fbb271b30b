from tests.fake_records import fake_trace
from visualizer.branch_metrics import METRICS, branch_deltas


def _two_runs():
    # Same tokens, committed left to right in one run and right to left in the other: tau_b flips sign.
    forward = fake_trace(["1000", "1100", "1110", "1111"], canvas_length=4)
    backward = fake_trace(["0001", "0011", "0111", "1111"], canvas_length=4)
    return forward, backward


def test_deltas_are_branch_minus_parent_per_metric():
    forward, backward = _two_runs()
    rows = branch_deltas(forward, backward)
    assert [row[0] for row in rows] == list(METRICS)
    tau = rows[0]
    assert float(tau[1]) > 0 > float(tau[2])
    assert (tau[1], tau[2], tau[3]) == ("1", "-1", "-2")
    assert rows[2][3] == "-4"  # structure-first difference flips with the order too


def test_a_run_against_itself_changes_nothing():
    forward, _ = _two_runs()
    assert all(delta in ("0", "n/a") for *_, delta in branch_deltas(forward, forward))
