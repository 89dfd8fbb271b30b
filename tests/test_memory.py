"""`--batch-size auto`'s estimate of a row's memory (backends/memory.py)."""

from types import SimpleNamespace

from backends.memory import SHIFT_TENSORS_PER_ROW, VOCAB_TENSORS_PER_ROW, row_bytes


def test_a_row_counts_its_vocabulary_sized_tensors_and_the_shifts_when_it_is_recorded():
    real = SimpleNamespace(text_config=SimpleNamespace(vocab_size=262_144))
    one = 256 * 262_144 * 4  # one float32 tensor over the canvas and the vocabulary: 268 MB
    assert row_bytes(real, canvas=256, shift=False) == VOCAB_TENSORS_PER_ROW * one
    assert row_bytes(real, canvas=256) == (VOCAB_TENSORS_PER_ROW + SHIFT_TENSORS_PER_ROW) * one  # recorded by default
