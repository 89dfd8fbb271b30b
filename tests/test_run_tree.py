import pytest

from visualizer.run_tree import RunTree, branch_cap_refusal


def test_branches_are_named_by_their_place_in_the_tree():
    tree = RunTree().add_root()
    tree, first = tree.add_branch("root", 1, 10, ("forbid 11=moon",))
    tree, second = tree.add_branch("root", 2, 3, ())
    tree, nested = tree.add_branch(first, 1, 12, ("remask 4", "topk 2"))
    assert (first, second, nested) == ("branch 1", "branch 2", "branch 1.1")
    assert tree.labels() == [
        "root",
        "branch 1 (forbid 11=moon at 1:10)",
        "branch 2 (no intervention at 2:3)",
        "branch 1.1 (remask 4, topk 2 at 1:12)",
    ]


def test_a_new_root_starts_the_tree_over():
    tree, _ = RunTree().add_root().add_branch("root", 1, 1, ())
    assert tree.add_root().names() == ["root"]


def test_unknown_parent_is_refused():
    with pytest.raises(ValueError, match="no run named 'branch 9'"):
        RunTree().add_root().add_branch("branch 9", 1, 1, ())


def test_cap_refuses_only_once_reached():
    tree = RunTree().add_root()
    assert branch_cap_refusal(tree, None) is None
    for _ in range(2):
        assert branch_cap_refusal(tree, 2) is None
        tree, _ = tree.add_branch("root", 1, 1, ())
    assert branch_cap_refusal(tree, 2) == (
        "This session already holds 2 branches, the most a hosted session may run; reload the page to start over.")
    assert branch_cap_refusal(tree, None) is None


def test_fork_point_counts_from_one_and_commit_frames_fork_at_the_last_step():
    from tests.fake_records import fake_trace
    from visualizer.run_tree import fork_point
    from visualizer.states import frame_refs

    trace = fake_trace(["10", "11"], ["01", "11", "11"], canvas_length=2)
    points = [fork_point(trace, f) for f in range(len(frame_refs(trace)))]
    assert points == [(1, 1), (1, 2), (1, 2), (2, 1), (2, 2), (2, 3), (2, 3)]
    with pytest.raises(ValueError, match="frame 7 is outside this run"):
        fork_point(trace, 7)
