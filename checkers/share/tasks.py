"""The Spark share checker's tasks: the reference's own steps (`collect`, `judge_record`), run on pieces of the
history that need nothing from each other.

1. `route_task`, one per stretch of history.jsonl: each line goes, unparsed, to the file of its process's bucket.
2. `collect_task`, one per process bucket: its lines, in history order, through the reference's `collect` (a
   process's invocations pair with its own completions only); its records go to files by record bucket, and it
   returns what is small (leaves, the final state, the per-second tallies) with its acknowledged sends.
3. `judge_task`, one per record bucket: each record's deliveries and acknowledgements, from every process, through
   the reference's `judge_record`, with every process's leaves.

Files live in the checker's work directory; tasks exchange nothing else.
"""
from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson

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
    collect,
    judge_record,
    new_second,
)

__all__ = ["collect_task", "judge_task", "route_task"]

_PROCESS = re.compile(rb'"process":\s*("[^"]*"|-?\d+)')


def _bucket(key: bytes | int, buckets: int) -> int:
    return (int(key) if isinstance(key, int) or key.lstrip(b"-").isdigit() else sum(key)) % buckets


def route_task(job: tuple[str, int, int, int, str, int]) -> int:
    """Copy the lines of bytes [a, b) of the history into `work/r<r>.b<k>` by their process's bucket k (a line
    without a process, or cut off, goes to bucket 0); the lines routed."""
    path, r, a, b, work, buckets = job
    with open(path, "rb") as fh:
        fh.seek(a)
        data = fh.read(b - a)
    out: list[list[bytes]] = [[] for _ in range(buckets)]
    lines = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        m = _PROCESS.search(line)
        out[_bucket(m.group(1), buckets) if m else 0].append(line)
        lines += 1
    for k, got in enumerate(out):
        Path(work, f"r{r:04d}.b{k}").write_bytes(b"\n".join(got))
    return lines


def _ops(files: list[str]) -> list[dict[str, Any]]:
    ops = []
    for f in files:
        for line in Path(f).read_bytes().split(b"\n"):
            if line:
                try:
                    op = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # the cut-off last line of a killed run, as the reference's reader skips it
                if isinstance(op, dict):
                    ops.append(op)
    return ops


def collect_task(job: tuple[list[str], str, int, int]) -> dict[str, Any]:
    """`collect` over one process bucket's lines (`files`, in stretch order); writes its records to
    `work/c<k>.j<j>.pkl` by record bucket j and returns `left`, `state`, `seconds` and its acknowledged sends as
    arrays (`acked`: value, partition, offset, -1 when unknown)."""
    files, work, k, record_buckets = job
    c = collect(_ops(files))
    # Plain tuples: the reference's classes travel by value to the workers, so pickle cannot name them.
    parts: list[dict[tuple[int, int], tuple[list[tuple], list[tuple]]]] = [{} for _ in range(record_buckets)]
    for (p, o), rec in c.records.items():
        parts[hash((p, o)) % record_buckets][(p, o)] = ([tuple(vars(d).values()) for d in rec.deliveries],
                                                         [tuple(vars(a).values()) for a in rec.acks])
    for j, part in enumerate(parts):
        Path(work, f"c{k:04d}.j{j}.pkl").write_bytes(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
    acked = np.array([(v, p, -1 if o is None else o) for v, (p, o) in c.acked.items()], np.int64).reshape(-1, 3)
    return {"left": dict(c.left), "state": c.state, "seconds": c.seconds, "acked": acked}


def judge_task(job: tuple[list[str], dict[Any, list[tuple[int, bool]]], int, int]) -> dict[str, Any]:
    """`judge_record` over one record bucket (its files from every process bucket): per kind the count, the
    smallest MAX_EXAMPLES examples and the earliest MAX_MARKS completion times; redeliveries by cause, their
    per-second tallies, and the values delivered."""
    files, left, limit, lock_ns = job
    records: dict[tuple[int, int], Record] = {}
    for f in files:
        for key, (deliveries, acks) in pickle.loads(Path(f).read_bytes()).items():
            mine = records.setdefault(key, Record())
            mine.deliveries += [Delivery(*d) for d in deliveries]
            mine.acks += [Ack(*a) for a in acks]
    found: dict[str, list[list[int]]] = {k: [] for k in SHARE_KINDS}
    marks: dict[str, list[int]] = {k: [] for k in SHARE_KINDS}
    causes = dict.fromkeys(CAUSES, 0)
    seconds: dict[int, dict[str, Any]] = {}
    for (p, o), rec in records.items():
        anomalies, redelivered = judge_record(p, o, rec, left, limit, lock_ns)
        for kind, where, ns in anomalies:
            found[kind].append(where)
            marks[kind].append(ns)
        for cause, ns in redelivered:
            causes[cause] += 1
            seconds.setdefault(ns // NS_PER_S, new_second())["redelivered"][cause] += 1
    delivered = np.unique(np.array([d.value for rec in records.values() for d in rec.deliveries], np.int64))
    return {"found": {k: (len(v), sorted(v)[:MAX_EXAMPLES]) for k, v in found.items()},
            "marks": {k: sorted(v)[:MAX_MARKS] for k, v in marks.items()}, "causes": causes, "seconds": seconds,
            "delivered": delivered}


def merge_seconds(parts: list[dict[int, dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """The per-second tallies of several tasks added up."""
    out: dict[int, dict[str, Any]] = {}
    for part in parts:
        add_seconds(out, part)
    return out
