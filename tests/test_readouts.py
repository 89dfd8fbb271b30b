"""The readouts' words: the sentence under tau_b, the step budget, a final block's count."""

import pytest

from visualizer.readout import order_words

pytestmark = pytest.mark.unit


def test_order_words_follow_tau():
    assert order_words(0.95) == "run left to right"
    assert order_words(0.44) == "mostly run left to right"
    assert order_words(0.0) == "follow no clear order"
    assert order_words(-0.95) == "run right to left"
