"""The reference checker: the executable definition of every anomaly in docs/checkers.md.

Single process, no Spark: one streaming pass over the history keeps compact
columns (`reference_scan.scan`), then a handful of numpy sorts find
every anomaly. Everything is O(n log n) in the number of records, so it is
also the speed baseline for the Spark checker.

Keys: (partition, offset) pairs become dense *slots*, numbered in
(partition, offset) order over every pair some read returned or some ack
named. Two consecutive reads of one consumer at offsets a < b of a partition
then jump past an offset known to exist exactly when their slots differ by
more than one.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from kchaos.checkers.queue.reference_scan import INT64_MIN, Columns, scan
from kchaos.checkers.sets import unique
from kchaos.core.promise import Promise

MAX_EXAMPLES = 10
COUNTS = ("acked", "lost", "unseen", "acked_offset_mismatch", "duplicate",
          "inconsistent_offset", "unexpected", "failed_visible",
          "poll_skip", "nonmonotonic_poll", "nonmonotonic_send", "committed_unconsumed", "double_consumed")
# Kinds that make `valid` false whatever the configuration.
INVALID = ("lost", "acked_offset_mismatch", "inconsistent_offset", "unexpected",
           "poll_skip", "nonmonotonic_poll")
# Kinds that make `valid` false only with producer idempotence on.
INVALID_IF_IDEMPOTENT = ("duplicate", "nonmonotonic_send")
Key = Any  # int (a value), (p, o), or (process, p, from_offset, to_offset)


def check_reference(ops: Iterable[dict[str, Any]], test: dict[str, Any] | None, *,
                    max_examples: int | None = MAX_EXAMPLES) -> dict[str, Any]:
    """Check `ops` (history records in history order) per docs/checkers.md.

    Returns `{"valid", "counts", "examples", "loss", "stats"}`: `counts` has
    every kind in COUNTS; `examples` the `max_examples` smallest keys (all
    keys if None) of every non-zero kind, tuple keys as lists; `loss` is
    `{"acks", "promised", "expected_by_configuration"}`; `stats` the Spark
    checker's stats except `unparsed_lines`.
    """
    settings = Promise.of(test)
    cols = scan(ops)
    found = anomalies(cols)
    counts = {k: len(found[k]) for k in COUNTS}
    stats = {**cols.counters, "values_read": len(unique(cols.reads[:, 2])),
             "partitions_complete": sorted(cols.complete),
             "partitions_incomplete": sorted((cols.partitions | _topic_partitions(test))
                                             - cols.complete)}
    malformed = cols.counters["malformed_client_ops"] + cols.counters["malformed_records"]
    promised = settings.no_loss
    return {
        "valid": verdict(counts, settings.idempotence, malformed),
        "counts": counts,
        "examples": {k: [list(x) if isinstance(x, tuple) else x for x in found[k][:max_examples]]
                     for k in COUNTS if counts[k]},
        "loss": {"acks": settings.acks, "promised": promised,
                 "expected_by_configuration": bool(counts["lost"]) and not promised},
        "stats": stats,
    }


def verdict(counts: dict[str, int], idempotent: bool, malformed: int = 0) -> bool | str:
    """False, "unknown" or True for these counts.

    False if an INVALID kind was found, or an INVALID_IF_IDEMPOTENT kind with
    idempotence on; else "unknown" if some acked value is unseen or some client
    op or record was malformed; else True. Loss is invalid whatever acks
    promised: `loss` in the result says whether it broke a promise.
    """
    if any(counts[k] for k in INVALID) or (idempotent and any(counts[k] for k in INVALID_IF_IDEMPOTENT)):
        return False
    if counts["unseen"] or malformed:
        return "unknown"
    return True


def _topic_partitions(test: dict[str, Any] | None) -> frozenset[int]:
    n = ((test or {}).get("topic") or {}).get("partitions")
    return frozenset(range(n)) if type(n) is int else frozenset()


def _starts(*sorted_cols: np.ndarray) -> np.ndarray:
    """Mask of the rows where any of the (jointly sorted) columns differs from the row before."""
    n = len(sorted_cols[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for c in sorted_cols:
            new[1:] |= c[1:] != c[:-1]
    return new


def _ends(starts: np.ndarray) -> np.ndarray:
    """Mask of the last row of each group, given the mask of the first rows."""
    return np.append(starts[1:], True) if len(starts) else starts


def anomalies(cols: Columns) -> dict[str, list[Key]]:
    """kind -> every key of that kind, smallest first, for every kind in COUNTS."""
    reads = cols.reads
    rp, ro, rv = reads[:, 0], reads[:, 1], reads[:, 2]
    n_reads = len(reads)
    located = cols.ack_has_partition & cols.ack_has_offset
    av, ap, ao = cols.ack_value, cols.ack_partition, cols.ack_offset

    # Slots: every (partition, offset) read or acked, numbered in (p, o) order.
    pair_p = np.concatenate([rp, ap[located]])
    pair_o = np.concatenate([ro, ao[located]])
    order = np.lexsort((pair_o, pair_p))
    new = _starts(pair_p[order], pair_o[order])
    slot = np.empty(len(order), dtype=np.int64)
    slot[order] = np.cumsum(new) - 1
    slot_p, slot_o = pair_p[order][new], pair_o[order][new]
    read_slot, ack_slot = slot[:n_reads], slot[n_reads:]
    n_slots = len(slot_p)
    part_of_slot = np.cumsum(_starts(slot_p)) - 1

    # Distinct (slot, value) read, sorted: per slot its distinct values, smallest first.
    order = np.lexsort((rv, read_slot))
    s_sorted, v_sorted = read_slot[order], rv[order]
    first = _starts(s_sorted, v_sorted)
    t_slot, t_value = s_sorted[first], v_sorted[first]
    values_per_slot = np.bincount(t_slot, minlength=n_slots)
    group = _starts(t_slot)
    low = np.zeros(n_slots, dtype=np.int64)
    high = np.zeros(n_slots, dtype=np.int64)
    low[t_slot[group]] = t_value[group]
    high[t_slot[_ends(group)]] = t_value[_ends(group)]

    # The highest read slot of each partition (-1: nothing read there).
    read_slots = np.flatnonzero(values_per_slot)
    tops = read_slots[_ends(_starts(part_of_slot[read_slots]))]
    top = np.full(n_slots, -1, dtype=np.int64)  # indexed by partition number < n_slots
    top[part_of_slot[tops]] = tops

    read_values = unique(t_value)
    drained = unique(rv[cols.polled:])
    acked = unique(av)
    not_read = ~np.isin(av, read_values)
    loc_v = av[located]
    # Read bound: a higher offset of the partition was read, the value never was.
    beyond = ack_slot < top[part_of_slot[ack_slot]]
    read_bound = unique(loc_v[beyond & not_read[located]])
    done = cols.ack_has_partition & np.isin(ap, np.fromiter(cols.complete, dtype=np.int64))
    ack_done = unique(av[done])
    mismatch = values_per_slot[ack_slot] > 0
    mismatch &= (low[ack_slot] != loc_v) | (high[ack_slot] != loc_v)
    by_value = np.sort(t_value)
    duplicates = unique(by_value[1:][by_value[1:] == by_value[:-1]])

    skips, backs = _poll_anomalies(cols, read_slot)
    pairs = np.flatnonzero(values_per_slot >= 2)
    return {
        "acked": acked.tolist(),
        "lost": unique(np.concatenate([np.setdiff1d(ack_done, drained, assume_unique=True),
                                        read_bound])).tolist(),
        "unseen": np.setdiff1d(unique(av[not_read]), unique(np.concatenate([ack_done, read_bound])),
                               assume_unique=True).tolist(),
        "acked_offset_mismatch": unique(loc_v[mismatch]).tolist(),
        "duplicate": duplicates.tolist(),
        "inconsistent_offset": list(zip(slot_p[pairs].tolist(), slot_o[pairs].tolist())),
        "unexpected": np.setdiff1d(read_values, unique(cols.invoked), assume_unique=True).tolist(),
        "failed_visible": np.intersect1d(unique(cols.failed), read_values,
                                         assume_unique=True).tolist(),
        "poll_skip": skips,
        "nonmonotonic_poll": backs,
        "nonmonotonic_send": unique(cols.nonmonotonic_send).tolist(),
        **_group_anomalies(cols),
    }


def _group_anomalies(cols: Columns) -> dict[str, list[Key]]:
    """committed_unconsumed and double_consumed keys, (p, o) each, sorted.

    committed_unconsumed: an offset of p below the group's committed offset
    of p that the final read returned and no poll of a group member (a poll
    with a generation) did. double_consumed: an offset that polls of one
    generation returned twice or more, to one member or several.
    """
    polled = cols.reads[:cols.polled]
    member = cols.poll_generation != INT64_MIN
    mp, mo, mg = polled[member, 0], polled[member, 1], cols.poll_generation[member]
    order = np.lexsort((mo, mp, mg))
    mp, mo, mg = mp[order], mo[order], mg[order]
    twice = np.flatnonzero(~_starts(mg, mp, mo))
    double = sorted(set(zip(mp[twice].tolist(), mo[twice].tolist())))
    drained = cols.reads[cols.polled:]
    below = np.zeros(len(drained), dtype=bool)
    for p, c in cols.committed.items():
        below |= (drained[:, 0] == p) & (drained[:, 1] < c)
    consumed = set(zip(mp.tolist(), mo.tolist()))
    unconsumed = sorted({(p, o) for p, o in zip(drained[below, 0].tolist(), drained[below, 1].tolist())
                         if (p, o) not in consumed})
    return {"committed_unconsumed": unconsumed, "double_consumed": double}


def _poll_anomalies(cols: Columns, read_slot: np.ndarray) -> tuple[list[Key], list[Key]]:
    """(poll_skip keys, nonmonotonic_poll keys), each (process, p, from_offset, to_offset), sorted.

    Within one stream (a consumer process between resets) the records of each
    partition, in the order they were returned, must go up one offset at a
    time, except past offsets nothing shows to exist.
    """
    n = cols.polled
    sid, p, o = cols.poll_stream, cols.reads[:n, 0], cols.reads[:n, 1]
    order = np.lexsort((p, sid))  # stable: history order within each (stream, partition)
    sid, p, o, s = sid[order], p[order], o[order], read_slot[:n][order]
    same = ~_starts(sid, p)[1:]
    a, b = o[:-1], o[1:]
    back = same & (b <= a)
    skip = same & (b > a) & (s[1:] - s[:-1] > 1)

    def keys(mask: np.ndarray) -> list[Key]:
        at = np.flatnonzero(mask)
        procs = [cols.stream_process[i] for i in sid[at].tolist()]
        return sorted(set(zip(procs, p[at].tolist(), a[at].tolist(), b[at].tolist())))

    return keys(skip), keys(back)
