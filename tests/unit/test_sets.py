"""The checkers' integer sets found by sorting give numpy's own answers: np.unique, np.union1d, np.isin,
np.setdiff1d and np.lexsort, on any integers, sorted or not, empty or not."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kchaos.checkers.sets import isin, lexsort, setdiff, union, unique

ints = st.lists(st.integers(-2**62, 2**62) | st.integers(-3, 3), max_size=60).map(lambda xs: np.array(xs, np.int64))


@given(ints, ints)
def test_each_set_operation_is_numpys(a, b):
    assert np.array_equal(unique(a), np.unique(a)) and unique(a).dtype == np.int64
    assert np.array_equal(union(a, b), np.union1d(a, b))
    assert np.array_equal(isin(a, b), np.isin(a, b))
    assert np.array_equal(isin(np.sort(a), b), np.isin(np.sort(a), b))
    assert np.array_equal(setdiff(unique(a), b), np.setdiff1d(np.unique(a), b, assume_unique=True))


def test_isin_keeps_the_shape_and_takes_a_list():
    a = np.arange(12).reshape(3, 4)
    assert np.array_equal(isin(a, [0, 5, 11]), np.isin(a, [0, 5, 11]))
    assert isin(a, []).shape == (3, 4) and not isin(a, []).any()


@st.composite
def key_columns(draw: st.DrawFn) -> list[np.ndarray]:
    """1 to 8 key columns of one length: each of small, of 30-bit or of any 63-bit integers."""
    n = draw(st.integers(0, 40))
    width = st.sampled_from([st.integers(-3, 3), st.integers(0, 2**30), st.integers(-2**62, 2**62)])
    return [np.array(draw(st.lists(draw(width), min_size=n, max_size=n)), np.int64)
            for _ in range(draw(st.integers(1, 8)))]


@given(key_columns())
def test_lexsort_is_numpys_whether_the_keys_pack_into_one_into_several_or_not(keys):
    assert np.array_equal(lexsort(keys), np.lexsort(keys))
    small = [k % 7 for k in keys]  # these always pack
    assert np.array_equal(lexsort(small), np.lexsort(small))
