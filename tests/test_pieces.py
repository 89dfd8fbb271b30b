"""The pieces a record carries: each id's text once per run, decoded once per backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from backends.text import PieceDecoder, PieceTable
from backends.transformers_backend import load_tokenizer

BUILTIN = Path(__file__).resolve().parent.parent / "assets" / "models" / "diffusiongemma-tiny-demo"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(str(BUILTIN))


class CountingTokenizer:
    """A slow-path tokenizer (no Rust backend) that counts the ids it is asked to decode."""

    def __init__(self, inner):
        self.inner, self.decoded = inner, []

    def batch_decode(self, singles, skip_special_tokens):
        self.decoded += [ids[0] for ids in singles]
        return self.inner.batch_decode(singles, skip_special_tokens=skip_special_tokens)


def test_the_fast_path_decodes_every_id_of_the_vocabulary_as_batch_decode_does(tokenizer):
    decoder = PieceDecoder(tokenizer)
    assert decoder._rust is not None, "the built-in tokenizer is a fast one without space clean-up"
    every_id = np.arange(len(tokenizer))
    assert decoder.texts_of(every_id) == tokenizer.batch_decode([[i] for i in every_id.tolist()], skip_special_tokens=False)


def test_a_tokenizer_that_cleans_up_spaces_goes_through_batch_decode(tokenizer):
    class CleaningUp(CountingTokenizer):
        backend_tokenizer = tokenizer.backend_tokenizer
        clean_up_tokenization_spaces = True

    slow = CleaningUp(tokenizer)
    assert PieceDecoder(slow).texts_of(np.array([5, 9])) == tokenizer.batch_decode([[5], [9]], skip_special_tokens=False)
    assert slow.decoded == [5, 9]


def test_a_table_sends_each_id_once_sorted_and_the_shared_decoder_decodes_it_once(tokenizer):
    counting = CountingTokenizer(tokenizer)
    decoder = PieceDecoder(counting)
    first, second = PieceTable(decoder=decoder), PieceTable(decoder=decoder)

    sent = first.new(np.array([30, 7, 30, 12]))
    assert list(sent) == [7, 12, 30]
    assert sent == {i: tokenizer.decode([i]) for i in (7, 12, 30)}
    assert first.new([12, 7]) == {}
    assert list(first.new([7, 5000, 3])) == [3, 5000]  # an id past any earlier one grows the table

    assert list(second.new([30, 3])) == [3, 30]  # another run sends them again ...
    assert sorted(counting.decoded) == [3, 7, 12, 30, 5000]  # ... but nothing is decoded twice
    assert first.new([]) == {}
