"""visualizer/files.py: a file is written whole or not at all."""

from __future__ import annotations

import pytest

from visualizer.files import write_atomically


def test_a_write_lands_whole_under_its_name_and_leaves_no_partial(tmp_path):
    path = tmp_path / "new" / "folder" / "a.json"
    assert write_atomically(path, lambda partial: partial.write_text("whole", encoding="utf-8")) == path
    assert path.read_text(encoding="utf-8") == "whole"
    assert [p.name for p in path.parent.iterdir()] == ["a.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_partial(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old", encoding="utf-8")

    def half_then_fail(partial):
        partial.write_text("half", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, half_then_fail)
    assert path.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
