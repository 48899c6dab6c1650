"""What one Spark task of the queue checker computes: numpy over a few bucket files (`kchaos.checkers.buckets`).

A task gets `[(run, path), ...]`, reads those files with pyarrow and returns a
small dict per run. The definitions are docs/checkers.md's, computed as
`kchaos.checkers.queue.reference` computes them:

- `partition_task` (files `p<k>`, whole Kafka partitions): inconsistent_offset,
  acked_offset_mismatch, poll_skip, nonmonotonic_poll, nonmonotonic_send, the
  highest read offset and the completed final read of each partition, and the
  read-bound candidates (acks below a read offset whose value this task never
  saw read) with the first time a higher offset was read, and the consumer group
  kinds committed_unconsumed and double_consumed;
- `value_task` (files `v<k>`, whole values): acked, lost, unseen, duplicate,
  unexpected, failed_visible and the number of values read, given the
  partition facts of the first job.

A kind is returned as (count, items): items are (key, acked_ns, exposed_ns),
the `limit` smallest keys. Kinds whose key is a value but which are found per
partition (acked_offset_mismatch, nonmonotonic_send) return every key, since
one value may show up in several partitions' tasks; the driver merges them.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kchaos.checkers.buckets import P_ACK, P_COMMITTED, P_DONE, P_DRAIN, P_POLL, V_DRAIN, V_FAIL, V_INVOKE, V_OK, V_POLL
from kchaos.checkers.sets import isin, lexsort, setdiff, union, unique

__all__ = ["partition_task", "value_task"]

NULL = np.iinfo(np.int64).min
Item = tuple[Any, int | None, int | None]


def _load(files: list[tuple[int, str]]) -> dict[int, dict[str, np.ndarray]]:
    """run -> column -> int64 array (NULL for null) of the rows of its files."""
    tables: dict[int, list[pa.Table]] = defaultdict(list)
    for run, path in files:
        tables[run].append(pq.read_table(path))
    out = {}
    for run, ts in tables.items():
        t = pa.concat_tables(ts)
        out[run] = {name: _ints(t.column(name)) for name in t.column_names}
    return out


def _ints(col: pa.ChunkedArray) -> np.ndarray:
    return col.combine_chunks().cast(pa.int64()).to_numpy(zero_copy_only=False)


def _starts(*cols: np.ndarray) -> np.ndarray:
    n = len(cols[0])
    new = np.zeros(n, bool)
    if n:
        new[0] = True
        for c in cols:
            new[1:] |= c[1:] != c[:-1]
    return new


def _first_per_group(keys: list[np.ndarray], time: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Distinct key tuples (sorted) and the smallest `time` of each."""
    order = lexsort([time] + keys[::-1])
    sk = [k[order] for k in keys]
    first = _starts(*sk)
    return [k[first] for k in sk], time[order][first]


def _opt(x: int) -> int | None:
    return None if x == NULL else int(x)


def _capped(keys: list[Any] | np.ndarray, acked: np.ndarray, exposed: np.ndarray, limit: int
            ) -> tuple[int, list[Item]]:
    """(count, the `limit` smallest items) of distinct sorted keys with their times."""
    n = len(keys)
    head = keys[:limit].tolist() if isinstance(keys, np.ndarray) else keys[:limit]
    return n, [(head[i], _opt(acked[i]), _opt(exposed[i])) for i in range(min(n, limit))]


def _lookup(table: dict[int, int], keys: np.ndarray) -> np.ndarray:
    """table[k] for each of `keys` (NULL where absent), without a Python loop over the keys."""
    if not table or not len(keys):
        return np.full(len(keys), NULL)
    ks = np.array(sorted(table), np.int64)
    vs = np.array([table[k] for k in ks.tolist()], np.int64)
    i = np.minimum(np.searchsorted(ks, keys), len(ks) - 1)
    return np.where(ks[i] == keys, vs[i], NULL)


def partition_task(files: list[tuple[int, str]], limit: int) -> dict[int, dict[str, Any]]:
    """The partition kinds of each run in `files` (whole Kafka partitions), see the module doc."""
    return {run: _partitions(c, limit) for run, c in _load(files).items()}


def _partitions(c: dict[str, np.ndarray], limit: int) -> dict[str, Any]:
    role = c["role"]
    rd = (role == P_POLL) | (role == P_DRAIN)
    rp, ro, rv, rt = c["p"][rd], c["o"][rd], c["v"][rd], c["t"][rd]
    ack = role == P_ACK
    ap, ao, av, at = c["p"][ack], c["o"][ack], c["v"][ack], c["t"][ack]
    loc = ao != NULL
    out: dict[str, Any] = {}
    dn = role == P_DONE
    done_p, done_t = _first_per_group([c["p"][dn]], c["t"][dn])
    out["done"] = dict(zip(done_p[0].tolist(), done_t.tolist()))

    # Slots: every (p, o) read or acked, numbered in (p, o) order.
    pair_p, pair_o = np.concatenate([rp, ap[loc]]), np.concatenate([ro, ao[loc]])
    order = lexsort((pair_o, pair_p))
    new = _starts(pair_p[order], pair_o[order])
    slot = np.empty(len(order), np.int64)
    slot[order] = np.cumsum(new) - 1
    n_slots = int(new.sum())
    slot_p, slot_o = pair_p[order][new], pair_o[order][new]
    read_slot, ack_slot = slot[:len(rp)], slot[len(rp):]

    # Distinct (slot, value) read, each with its first read time; per slot in order of that time.
    (ds, dv), dt = _first_per_group([read_slot, rv], rt)
    per_slot = np.bincount(ds, minlength=n_slots)
    by_time = lexsort((dv, dt, ds))
    ts_slot, ts_v, ts_t = ds[by_time], dv[by_time], dt[by_time]
    head = _starts(ts_slot)
    first_v = np.full(n_slots, NULL)
    first_t = np.full(n_slots, NULL)
    second_v = np.full(n_slots, NULL)
    second_t = np.full(n_slots, NULL)
    first_v[ts_slot[head]], first_t[ts_slot[head]] = ts_v[head], ts_t[head]
    nxt = np.flatnonzero(head[:-1] & ~head[1:]) + 1 if len(head) > 1 else np.zeros(0, np.int64)
    second_v[ts_slot[nxt]], second_t[ts_slot[nxt]] = ts_v[nxt], ts_t[nxt]
    low = np.full(n_slots, NULL)
    high = np.full(n_slots, NULL)
    g = _starts(ds)
    end = np.append(g[1:], True) if len(g) else g
    low[ds[g]], high[ds[end]] = dv[g], dv[end]

    bad = np.flatnonzero(per_slot >= 2)
    out["inconsistent_offset"] = _capped(list(zip(slot_p[bad].tolist(), slot_o[bad].tolist())),
                                         np.full(len(bad), NULL), second_t[bad], limit)
    out["top"] = {}
    if len(rp):
        parts, inv = np.unique(rp, return_inverse=True)
        tops = np.full(len(parts), NULL)
        np.maximum.at(tops, inv.reshape(-1), ro)
        out["top"] = dict(zip(parts.tolist(), tops.tolist()))

    # acked_offset_mismatch: a read at an acked value's (p, o) returned another value.
    lv, ls = av[loc], ack_slot
    mism = (per_slot[ls] > 0) & ((low[ls] != lv) | (high[ls] != lv))
    other_t = np.where(first_v[ls] != lv, first_t[ls], second_t[ls])
    (mv, mp, mo), m_exp = _first_per_group([lv[mism], slot_p[ls[mism]], slot_o[ls[mism]]], other_t[mism])
    pick = _starts(mv)
    (ack_v,), ack_t = _first_per_group([av], at)
    ack_first = dict(zip(ack_v.tolist(), ack_t.tolist()))
    out["acked_offset_mismatch"] = [(int(v), int(p), int(o), ack_first.get(int(v)), _opt(e))
                                    for v, p, o, e in zip(mv[pick], mp[pick], mo[pick], m_exp[pick])]

    out["poll_skip"], out["nonmonotonic_poll"] = _polls(c, role, read_slot[role[rd] == P_POLL], limit)
    out["nonmonotonic_send"] = _sends(c, ack, loc)

    # Read-bound candidates: acked below a read offset of p, value not read in this task.
    cand = np.zeros(len(lv), bool)
    if len(rp) and len(lv):
        top = _lookup(out["top"], ap[loc])
        cand = (top != NULL) & (ao[loc] < top) & ~isin(lv, rv)
    out["read_bound"] = _above(rp, ro, rt, ap[loc][cand], ao[loc][cand], lv[cand])
    out["committed_unconsumed"], out["double_consumed"] = _group(c, role, limit)
    return out


def _group(c: dict[str, np.ndarray], role: np.ndarray, limit: int) -> tuple[Any, Any]:
    """(committed_unconsumed, double_consumed), keyed (p, o): offsets below the group's committed offset that
    the final read returned and no group member's poll did; offsets polls of one generation returned twice."""
    member = (role == P_POLL) & (c["gen"] != NULL)
    mg, mp, mo, mt = c["gen"][member], c["p"][member], c["o"][member], c["t"][member]
    order = lexsort((mt, mo, mp, mg))
    mg, mp, mo, mt = mg[order], mp[order], mo[order], mt[order]
    again = np.flatnonzero(~_starts(mg, mp, mo))
    (dp, do), dt = _first_per_group([mp[again], mo[again]], mt[again])
    double = _capped(list(zip(dp.tolist(), do.tolist())), np.full(len(dp), NULL), dt, limit)
    cm = role == P_COMMITTED
    committed: dict[int, int] = {}
    for p, o, _ in sorted(zip(c["p"][cm].tolist(), c["o"][cm].tolist(), c["seq"][cm].tolist()), key=lambda x: x[2]):
        committed[p] = o  # the last committed op of a partition counts
    dr = role == P_DRAIN
    drp, dro = c["p"][dr], c["o"][dr]
    limit_o = _lookup(committed, drp)
    below = (limit_o != NULL) & (dro < limit_o)
    (up, uo), _ = _first_per_group([drp[below], dro[below]], np.zeros(int(below.sum()), np.int64))
    if len(up) and len(mp):
        (cp, co), _ = _first_per_group([mp, mo], mt)
        cand = np.zeros(len(up), np.int64)  # (p, o) among the consumed pairs: a joint sort
        keys = np.concatenate([np.stack([cp, co], 1), np.stack([up, uo], 1)])
        tag = np.concatenate([np.zeros(len(cp), np.int64), np.ones(len(up), np.int64)])
        idx = np.concatenate([np.zeros(len(cp), np.int64), np.arange(len(up))])
        order = lexsort((tag, keys[:, 1], keys[:, 0]))
        k, tg, ix = keys[order], tag[order], idx[order]
        hit = (tg[1:] == 1) & (tg[:-1] == 0) & (k[1:, 0] == k[:-1, 0]) & (k[1:, 1] == k[:-1, 1])
        cand[ix[1:][hit]] = 1
        keep = cand == 0
        up, uo = up[keep], uo[keep]
    unconsumed = _capped(list(zip(up.tolist(), uo.tolist())), np.full(len(up), NULL), np.full(len(up), NULL), limit)
    return unconsumed, double


def _polls(c: dict[str, np.ndarray], role: np.ndarray, slots: np.ndarray, limit: int) -> tuple[Any, Any]:
    """(poll_skip, nonmonotonic_poll): consecutive records of a stream's partition, in history order."""
    pl = role == P_POLL
    proc, stream, p, o, seq, t = (c[k][pl] for k in ("proc", "stream", "p", "o", "seq", "t"))
    order = lexsort((seq, p, stream, proc))
    proc, stream, p, o, t, s = proc[order], stream[order], p[order], o[order], t[order], slots[order]
    same = ~_starts(proc, stream, p)[1:]
    a, b = o[:-1], o[1:]
    res = []
    for mask in (same & (b > a) & (s[1:] - s[:-1] > 1), same & (b <= a)):
        at = np.flatnonzero(mask)
        (kp, kq, ka, kb), kt = _first_per_group([proc[at], p[at], a[at], b[at]], t[at + 1])
        keys = list(zip(kp.tolist(), kq.tolist(), ka.tolist(), kb.tolist()))
        res.append(_capped(keys, np.full(len(keys), NULL), kt, limit))
    return res[0], res[1]


def _sends(c: dict[str, np.ndarray], ack: np.ndarray, loc: np.ndarray) -> list[tuple[int, int]]:
    """(value, ack time) of every nonmonotonic send: acked at or below the offset of an earlier-invoked
    send of the same producer instance to the same partition."""
    prod, proc, p, o, v, t, seq = (c[k][ack][loc] for k in ("prod", "proc", "p", "o", "v", "t", "seq"))
    has = (prod != NULL).astype(np.int64)
    who = np.where(has == 1, prod, proc)
    order = lexsort((seq, p, who, has))
    o, v, t = o[order], v[order], t[order]
    bounds = np.flatnonzero(_starts(has[order], who[order], p[order]))
    flagged = np.zeros(len(o), bool)
    for lo, hi in zip(bounds, np.append(bounds[1:], len(o))):
        if hi - lo < 2:
            continue
        prior = np.maximum.accumulate(o[lo:hi - 1])
        flagged[lo + 1:hi] = o[lo + 1:hi] <= prior
    (fv,), ft = _first_per_group([v[flagged]], t[flagged])
    return list(zip(fv.tolist(), ft.tolist()))


def _above(rp, ro, rt, cp, co, cv) -> list[tuple[int, int, int, int | None]]:
    """(value, p, o, earliest first read of an offset of p above o) for each candidate."""
    if not len(cv):
        return []
    (up, uo), ut = _first_per_group([rp, ro], rt)
    out = []
    for p in unique(cp).tolist():
        sel = up == p
        offs, times = uo[sel], ut[sel]
        suffix = np.minimum.accumulate(times[::-1])[::-1]
        mine = np.flatnonzero(cp == p)
        at = np.searchsorted(offs, co[mine], side="right")
        for i, k in zip(mine.tolist(), at.tolist()):
            out.append((int(cv[i]), int(p), int(co[i]), int(suffix[k]) if k < len(offs) else None))
    return out


def value_task(files: list[tuple[int, str]], facts: dict[int, dict[str, dict[int, int]]],
               limit: int) -> dict[int, dict[str, Any]]:
    """The value kinds of each run in `files` (whole values). `facts[run]` holds "top" (p -> highest
    read offset) and "done" (p -> when its final read completed) over every partition."""
    return {run: _values(c, facts.get(run, {}), limit) for run, c in _load(files).items()}


def _values(c: dict[str, np.ndarray], facts: dict[str, dict[int, int]], limit: int) -> dict[str, Any]:
    role, v, p, o, t = c["role"], c["v"], c["p"], c["o"], c["t"]
    top, done = facts.get("top", {}), facts.get("done", {})
    rd = (role == V_POLL) | (role == V_DRAIN)
    ok = role == V_OK
    invoked = unique(v[role == V_INVOKE])
    failed = unique(v[role == V_FAIL])
    (acked,), at = _first_per_group([v[ok]], t[ok])
    (read,), rt = _first_per_group([v[rd]], t[rd])
    drained = unique(v[role == V_DRAIN])
    ap, ao, av = p[ok], o[ok], v[ok]
    has_p = ap != NULL
    done_t = _lookup(done, ap)
    is_done = has_p & (done_t != NULL)
    (dv,), dvt = _first_per_group([av[is_done]], done_t[is_done])
    ack_done = dv
    tops = _lookup(top, ap)
    beyond = has_p & (ao != NULL) & (tops != NULL) & (ao < tops)
    read_bound = setdiff(unique(av[beyond]), read)
    lost = union(setdiff(ack_done, drained), read_bound)
    unseen = setdiff(setdiff(acked, read), union(ack_done, read_bound))
    # Duplicates: read at two or more distinct (p, o); exposed by the first read at the second one.
    (lv, _, _), lt = _first_per_group([v[rd], p[rd], o[rd]], t[rd])
    order = lexsort((lt, lv))
    lv, lt = lv[order], lt[order]
    head = _starts(lv)
    second = np.flatnonzero(head[:-1] & ~head[1:]) + 1 if len(lv) > 1 else np.zeros(0, np.int64)
    dup, dup_t = lv[second], lt[second]

    def times(keys: np.ndarray, ref: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """vals[i] where ref[i] == key (ref sorted, distinct), NULL where the key is not in ref."""
        if not len(ref):
            return np.full(len(keys), NULL)
        i = np.minimum(np.searchsorted(ref, keys), len(ref) - 1)
        return np.where(ref[i] == keys, vals[i], NULL)

    out: dict[str, Any] = {"values_read": len(read)}
    out["acked"] = _capped(acked, at, at, 10)
    out["unseen"] = _capped(unseen, times(unseen, acked, at), np.full(len(unseen), NULL), limit)
    out["duplicate"] = _capped(dup, times(dup, acked, at), dup_t, limit)
    unexpected = setdiff(read, invoked)
    out["unexpected"] = _capped(unexpected, times(unexpected, acked, at), times(unexpected, read, rt), limit)
    visible = np.intersect1d(failed, read, assume_unique=True)
    out["failed_visible"] = _capped(visible, times(visible, acked, at), times(visible, read, rt), limit)
    # Lost: exposure is finished by the driver (the first read above, for read-bound ones).
    n = min(len(lost), limit)
    rb = isin(lost[:n], read_bound)
    lt_done = times(lost[:n], ack_done, dvt)
    lt_at = times(lost[:n], acked, at)
    out["lost"] = (len(lost), [(int(x), _opt(a), _opt(d), bool(b))
                               for x, a, d, b in zip(lost[:n].tolist(), lt_at, lt_done, rb)])
    return out
