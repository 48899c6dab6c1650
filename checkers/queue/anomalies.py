"""The anomaly half of the Spark queue checker: two shuffle-free Spark jobs over the bucket layout.

The converter leaves each history's sends and read records bucketed by Kafka
partition and by value, so every anomaly of
docs/checkers.md can be found by tasks that each see whole partitions or
whole values, and no Spark shuffle is needed:

1. partition job: one task per group of `p<k>` files (`partition_task`): the
   offset and stream kinds, and per partition its highest read offset and when
   its final read completed;
2. value job: one task per group of `v<k>` files (`value_task`), given (1)'s
   per-partition facts: the value kinds.

Files are packed into tasks by size, at least two tasks per core where there
are that many files, so one big run and a suite of many small runs both
spread over every executor. Only counts and at most `limit` anomalies per kind
and task reach the driver (every key for the two value-keyed kinds found per
partition, which the driver dedupes).
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pyarrow.parquet as pq
from pyspark import SparkContext, cloudpickle

from kchaos.checkers import sets
from kchaos.checkers.buckets import bucket_files
from kchaos.checkers.queue import line_tasks
from kchaos.checkers.queue import tasks as check_tasks
from kchaos.checkers.queue.line_tasks import line_task, merge_lines
from kchaos.checkers.queue.tasks import partition_task, value_task

__all__ = ["Found", "VALUES_READ", "VALUE_KINDS", "anomalies"]

# Pseudo-kinds computed in the same pass as the counts, reported under `stats`.
VALUES_READ = "_values_read"
VALUE_KINDS = ("acked", "lost", "unseen", "duplicate", "unexpected", "failed_visible")
_CAPPED_P = ("inconsistent_offset", "poll_skip", "nonmonotonic_poll", "committed_unconsumed", "double_consumed")
TASK_BYTES = 64 << 20  # a task's share of input, at most, when there are more files than cores


@dataclass
class Found:
    """One kind in one run: how many, and the first `limit` (by key) with their times in ns."""

    count: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)  # {"key", "acked_ns", "exposed_ns"}


Result = dict[int, dict[str, Found]]  # run -> kind -> Found


class _ByValue(TypedDict):
    """One run's kinds keyed by value, merged across tasks."""

    acked_offset_mismatch: dict[int, tuple[int, int, int | None, int | None]]  # (p, o, first ack, exposed)
    nonmonotonic_send: dict[int, int]  # the earliest time


# The task functions travel by value: a Python worker then needs only numpy and pyarrow, not
# the checkers package, whose imports (harness, pandas) would cost each worker seconds at start.
for _module in (sets, check_tasks, line_tasks, sys.modules[__name__]):
    cloudpickle.register_pickle_by_value(_module)


def _pack(pieces: list[tuple[int, tuple]], parallelism: int) -> list[list[tuple]]:
    """(size, piece) grouped into tasks: largest first, each to the lightest task."""
    if not pieces:
        return []
    sized = sorted(pieces, key=lambda x: x[0], reverse=True)
    total = sum(s for s, _ in sized)
    n = min(len(sized), max(2 * parallelism, -(-total // TASK_BYTES)))
    tasks: list[list[tuple]] = [[] for _ in range(n)]
    load = [0] * n
    for size, piece in sized:
        i = load.index(min(load))
        tasks[i].append(piece)
        load[i] += size
    return [t for t in tasks if t]


def _files(files: list[tuple[int, Path]]) -> list[tuple[int, tuple]]:
    return [(f.stat().st_size, (run, str(f))) for run, f in files]


def _row_groups(parquets: list[Path]) -> list[tuple[int, tuple]]:
    """(size, (run, path, [row group])) for every row group of every history.parquet."""
    out = []
    for run, path in enumerate(parquets):
        meta = pq.ParquetFile(path).metadata
        out += [(meta.row_group(g).total_byte_size, (run, str(path), [g])) for g in range(meta.num_row_groups)]
    return out


def _first_task(task: tuple[str, list[tuple]], limit: int) -> tuple[str, dict[int, Any]]:
    """A task of the first job: a partition task ("p") or a line task ("l")."""
    kind, pieces = task
    if kind == "p":
        return kind, partition_task(pieces, limit)
    # Row groups of one file go to one read.
    merged: dict[tuple[int, str], list[int]] = {}
    for run, path, groups in pieces:
        merged.setdefault((run, path), []).extend(groups)
    return kind, line_task([(run, path, sorted(g)) for (run, path), g in merged.items()])


def _run_job(sc: SparkContext, tasks: list[Any], fn: Callable, name: str) -> list[Any]:
    if not tasks:
        return []
    sc.setJobDescription(f"kchaos {name}")
    try:
        return sc.parallelize(tasks, len(tasks)).map(fn).collect()
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]  # pyspark types it str; None (Java's null) clears it


def anomalies(sc: SparkContext, parquets: list[Path], limit: int
              ) -> tuple[Result, dict[int, dict[int, int]], dict[int, dict[str, Any]]]:
    """(run -> kind -> Found for every kind with a non-zero count, run -> {partition: when its final
    read completed}, run -> its merged line-task results) for the converted
    histories `parquets` (run i is parquets[i]). Two Spark jobs: partition and line tasks, then
    value tasks."""
    parallelism = sc.defaultParallelism
    p_files, v_files = [], []
    for run, pq_path in enumerate(parquets):
        ps, vs = bucket_files(pq_path)
        p_files += [(run, f) for f in ps]
        v_files += [(run, f) for f in vs]
    facts: dict[int, dict[str, dict[int, int]]] = {run: {"top": {}, "done": {}} for run in range(len(parquets))}
    result: Result = {run: {} for run in range(len(parquets))}
    by_value: dict[int, _ByValue] = {run: {"acked_offset_mismatch": {}, "nonmonotonic_send": {}} for run in facts}
    above: dict[int, dict[int, int | None]] = {run: {} for run in facts}
    first = ([("p", t) for t in _pack(_files(p_files), parallelism)]
             + [("l", t) for t in _pack(_row_groups(parquets), parallelism)])
    line_parts: dict[int, list[dict[str, Any]]] = {run: [] for run in facts}
    for kind, part in _run_job(sc, first, functools.partial(_first_task, limit=limit),
                               "partition kinds and line stats"):
        if kind == "l":
            for run, out in part.items():
                line_parts[run].append(out)
            continue
        for run, out in part.items():
            facts[run]["top"].update(out["top"])
            for p, t in out["done"].items():
                facts[run]["done"][p] = min(t, facts[run]["done"].get(p, t))
            for kind in _CAPPED_P:
                _merge(result[run], kind, *out[kind])
            seen = by_value[run]["acked_offset_mismatch"]
            for v, p, o, acked, exposed in out["acked_offset_mismatch"]:
                old = seen.get(v)
                first_ack = _least(acked, old[2] if old else None)
                seen[v] = ((p, o, first_ack, exposed) if old is None or (p, o) < old[:2]
                           else (*old[:2], first_ack, old[3]))
            sends = by_value[run]["nonmonotonic_send"]
            for v, t in out["nonmonotonic_send"]:
                sends[v] = min(t, sends.get(v, t))
            for v, _, _, t in out["read_bound"]:
                above[run][v] = _least(t, above[run].get(v))
    for run, kinds in by_value.items():
        for v, (_, _, acked, exposed) in sorted(kinds["acked_offset_mismatch"].items()):
            _add(result[run], "acked_offset_mismatch", v, acked, exposed, limit)
        for v, t in sorted(kinds["nonmonotonic_send"].items()):
            _add(result[run], "nonmonotonic_send", v, t, t, limit)
    for part in _run_job(sc, _pack(_files(v_files), parallelism),
                         functools.partial(value_task, facts=facts, limit=limit), "value kinds"):
        for run, out in part.items():
            found = result[run]
            found.setdefault(VALUES_READ, Found()).count += out["values_read"]
            for kind in ("acked", "unseen", "duplicate", "unexpected", "failed_visible"):
                _merge(found, kind, *out[kind])
            count, items = out["lost"]
            lost = [(v, acked, _least(done, above[run].get(v) if rb else None)) for v, acked, done, rb in items]
            _merge(found, "lost", count, lost)
    for found in result.values():
        for kind, f in found.items():
            f.items.sort(key=lambda item: item["key"])
            del f.items[limit if kind != "acked" else 10:]
    done = {run: f["done"] for run, f in facts.items()}
    lines = {run: merge_lines(parts) for run, parts in line_parts.items()}
    return {run: {k: f for k, f in kinds.items() if f.count} for run, kinds in result.items()}, done, lines


def _least(*xs: int | None) -> int | None:
    return min((x for x in xs if x is not None), default=None)


def _merge(found: dict[str, Found], kind: str, count: int, items: list[tuple]) -> None:
    f = found.setdefault(kind, Found())
    f.count += count
    f.items += [{"key": list(k) if isinstance(k, tuple) else k, "acked_ns": a, "exposed_ns": e}
                for k, a, e in items]


def _add(found: dict[str, Found], kind: str, key: Any, acked: int | None, exposed: int | None, limit: int) -> None:
    f = found.setdefault(kind, Found())
    f.count += 1
    if len(f.items) < limit:
        f.items.append({"key": key, "acked_ns": acked, "exposed_ns": exposed})
