"""What the Spark txn checker's second and third jobs compute: numpy over the bucket files of the first job.

The definitions are docs/checkers.md's, computed as the reference txn checker
computes them:

- `value_task` (files `v<k>`: whole values): lost_write, unseen (and how many undecided), G1a, aborted_read,
  duplicate, precommitted_read, the number of values read; for torn_transaction, the transactions with a value
  a read_committed reader returned and those with one it did not (in a completed partition); and the info
  transactions with some value read (their sends enter the version order). Its sends include those of the
  transactions the run cut off (type info, no offset);
- `partition_task` (files `p<k>`: whole Kafka partitions): inconsistent_offsets, the poll and send kinds, and
  the ww, wr and every-wr edges of the partitions (rows of EDGE_COLUMNS, unsorted), saved, and the backward ones
  among them;
- `cyclic_task`: of one partition task's edges, those that can lie on a cycle, given the spans of every task's
  backward edges: `cycles` then sorts and searches only those.

A kind comes back as (count, the `limit` smallest keys): every kind's keys lie in one value or one partition,
so the driver adds the counts. Pure numpy: the functions travel to Spark's workers by value.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from kchaos.checkers.sets import isin, lexsort, setdiff, unique
from kchaos.checkers.txn.flat import NULL

WW, WR, WR_ALL = 0, 1, 2  # WR_ALL: every wr edge, for the cycles of wr edges alone
GROUPS = ((WW,), (WR_ALL,), (WW, WR))  # the edge kinds each cycle search takes: G0, G1c_wr, G1c
EDGE_COLUMNS = ("src", "dst", "kind", "p", "o1", "v1", "o2", "v2")
SHIFT = np.int64(1 << 40)  # offsets and line indexes stay below 2**40
Kind = tuple[int, list[tuple[int, ...]]]


def edge_array(rows: Any) -> np.ndarray:
    """An (n, 8) int64 array of EDGE_COLUMNS rows, sorted: each edge once per (src, dst, kind), with its smallest
    witness."""
    a = np.asarray(rows, dtype=np.int64).reshape(-1, len(EDGE_COLUMNS))
    if not len(a):
        return a
    a = a[lexsort(a.T[::-1])]
    first = np.ones(len(a), bool)
    first[1:] = np.any(a[1:, :3] != a[:-1, :3], axis=1)
    return a[first]


def spans(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The merged spans [lo, hi] of the backward edges (dst < src) among edges `src` -> `dst`."""
    back = dst < src
    lo, hi = dst[back], src[back]
    if not len(lo):
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.ones(len(lo), bool)
    new[1:] = lo[1:] > reach[:-1]
    return lo[new], np.maximum.reduceat(hi, np.flatnonzero(new))


def within(src: np.ndarray, dst: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each edge has both ends within one of the merged spans [lo, hi]: with nodes numbered in history
    order, only such an edge can lie on a cycle of edges whose backward ones made the spans."""
    if not len(lo):
        return np.zeros(len(src), bool)
    s_at, d_at = np.searchsorted(lo, src, "right") - 1, np.searchsorted(lo, dst, "right") - 1
    inside = (s_at >= 0) & (s_at == d_at)
    return inside & (src <= hi[np.maximum(s_at, 0)]) & (dst <= hi[np.maximum(d_at, 0)])


def group_spans(backward: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each of GROUPS' merged spans, from the backward edges of a whole history (any superset of them)."""
    return [spans(*backward[np.isin(backward[:, 2], kinds)][:, :2].T) for kinds in GROUPS]


def cyclic_task(job: tuple[str, list[tuple[np.ndarray, np.ndarray]]]) -> np.ndarray:
    """The edges saved at `path` by a partition task that can lie on a cycle: those within the spans, from
    `group_spans`, of a group of GROUPS that takes their kind. `cycles` of every task's rows equals `cycles` of
    every edge: each group's backward edges are among them, so its spans and the edges within them are the same."""
    path, spans_of = job
    with np.load(path) as z:
        e = z["edges"]
    keep = np.zeros(len(e), bool)
    for kinds, (lo, hi) in zip(GROUPS, spans_of):
        keep |= np.isin(e[:, 2], kinds) & within(e[:, 0], e[:, 1], lo, hi)
    return e[keep]


def _load(files: list[str]) -> tuple[np.ndarray, np.ndarray]:
    reads, sends = [np.zeros((0, 9), np.int64)], [np.zeros((0, 7), np.int64)]
    for f in files:
        with np.load(f) as z:
            reads.append(z["reads"])
            sends.append(z["sends"])
    return np.concatenate(reads), np.concatenate(sends)


def fix_placeholders(txn: np.ndarray, fixup: np.ndarray) -> None:
    """Placeholders (-1 - completion index) to invocation indexes, in place."""
    hole = (txn < 0) & (txn != NULL)
    if hole.any() and len(fixup):
        at = np.clip(np.searchsorted(fixup[:, 0], txn[hole]), 0, len(fixup) - 1)
        txn[hole] = np.where(fixup[at, 0] == txn[hole], fixup[at, 1], txn[hole])


def _sorted_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lexicographic order of a 2-d int array's rows, the rows in it, and whether each differs from the one
    before."""
    order = lexsort(a.T[::-1])
    s = a[order]
    new = np.ones(len(a), bool)
    new[1:] = np.any(s[1:] != s[:-1], axis=1)
    return order, s, new


def unique_rows(a: np.ndarray) -> np.ndarray:
    """The distinct rows of a 2-d int array, sorted lexicographically (np.unique(axis=0), several times faster)."""
    if len(a) < 2:
        return a
    _, s, new = _sorted_rows(a)
    return s[new]


def _row_ids(a: np.ndarray) -> np.ndarray:
    """Each row's place among the distinct rows of 2-d int array `a`, sorted (np.unique(axis=0)'s inverse, several
    times faster)."""
    order, _, new = _sorted_rows(a)
    ids = np.empty(len(a), np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def _kind(keys: np.ndarray, limit: int) -> Kind:
    if not len(keys):
        return 0, []
    keys = keys.reshape(len(keys), -1)
    u = unique_rows(keys)
    small = [tuple(r) if len(r) > 1 else r[0] for r in u[:limit].tolist()]
    return len(u), small


def _lookup(keys: np.ndarray, table_keys: np.ndarray, table_vals: np.ndarray, missing: int = NULL) -> np.ndarray:
    if not len(table_keys):
        return np.full(len(keys), missing, np.int64)
    at = np.clip(np.searchsorted(table_keys, keys), 0, len(table_keys) - 1)
    return np.where(table_keys[at] == keys, table_vals[at], missing)


def _save(out: str, **arrays: np.ndarray) -> str:
    """Large results go to a file beside the bucket files, not through Spark's result channel (10x slower)."""
    np.savez(out, allow_pickle=True, **arrays)  # savez's default, named so that **arrays holds only arrays
    return out


def value_task(job: tuple) -> dict[str, Any]:
    """The value kinds of the values of `files` (see the module docstring); the per-transaction arrays (`shown`,
    `hidden`, `read_info`) are saved at `out`, whose name is returned as "arrays"."""
    files, fixup, top, complete, rc_polls, limit, out = job
    R, S = _load(files)
    fix_placeholders(R[:, 3], fixup)
    fix_placeholders(S[:, 3], fixup)
    rv, role = R[:, 2], R[:, 7]
    committed_reader = (role == 1) | ((role == 0) & bool(rc_polls))
    read = unique(rv)
    seen_c, seen_u = unique(rv[committed_reader]), unique(rv[~committed_reader])
    sv, sp, so, stx, sty = S[:, 2], S[:, 0], S[:, 1], S[:, 3], S[:, 6]
    ok, unread = sty == 1, ~isin(sv, read)
    in_complete = isin(sp, complete)
    top_o = _lookup(sp, top[0], top[1])
    lost = ok & unread & (so != NULL) & (top_o != NULL) & (so < top_o)
    unseen = ok & unread & ~lost
    lost |= ok & ~unread & ~isin(sv, rv[role == 1]) & in_complete  # polled, not in the complete final read
    aborted = unique(sv[sty == 2])
    placed = (so != NULL) & ((sty == 1) | (sty == 3))  # a send's offset is one more place its value is at
    trip = unique_rows(np.concatenate([R[:, [2, 0, 1]], S[placed][:, [2, 0, 1]]]))
    vals, n_at = np.unique(trip[:, 0], return_counts=True)
    order = np.argsort(sv, kind="stable")
    sender = _lookup(rv, sv[order], stx[order])
    polls = role == 0
    shown = isin(sv, seen_c)
    nodes = (sty == 1) | (sty == 3)
    return {
        "lost_write": _kind(sv[lost], limit), "unseen": _kind(sv[unseen], limit),
        "undecided": len(unique(sv[unseen & ~in_complete])),
        "G1a": _kind(np.intersect1d(aborted, seen_c, assume_unique=True), limit),
        "aborted_read": _kind(setdiff(np.intersect1d(aborted, seen_u, assume_unique=True), seen_c), limit),
        "duplicate": _kind(vals[n_at > 1], limit),
        "precommitted_read": _kind(rv[polls & (sender == R[:, 3]) & (sender != NULL)], limit),
        "values_read": len(read),
        "arrays": _save(out, shown=unique(stx[nodes & shown]), hidden=unique(stx[nodes & ~shown & in_complete]),
                        read_info=unique(stx[(sty == 3) & ~unread])),
    }


def partition_task(job: tuple) -> dict[str, Any]:
    """The partition kinds and edges of the partitions of `files` (see the module docstring). `shared` is a .npz
    file holding `writers` (values sorted, their writer transaction, 1 if it is a graph node), `read_info` (the
    info transactions with some value read) and `moves` (the rebalances as (process, partition, line index)
    rows). The edges are saved at `out`, returned as "edges"."""
    files, fixup, shared, limit, out_path = job
    with np.load(shared) as z:
        (wv, wtx, wnode), read_info, moves = z["writers"], z["read_info"], z["moves"]
    R, S = _load(files)
    fix_placeholders(R[:, 3], fixup)
    fix_placeholders(S[:, 3], fixup)
    into = (S[:, 1] != NULL) & ((S[:, 6] == 1) | ((S[:, 6] == 3) & isin(S[:, 3], read_info)))
    E = unique_rows(np.concatenate([R[:, :3], S[into][:, :3]]))  # version order: (p, o, v), sorted
    po = E[:, 0] * SHIFT + E[:, 1]
    known, n_values = np.unique(po, return_counts=True)
    out: dict[str, Any] = {"inconsistent_offsets": _kind(np.stack([known // SHIFT, known % SHIFT], 1)[n_values > 1],
                                                         limit)}

    def between(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.searchsorted(known, p * SHIFT + b, "left") > np.searchsorted(known, p * SHIFT + a, "right")

    P = R[R[:, 7] == 0]
    P = P[lexsort((P[:, 6], P[:, 5], P[:, 0], P[:, 4]))]  # by process, partition, line, seq
    same = (P[1:, 4] == P[:-1, 4]) & (P[1:, 0] == P[:-1, 0])
    cur, prev = P[1:][same], P[:-1][same]
    proc, p, a, b = cur[:, 4], cur[:, 0], prev[:, 1], cur[:, 1]
    inner = prev[:, 3] == cur[:, 3]
    free = ~_rebalanced(moves, proc, p, prev[:, 3], cur[:, 5])
    skip, back = free & (b > a) & between(p, a, b), free & (b <= a)
    ext = np.stack([proc, p, a, b], 1)
    intk = np.stack([cur[:, 3], p, a, b], 1)
    out["poll_skip"], out["nonmonotonic_poll"] = _kind(ext[skip & ~inner], limit), _kind(ext[back & ~inner], limit)
    out["int_poll_skip"], out["int_nonmonotonic_poll"] = _kind(intk[skip & inner], limit), \
        _kind(intk[back & inner], limit)
    W = S[(S[:, 1] != NULL) & ((S[:, 6] == 1) | (S[:, 6] == 3))]
    W = W[lexsort((W[:, 5], W[:, 3], W[:, 0], W[:, 4]))]  # by process, partition, transaction, position
    same = (W[1:, 4] == W[:-1, 4]) & (W[1:, 0] == W[:-1, 0])
    cur, prev = W[1:][same], W[:-1][same]
    p, a, b = cur[:, 0], prev[:, 1], cur[:, 1]
    inner = prev[:, 3] == cur[:, 3]
    out["nonmonotonic_send"] = _kind(np.stack([cur[:, 4], p, a, b], 1)[~inner & (b <= a)], limit)
    intk = np.stack([cur[:, 3], p, a, b], 1)
    out["int_nonmonotonic_send"] = _kind(intk[inner & (b <= a)], limit)
    out["int_send_skip"] = _kind(intk[inner & (b > a) & between(p, a, b)], limit)
    edges = np.concatenate([_ww(E, wv, wtx, wnode), _wr(P, wv, wtx, wnode)])
    out["edges"] = _save(out_path, edges=edges)
    out["backward"] = edges[edges[:, 1] < edges[:, 0]]  # a correct history has almost none: they make the spans
    return out


def _rebalanced(moves: np.ndarray, proc: np.ndarray, p: np.ndarray, after: np.ndarray, before: np.ndarray
                ) -> np.ndarray:
    """Whether a rebalance of (proc, p) lies strictly between line indexes `after` and `before`."""
    if not len(moves) or not len(proc):
        return np.zeros(len(proc), bool)
    inv = _row_ids(np.concatenate([moves[:, :2], np.stack([proc, p], 1)]))
    g_moves, g_pairs = inv[:len(moves)], inv[len(moves):]
    keys = np.sort(g_moves * SHIFT + moves[:, 2])
    return np.searchsorted(keys, g_pairs * SHIFT + before, "left") > np.searchsorted(keys, g_pairs * SHIFT + after,
                                                                                     "right")


def _ww(E: np.ndarray, wv: np.ndarray, wtx: np.ndarray, wnode: np.ndarray) -> np.ndarray:
    """ww rows: every node-written entry of the version order to every one at the next such offset."""
    w = _lookup(E[:, 2], wv, wtx)
    node = _lookup(E[:, 2], wv, wnode, 0) == 1
    E, w = E[node], w[node]
    if not len(E):
        return np.zeros((0, 8), np.int64)
    po = E[:, 0] * SHIFT + E[:, 1]
    starts = np.flatnonzero(np.r_[True, po[1:] != po[:-1]])
    counts = np.diff(np.r_[starts, len(E)])
    group = np.repeat(np.arange(len(starts)), counts)
    has_next = np.r_[E[starts[1:], 0] == E[starts[:-1], 0], False]  # the next offset group is in the same partition
    reps = np.where(has_next[group], np.r_[counts[1:], 0][group], 0)
    left = np.repeat(np.arange(len(E)), reps)
    block = np.repeat(np.cumsum(reps) - reps, reps)
    right = np.r_[starts[1:], 0][group[left]] + (np.arange(len(left)) - block)
    rows = np.stack([w[left], w[right], np.full(len(left), WW), E[left, 0], E[left, 1], E[left, 2], E[right, 1],
                     E[right, 2]], 1)
    return rows[rows[:, 0] != rows[:, 1]]


def _wr(P: np.ndarray, wv: np.ndarray, wtx: np.ndarray, wnode: np.ndarray) -> np.ndarray:
    """wr rows: per node transaction and partition, from the writer of its highest read with a node writer; and
    WR_ALL rows, from the writer of every such read."""
    w = _lookup(P[:, 2], wv, wtx)
    keep = (_lookup(P[:, 2], wv, wnode, 0) == 1) & (w != P[:, 3]) & ((P[:, 8] == 1) | (P[:, 8] == 3))
    P, w = P[keep], w[keep]
    if not len(P):
        return np.zeros((0, 8), np.int64)
    every = np.stack([w, P[:, 3], np.full(len(P), WR_ALL), P[:, 0], P[:, 1], P[:, 2], P[:, 1], P[:, 2]], 1)
    order = lexsort((-P[:, 2], P[:, 1], P[:, 0], P[:, 3]))  # by reader, partition, offset, -value
    P, w = P[order], w[order]
    last = np.r_[(P[1:, 3] != P[:-1, 3]) | (P[1:, 0] != P[:-1, 0]), True]
    P, w = P[last], w[last]
    top = np.stack([w, P[:, 3], np.full(len(P), WR), P[:, 0], P[:, 1], P[:, 2], P[:, 1], P[:, 2]], 1)
    return np.concatenate([top, edge_array(every)])
