"""The checker of the share workload: what each record's deliveries and acknowledgements say of KIP-932's
guarantees (the kinds and causes in `kchaos.checkers.share.reference`, docs/checkers.md), computed by three Spark
jobs (`kchaos.checkers.share.tasks`): route each line to its process's bucket, pair each process's ops, judge each
record. The driver adds the counts, keeps the smallest examples and the earliest marks, and finds the acknowledged
sends no member was delivered. Its result equals the reference's on the same history."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pyspark import SparkContext, cloudpickle

from kchaos.checkers import sets
from kchaos.checkers.history_scan import split
from kchaos.checkers.sets import isin, unique
from kchaos.checkers.share import arrays as share_arrays
from kchaos.checkers.share import reference as share_reference
from kchaos.checkers.share import tasks as share_tasks
from kchaos.checkers.share.reference import CAUSES, MAX_EXAMPLES, SHARE_KINDS, consume_tallies, summary
from kchaos.checkers.share.tasks import collect_task, judge_task, merge_seconds, route_task
from kchaos.checkers.spark import run_tasks, spark_context

__all__ = ["SHARE", "SHARE_COUNTS", "SHARE_KINDS", "ShareChecker", "check_share_spark"]

SHARE = "share"  # the checker's name in results.json's `checkers`
SHARE_COUNTS = tuple(SHARE_KINDS)
DEFAULT_LIMIT, DEFAULT_LOCK_MS = 5, 30000  # Kafka's own defaults, for a history without test.json
STRETCH_BYTES = 128 << 20  # a route task's share of the history, at most (a task costs Spark about 0.1 s)
WORK_DIR = "history.share"

# The task functions travel by value: a Python worker then needs only numpy and orjson, not the checkers package.
for _module in (sets, share_arrays, share_reference, share_tasks, sys.modules[__name__]):
    cloudpickle.register_pickle_by_value(_module)


def _run(sc: SparkContext, what: str, fn: Any, jobs: list[Any]) -> list[Any]:
    return run_tasks(sc, f"kchaos share check: {what}", fn, jobs)


def check_share_spark(sc: SparkContext, history: Path, limit: int, lock_ms: int,
                      stretch_bytes: int = STRETCH_BYTES, buckets: int | None = None) -> dict[str, Any]:
    """`check_share_ops` of the history at `history`, computed on Spark; its work files live in `history.share/`
    beside the history while it runs. Stretches of at most `stretch_bytes`; `buckets` process and record buckets
    (by default one for a history under 1 MB, else four times Spark's parallelism)."""
    history = Path(history).resolve()
    work = history.parent / WORK_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        return _check(sc, history, work, limit, lock_ms, stretch_bytes, buckets)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check(sc: SparkContext, history: Path, work: Path, limit: int, lock_ms: int, stretch_bytes: int,
           buckets: int | None) -> dict[str, Any]:
    size = history.stat().st_size
    width = max(1, sc.defaultParallelism)
    big = size > (1 << 20)
    stretches = split(str(history), max(1, -(-size // stretch_bytes), 2 * width if big else 1))
    buckets = buckets or (4 * width if big else 1)
    sends = _run(sc, "route", route_task,
                 [(str(history), r, a, b, str(work), buckets) for r, (a, b, _) in enumerate(stretches)])
    collected = _run(sc, "collect", collect_task,
                     [([str(work / f"r{r:04d}.b{k}") for r in range(len(stretches))], str(work), k, buckets)
                      for k in range(buckets)])
    left: dict[Any, list[tuple[int, bool]]] = {}
    for c in collected:
        left.update(c["left"])
    judged = _run(sc, "judge", judge_task,
                  [([str(work / f"c{k:04d}.j{j}.npz") for k in range(buckets)], left, limit, lock_ms * 1_000_000)
                   for j in range(buckets)])
    state = next((c["state"] for c in collected if c["state"] is not None), None)
    seconds = merge_seconds([c["seconds"] for c in collected] + [j["seconds"] for j in judged])
    found: dict[str, list[list[int]]] = {k: [] for k in SHARE_KINDS}
    counts = dict.fromkeys(SHARE_KINDS, 0)
    for j in judged:
        for kind, (n, examples) in j["found"].items():
            counts[kind] += n
            found[kind] += examples
    marks = {k: sorted(ns for j in judged for ns in j["marks"][k]) for k in SHARE_KINDS}
    causes = {c: sum(j["causes"][c] for j in judged) for c in CAUSES}
    delivered = unique(np.concatenate([j["delivered"] for j in judged]))
    acked = np.concatenate(sends + [c["acked"] for c in collected])
    # One row per value, the last (history order within each part; a value acknowledged in two parts, which no
    # kchaos history has, keeps one of them).
    acked = acked[::-1][np.unique(acked[::-1, 0], return_index=True)[1]]
    missing = acked[~isin(acked[:, 0], delivered)]
    crashed = any(crash for events in left.values() for _, crash in events)
    complete = [p for p, s in (state or {}).items() if s.get("lag") == 0]
    lost = missing[isin(missing[:, 1], complete)] if not crashed else missing[:0]
    lost = lost[np.lexsort((lost[:, 0], lost[:, 2], lost[:, 1]))]  # by partition, offset, value
    counts["share_lost"] = len(lost)
    found["share_lost"] = [[int(p), int(o), int(v)] for v, p, o in lost[:MAX_EXAMPLES]]
    result = summary(found, marks, causes, seconds, len(acked), len(delivered), len(missing) - len(lost),
                     sum(j["accepted_twice"] for j in judged),
                     consume_tallies(row for j in judged for row in j["per_member"]))
    # summary counts the examples it is given: the counts are the tasks' totals
    result["counts"].update(counts)
    result["valid"] = False if any(counts.values()) else ("unknown" if result["counts"]["unseen"] else True)
    return result


class ShareChecker:
    """Checks a share run's history on Spark (`check_share_spark`), with the group's delivery count limit and
    acquisition lock from test.json's workload options."""

    def __init__(self, master: str = "local[*]"):
        self.master = master

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """`check_share_spark` of the history at `history_path` on the process's SparkContext."""
        options = ((test or {}).get("workload") or {}).get("options") or {}
        return check_share_spark(spark_context(self.master), Path(history_path),
                                 int(options.get("delivery_limit") or DEFAULT_LIMIT),
                                 int(options.get("lock_ms") or DEFAULT_LOCK_MS))

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` of each (test, history) pair, in order."""
        return [self.check(t, h) for t, h in runs]
