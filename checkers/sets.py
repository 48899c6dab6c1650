"""Sets of integers as sorted numpy arrays, found by sorting.

numpy 2.3 and later find `np.unique`'s distinct values with a hash table (and `np.union1d`, and `np.setdiff1d` and
`np.intersect1d` unless told their inputs are unique, call it); `np.isin` (and `np.setdiff1d`) sorts both arrays
together stably. On int64 arrays of a million values the first runs about fifty times slower here than sorting,
the second about ten times slower than looking the sorted values up. `np.lexsort` of three columns takes about
four times as long as one stable sort of them packed into one. The checkers' tasks use these instead.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["isin", "lexsort", "setdiff", "union", "unique"]


def unique(a: ArrayLike) -> np.ndarray:
    """The distinct values of `a`, sorted (np.unique without its other outputs)."""
    s = np.sort(np.asarray(a).ravel())
    if len(s) < 2:
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def union(*arrays: np.ndarray) -> np.ndarray:
    """The distinct values of all of `arrays`, sorted (np.union1d)."""
    return unique(np.concatenate(arrays)) if arrays else np.zeros(0, np.int64)


def isin(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Whether each value of `a` is one of `b`'s (np.isin), of `a`'s shape."""
    a = np.asarray(a)
    flat = a.ravel()
    u = unique(b)
    if not len(u) or not len(flat):
        return np.zeros(a.shape, bool)
    order = None if len(flat) < 2 or bool(np.all(flat[1:] >= flat[:-1])) else np.argsort(flat)
    keys = flat if order is None else flat[order]
    at = np.searchsorted(u, keys)  # sorted keys: the lookups walk `u` in order
    np.minimum(at, len(u) - 1, out=at)
    hit = u[at] == keys
    if order is not None:
        back = np.empty(len(flat), bool)
        back[order] = hit
        hit = back
    return hit.reshape(a.shape)


def setdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The values of `a` that are not in `b`, in `a`'s order (np.setdiff1d with distinct `a`)."""
    return np.asarray(a)[~isin(a, b)]


def lexsort(keys: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """np.lexsort(keys): the stable order by the last key, then the one before it, and so on. Neighbouring keys
    whose ranges fit in 63 bits together are packed into one integer, so that numpy sorts fewer keys (one sort when
    they all fit); a key whose range does not fit sends all to np.lexsort as they are."""
    cols = [np.asarray(k) for k in keys]
    if not cols or len(cols[0]) < 2:
        return np.lexsort(cols) if cols else np.zeros(0, np.intp)
    packed = [np.zeros(len(cols[0]), np.int64)]
    bits = 0
    for k in cols:  # the first key is the least significant
        lo, hi = int(k.min()), int(k.max())
        width = (hi - lo).bit_length()
        if width > 63:
            return np.lexsort(cols)
        if bits + width > 63:
            packed.append(np.zeros(len(cols[0]), np.int64))
            bits = 0
        if width:
            packed[-1] |= (k.astype(np.int64) - lo) << bits
        bits += width
    return np.argsort(packed[0], kind="stable") if len(packed) == 1 else np.lexsort(packed)
