"""`--batch-size auto`'s estimate of a row's memory (backends/memory.py)."""

from types import SimpleNamespace

from backends.memory import (COMPILED_TENSORS_PER_ROW, FASTEST_ROWS, HEADROOM, SHIFT_TENSORS_PER_ROW, VOCAB_TENSORS_PER_ROW,
                             auto_rows, row_bytes)


def test_a_row_counts_its_vocabulary_sized_tensors_and_the_shifts_when_it_is_recorded():
    real = SimpleNamespace(text_config=SimpleNamespace(vocab_size=262_144))
    one = 256 * 262_144 * 4  # one float32 tensor over the canvas and the vocabulary: 268 MB
    assert row_bytes(real, canvas=256, shift=False) == VOCAB_TENSORS_PER_ROW * one
    assert row_bytes(real, canvas=256) == (VOCAB_TENSORS_PER_ROW + SHIFT_TENSORS_PER_ROW) * one  # recorded by default


def test_a_compiled_row_counts_what_cuda_graphs_keep():
    """Compiled, 12 rows needed at least 2.65 GiB a row on an H100 (out of memory); the estimate says more than that."""
    real = SimpleNamespace(text_config=SimpleNamespace(vocab_size=262_144))
    compiled = row_bytes(real, canvas=256, shift=False, compiled=True)
    assert compiled == (VOCAB_TENSORS_PER_ROW + COMPILED_TENSORS_PER_ROW) * 256 * 262_144 * 4
    assert compiled >= 2.65 * 2**30 > row_bytes(real, canvas=256, shift=False)


def test_auto_takes_the_rows_that_fit_up_to_the_fastest_measured_count():
    """An H200 with the real model loaded has room for 24 compiled rows with the shift; 16 gave the most
    generations a second there (BENCHMARKS.md), so auto stops at 16; a fuller GPU gets what fits, never 0."""
    real = SimpleNamespace(text_config=SimpleNamespace(vocab_size=262_144))
    per_row = row_bytes(real, canvas=256, compiled=True)
    room_for = lambda rows: int((rows + 0.5) * per_row / (1 - HEADROOM))  # free bytes that hold `rows` rows and a half
    assert auto_rows(room_for(24), per_row) == FASTEST_ROWS == 16
    assert auto_rows(room_for(11), per_row) == 11
    assert auto_rows(per_row // 2, per_row) == 1
