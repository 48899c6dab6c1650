"""The Spark share checker's tasks: the reference's own steps (`collect`, `judge_record`), run on pieces of the
history that need nothing from each other.

1. `route_task`, one per stretch of history.jsonl: each line goes, unparsed, to the file of its process's bucket,
   but the sends': it returns the acknowledged ones (value, partition, offset) and drops the invocations.
2. `collect_task`, one per process bucket: its lines, in history order, through the reference's `collect` done on
   arrays (`kchaos.checkers.share.arrays`: a process's invocations pair with its own completions only); its
   records go to files by record bucket, and it returns what is small (leaves, the final state, the per-second
   tallies) with its acknowledged sends.
3. `judge_task`, one per record bucket: each record's deliveries and acknowledgements, from every process, through
   the reference's `judge_record`, with every process's leaves; and counts its records `accepted_twice`, on the
   arrays.

Files live in the checker's work directory; tasks exchange nothing else.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from kchaos.checkers.sets import isin, union, unique
from kchaos.checkers.share.arrays import ACK_WIDTH, DELIVERY_WIDTH, KEY_BITS, KINDS, OUTCOMES, collect_arrays
from kchaos.checkers.share.reference import (
    CAUSES,
    MAX_EXAMPLES,
    MAX_MARKS,
    NS_PER_S,
    SHARE_KINDS,
    Ack,
    Delivery,
    Record,
    add_seconds,
    judge_record,
    new_second,
)

__all__ = ["collect_task", "judge_task", "route_task"]

# A send's lines: its invocation, which no step reads, and its acknowledgement, of which `collect` keeps only the
# value, partition and offset. Most of a history's lines are these, so they are read here, not parsed as JSON.
_SEND, _INVOKE, _OK = b'"f":"send"', b'"type":"invoke"', b'"type":"ok"'
_PROCESS = re.compile(rb'"process":\s*("[^"]*"|-?\d+)')
_ACKED = re.compile(rb'^\{"index":\d+,"time":\d+,"process":\d+,"type":"ok","f":"send","topic":"[^"]*",'
                    rb'"partition":(\d+),"value":(-?\d+)(?:,"producer":\d+)?,"offset":(\d+|null)\}$')


def route_task(job: tuple[str, int, int, int, str, int]) -> np.ndarray:
    """Copy the lines of bytes [a, b) of the history, unparsed, into `work/r<r>.b<k>` by their process's bucket k
    (a line without a process, or cut off, goes to bucket 0), but the sends': return the acknowledged sends as
    rows (value, partition, offset or -1), in history order. A send's acknowledgement in the exact form kchaos
    writes it is read by a pattern; any other is parsed and, if it is not plainly one, routed like the rest."""
    path, r, a, b, work, buckets = job
    with open(path, "rb") as fh:
        fh.seek(a)
        data = fh.read(b - a)
    out: list[list[bytes]] = [[] for _ in range(buckets)]
    acked: list[tuple[int, int, int]] = []
    search, exact = _PROCESS.search, _ACKED.match
    for line in data.split(b"\n"):
        if not line:
            continue
        if _SEND in line:
            if _INVOKE in line:
                continue
            if _OK in line:
                m = exact(line)
                if m:
                    acked.append((int(m.group(2)), int(m.group(1)), -1 if m.group(3) == b"null" else int(m.group(3))))
                    continue
        m = search(line)
        key = m.group(1) if m else b"0"
        out[(int(key) if key[0] != 34 else sum(key)) % buckets].append(line)
    for k, lines in enumerate(out):
        Path(work, f"r{r:04d}.b{k}").write_bytes(b"\n".join(lines))
    return np.array(acked, np.int64).reshape(-1, 3)


def collect_task(job: tuple[list[str], str, int, int]) -> dict[str, Any]:
    """The reference's `collect` over one process bucket's ops (`files`, in stretch order), as arrays
    (`collect_arrays`); writes its records' deliveries and acknowledgements to `work/c<k>.j<j>.npz` by record bucket
    j (a record's partition and offset hashed) and returns `left`, `state`, `seconds` and its acknowledged sends as
    arrays (`acked`: value, partition, offset or -1)."""
    files, work, k, record_buckets = job
    c = collect_arrays([line for f in files for line in Path(f).read_bytes().split(b"\n")])
    d_bucket, a_bucket = _record_bucket(c.deliveries, record_buckets), _record_bucket(c.acks, record_buckets)
    for j in range(record_buckets):
        np.savez(Path(work, f"c{k:04d}.j{j}.npz"), d=c.deliveries[d_bucket == j], a=c.acks[a_bucket == j])
    return {"left": c.left, "state": c.state, "seconds": c.seconds, "acked": c.acked}


_OTHER = "other"  # a kind or outcome the reference's rules name nowhere, which they treat as any other such string
_ACCEPT_CODE, _OK_CODE = KINDS.index("accept"), OUTCOMES.index("ok")


def _name(code: int, names: tuple[str, ...]) -> str:
    return names[code] if 0 <= code < len(names) else _OTHER


def _record_bucket(rows: np.ndarray, buckets: int) -> np.ndarray:
    key = (rows[:, 0] << KEY_BITS) | rows[:, 1]
    return ((key.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)).astype(np.int64) % buckets


def judge_task(job: tuple[list[str], dict[Any, list[tuple[int, bool]]], int, int]) -> dict[str, Any]:
    """`judge_record` over one record bucket (its files from every process bucket): per kind the count, the
    smallest MAX_EXAMPLES examples and the earliest MAX_MARKS completion times; redeliveries by cause, their
    per-second tallies, the values delivered, the records `accepted_twice` and each member's consume counts
    (`per_member`: rows (member, n, records delivered to it n times)). A record delivered once, none of
    whose acknowledgements completed before that delivery was invoked, can only be over the limit: that is decided
    on the arrays; every other record goes through `judge_record`."""
    files, left, limit, lock_ns = job
    loaded = [np.load(f) for f in files]
    d = np.concatenate([x["d"] for x in loaded]) if loaded else np.zeros((0, DELIVERY_WIDTH), np.int64)
    a = np.concatenate([x["a"] for x in loaded]) if loaded else np.zeros((0, ACK_WIDTH), np.int64)
    d_key, a_key = (d[:, 0] << KEY_BITS) | d[:, 1], (a[:, 0] << KEY_BITS) | a[:, 1]
    keys, first, n = np.unique(d_key, return_index=True, return_counts=True)
    once = keys[n == 1]
    invoked_once = d[first[n == 1], 5]
    at = np.clip(np.searchsorted(once, a_key), 0, max(len(once) - 1, 0))
    early = (len(once) > 0) & (once[at] == a_key) & (a[:, 6] >= 0) & (a[:, 6] < invoked_once[at]) if len(once) \
        else np.zeros(len(a), bool)
    judged = union(keys[n > 1], a_key[early])  # the records judged one by one
    found: dict[str, list[list[int]]] = {k: [] for k in SHARE_KINDS}
    marks: dict[str, list[int]] = {k: [] for k in SHARE_KINDS}
    simple = ~isin(d_key, judged)
    over = d[simple & (d[:, 3] > limit)]
    found["over_delivery_limit"] += [[int(p), int(o), int(v)] for p, o, v in over[:, :3]]
    marks["over_delivery_limit"] += [int(ns) for ns in over[:, 9]]
    causes = dict.fromkeys(CAUSES, 0)
    seconds: dict[int, dict[str, Any]] = {}
    for (p, o), rec in _records(d[~simple], a[isin(a_key, judged)]).items():
        anomalies, redelivered = judge_record(p, o, rec, left, limit, lock_ns)
        for kind, where, ns in anomalies:
            found[kind].append(where)
            marks[kind].append(ns)
        for cause, ns in redelivered:
            causes[cause] += 1
            seconds.setdefault(ns // NS_PER_S, new_second())["redelivered"][cause] += 1
    ok_accepts = a_key[(a[:, 2] == _ACCEPT_CODE) & (a[:, 3] == _OK_CODE)]
    twice = int((np.unique(ok_accepts, return_counts=True)[1] > 1).sum())
    # Per member, how many records it was delivered n times: rows (member, n, records).
    pairs, n = np.unique(np.stack([d[:, 4], d_key], axis=1), axis=0, return_counts=True)
    tallies, records = np.unique(np.stack([pairs[:, 0], n], axis=1), axis=0, return_counts=True)
    per_member = [(int(m), int(k), int(r)) for (m, k), r in zip(tallies.tolist(), records.tolist())]
    return {"found": {k: (len(v), sorted(v)[:MAX_EXAMPLES]) for k, v in found.items()},
            "marks": {k: sorted(v)[:MAX_MARKS] for k, v in marks.items()}, "causes": causes, "seconds": seconds,
            "delivered": unique(d[:, 2]), "accepted_twice": twice, "per_member": per_member}


def _records(d: np.ndarray, a: np.ndarray) -> dict[tuple[int, int], Record]:
    records: dict[tuple[int, int], Record] = {}
    for p, o, v, count, proc, inv, comp, since, since_ns, comp_ns in d.tolist():
        records.setdefault((p, o), Record()).deliveries.append(Delivery(p, o, v, count, proc, inv, comp, since,
                                                                        since_ns, comp_ns))
    for p, o, kind, outcome, proc, inv, comp in a.tolist():
        records.setdefault((p, o), Record()).acks.append(Ack(p, o, _name(kind, KINDS), _name(outcome, OUTCOMES),
                                                             proc, inv, None if comp < 0 else comp))
    return records


def merge_seconds(parts: list[dict[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """The per-second tallies of several tasks added up."""
    out: dict[int, dict[str, Any]] = {}
    for part in parts:
        add_seconds(out, part)
    return out
