"""What a queue run's consumers read, and the two series Jepsen's Kafka workload plots from it: acknowledged
writes not yet read by anyone (unseen), and each consumer's realtime lag.

`read_reads(table)` flattens the records of every ok poll and drain of the history's Parquet form into one row
per record read. `unseen_series` and `lag_series` are pure functions of those rows, the acknowledged sends and the
consumers' assignments:

- unseen at time t: the values acknowledged by t that no poll or drain had returned by t (a value read before its
  acknowledgement counts as seen from the acknowledgement on). At the end of a run it is what the final read did
  not find: the lost and unseen writes.
- a consumer's realtime lag at one of its polls, completed at time t: over the partitions assigned to it then,
  the age at t of the oldest write acknowledged by t on one of them that it had not read past before this poll
  (its offset above the highest the consumer had read there); 0 when it had read everything acknowledged. It
  is how far behind the poll found the consumer. A partition newly assigned starts
  from the highest offset any consumer had read there, as a group member starts from the group's position.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kchaos.reports.run.txn_data import Rebalance

__all__ = ["MAX_POINTS", "Reads", "lag_series", "read_reads", "unseen_series"]

MAX_POINTS = 2_000  # points per series: a plot is 1,000-odd pixels wide


@dataclass(frozen=True)
class Reads:
    """One row per record an ok poll or drain returned, in history order: when (seconds), by which process,
    whether a poll (True) or the final read's drain (False), and the record's partition, offset and value."""

    time_s: np.ndarray
    process: np.ndarray
    poll: np.ndarray
    partition: np.ndarray
    offset: np.ndarray
    value: np.ndarray
    polls: pd.DataFrame  # every ok poll, records or not: time_s, process

    @classmethod
    def empty(cls) -> Reads:
        """No reads at all."""
        i = np.zeros(0, np.int64)
        return cls(np.zeros(0), np.zeros(0, object), np.zeros(0, bool), i, i, i,
                   pd.DataFrame({"time_s": np.zeros(0), "process": np.zeros(0, object)}))


def read_reads(t: pa.Table) -> Reads:
    """The records of the ok polls and drains of `t` (the history's Parquet form, with its `records` column);
    records that are not three integers are left out (the checker counts them as malformed)."""
    ok = pc.and_(pc.equal(t["type"], "ok"), pc.is_in(t["f"], value_set=pa.array(["poll", "drain"])))
    rows = t.filter(pc.fill_null(ok, False))
    polls = rows.filter(pc.equal(rows["f"], "poll"))
    poll_frame = pd.DataFrame({"time_s": polls["time"].to_numpy(zero_copy_only=False) / 1e9,
                               "process": polls["process"].to_numpy(zero_copy_only=False).astype(object)})
    records = rows["records"].combine_chunks()
    if not len(records):
        return replace(Reads.empty(), polls=poll_frame)
    inner = pc.list_flatten(records)
    owner = pc.list_parent_indices(records).to_numpy()
    whole = (pc.list_value_length(inner).to_numpy(zero_copy_only=False) == 3) & \
        inner.is_valid().to_numpy(zero_copy_only=False)
    ints = pc.list_flatten(inner.filter(pa.array(whole)))
    keep = ints.is_valid().to_numpy(zero_copy_only=False).reshape(-1, 3).all(axis=1)
    triples = ints.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64).reshape(-1, 3)[keep]
    owner = owner[whole][keep]
    time = rows["time"].to_numpy(zero_copy_only=False)[owner] / 1e9
    process = rows["process"].to_numpy(zero_copy_only=False).astype(object)[owner]
    poll = (rows["f"].to_numpy(zero_copy_only=False) == "poll")[owner]
    return Reads(time, process, poll, triples[:, 0], triples[:, 1], triples[:, 2], poll_frame)


def _grid(lo: float, hi: float) -> np.ndarray:
    return np.linspace(lo, hi, MAX_POINTS) if hi > lo else np.array([lo])


def unseen_series(ack_value: np.ndarray, ack_s: np.ndarray, reads: Reads) -> tuple[np.ndarray, np.ndarray]:
    """(times, unseen at each): MAX_POINTS times from the first acknowledgement to the last read or
    acknowledgement (see the module doc)."""
    if not len(ack_s):
        return np.zeros(0), np.zeros(0, np.int64)
    first_read = pd.Series(reads.time_s).groupby(reads.value).min() if len(reads.time_s) else pd.Series(dtype=float)
    acked = pd.DataFrame({"value": ack_value, "ack": ack_s}).groupby("value")["ack"].min()
    read_at = first_read.reindex(acked.index).to_numpy()
    seen = np.sort(np.maximum(acked.to_numpy(), read_at)[~np.isnan(read_at)])
    acks = np.sort(acked.to_numpy())
    end = max(float(acks[-1]), float(reads.time_s.max()) if len(reads.time_s) else 0.0)
    times = _grid(float(acks[0]), end)
    return times, np.searchsorted(acks, times, "right") - np.searchsorted(seen, times, "right")


def lag_series(ack_partition: np.ndarray, ack_offset: np.ndarray, ack_s: np.ndarray, reads: Reads,
               assignments: Sequence[Rebalance], partitions: Sequence[int]) -> dict[Any, tuple[np.ndarray, np.ndarray]]:
    """Per consumer process: (poll times, realtime lag in seconds at each), at most MAX_POINTS polls each: of more,
    the one with the largest lag in each of MAX_POINTS spans (see the module doc). A consumer with no assignment
    recorded is taken to read every partition of `partitions`."""
    by_part: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for p in np.unique(ack_partition):
        sel = ack_partition == p
        order = np.argsort(ack_offset[sel], kind="stable")
        offs, ack = ack_offset[sel][order], ack_s[sel][order]
        by_part[int(p)] = (offs, np.minimum.accumulate(ack[::-1])[::-1])  # the oldest ack at or above each offset

    polled = reads.poll
    highest = (pd.DataFrame({"time_s": reads.time_s[polled], "process": reads.process[polled],
                             "partition": reads.partition[polled], "offset": reads.offset[polled]})
               .groupby(["time_s", "process", "partition"], sort=False)["offset"].max())
    read_in = defaultdict(list)
    for (t, proc, p), off in highest.items():
        read_in[(t, proc)].append((int(p), int(off)))
    moves = sorted(assignments, key=lambda m: m.time_s)
    everyone: dict[int, int] = {}  # partition -> highest offset any consumer has read
    mine: dict[Any, dict[int, int]] = {}  # process -> partition -> highest offset it has read
    assigned: dict[Any, set[int]] = {}
    out: dict[Any, tuple[list[float], list[float]]] = {}
    m = 0
    for t, proc in reads.polls.sort_values("time_s", kind="stable").itertuples(index=False):
        while m < len(moves) and moves[m].time_s <= t:
            mv = moves[m]
            now = assigned.setdefault(mv.process, set())
            for p in mv.assigned:
                now.add(p)
                mine.setdefault(mv.process, {})[p] = everyone.get(p, -1)
            now.difference_update(mv.revoked)
            m += 1
        hi = mine.setdefault(proc, {})
        lag = 0.0  # what the poll found the consumer behind by: before its records are counted
        for p in assigned.get(proc, partitions):
            if p not in by_part:
                continue
            offs, oldest = by_part[p]
            i = int(np.searchsorted(offs, hi.get(p, -1), "right"))
            if i < len(offs) and oldest[i] <= t:
                lag = max(lag, t - float(oldest[i]))
        for p, off in read_in.get((t, proc), ()):
            hi[p] = max(hi.get(p, -1), off)
            everyone[p] = max(everyone.get(p, -1), off)
        ts, lags = out.setdefault(proc, ([], []))
        ts.append(t)
        lags.append(lag)
    series = {}
    for proc, (ts, lags) in out.items():
        if len(ts) > MAX_POINTS:  # the largest lag of each of MAX_POINTS spans of polls: no spike is left out
            top = pd.Series(lags).groupby(np.arange(len(ts)) * MAX_POINTS // len(ts)).idxmax().to_numpy()
            ts, lags = [ts[i] for i in top], [lags[i] for i in top]
        series[proc] = (np.asarray(ts), np.asarray(lags))
    return series
