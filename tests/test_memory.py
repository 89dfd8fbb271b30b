"""`--batch-size auto`'s estimate of a row's memory (backends/memory.py)."""

from types import SimpleNamespace

from backends.memory import COMPILED_TENSORS_PER_ROW, SHIFT_TENSORS_PER_ROW, VOCAB_TENSORS_PER_ROW, row_bytes


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
