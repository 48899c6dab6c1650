"""The Spark txn checker: the reference txn checker's counts, examples and cycles, computed by four Spark jobs.

1. parse (`parse_task`): one task per stretch of history.jsonl writes its reads and sends as bucket
   files into `history.txn/` beside the history; the driver pairs completions with invocations across
   stretches, raises the first malformed line as CheckInputError, as the reference does, and writes the sends of
   the transactions the run cut off (in their keys' partitions when test.json records the count) as one more
   range;
2. values (`value_task`): one task per value bucket;
3. partitions (`partition_task`): one task per partition bucket, given (2)'s info transactions with a read value
   and a broadcast of every value's writer: the order kinds and the ww and wr edges, saved, and the edges
   among them that point back in history order;
4. cyclic edges (`cyclic_task`): one task per partition bucket's edges, given the spans of every backward edge:
   the edges that can lie on a cycle, a few where a history has millions; skipped when no edge points back.

The driver adds the counts, keeps the smallest keys, decides torn transactions from (2)'s per-transaction
sets, and finds G0 and G1c in the edges of (4) with `cycles`, the search the reference runs.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pyspark import SparkContext, cloudpickle

from kchaos.checkers import sets
from kchaos.checkers.history_scan import split
from kchaos.checkers.parquet import CheckInputError
from kchaos.checkers.sets import unique
from kchaos.checkers.spark import run_tasks, spark_context
from kchaos.checkers.txn import flat as txn_flat
from kchaos.checkers.txn import lines as txn_lines
from kchaos.checkers.txn import patterns as txn_patterns
from kchaos.checkers.txn import tasks as txn_tasks
from kchaos.checkers.txn.cycles import cycles
from kchaos.checkers.txn.flat import READ_COLS, TYPES, Stretch, parse_task, stitch, write_buckets
from kchaos.checkers.txn.lines import partition_count
from kchaos.checkers.txn.order import ORDER_COUNTS
from kchaos.checkers.txn.reference import BASE_COUNTS, COMMITTED, MAX_EXAMPLES, assemble, isolation_of
from kchaos.checkers.txn.tasks import EDGE_COLUMNS, cyclic_task, group_spans, partition_task, value_task

__all__ = ["TXN", "TxnSparkChecker", "check_txn_spark"]

TXN = "txn"  # the checker's name in results.json's `checkers`

STRETCH_BYTES = 8 << 20  # a parse task's share of the history, at most
PARTITION_BUCKETS = VALUE_BUCKETS = 8
WORK_DIR = "history.txn"

# The task functions travel by value: a Python worker then needs only numpy, not the checkers package.
for _module in (sets, txn_lines, txn_patterns, txn_flat, txn_tasks, sys.modules[__name__]):
    cloudpickle.register_pickle_by_value(_module)


def _run(sc: SparkContext, what: str, fn: Any, jobs: list[Any]) -> list[Any]:
    return run_tasks(sc, f"kchaos txn check: {what}", fn, jobs)


def check_txn_spark(sc: SparkContext, history: Path, test: dict[str, Any] | None,
                    max_examples: int = MAX_EXAMPLES, stretch_bytes: int = STRETCH_BYTES) -> dict[str, Any]:
    """`check_txn_file(history, test)`'s result, computed on Spark; CheckInputError
    naming the first malformed line. The history is parsed in stretches of at most `stretch_bytes`; the bucket
    files live in `history.txn/` beside the history while it runs."""
    history = Path(history).resolve()
    work = history.parent / WORK_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        return _check(sc, history, work, test, max_examples, stretch_bytes)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check(sc: SparkContext, history: Path, work: Path, test: dict[str, Any] | None, limit: int,
           stretch_bytes: int) -> dict[str, Any]:
    size = history.stat().st_size
    parts = max(1, -(-size // stretch_bytes), 2 * sc.defaultParallelism if size > (1 << 20) else 1)
    stretches = split(str(history), parts)
    jobs = [(str(history), r, a, b, n0, r == len(stretches) - 1, str(work), PARTITION_BUCKETS, VALUE_BUCKETS)
            for r, (a, b, n0) in enumerate(stretches)]
    got: list[Stretch] = _run(sc, "parse", parse_task, jobs)
    joined = stitch(got, partition_count(test))
    if joined.error:
        raise CheckInputError(f"{history}:{joined.error[0]}: {joined.error[1]}")
    # the cut-off transactions' sends, known only once the stretches are joined, go into one more range's buckets
    write_buckets(str(work), len(got), np.zeros((0, len(READ_COLS)), np.int64), joined.cut, PARTITION_BUCKETS,
                  VALUE_BUCKETS)
    isolation = isolation_of(test)
    top: dict[int, int] = {}
    for s in got:
        for p, o in s.top.items():
            top[p] = max(top.get(p, o), o)
    top_arr = (np.array(sorted(top), np.int64), np.array([top[p] for p in sorted(top)], np.int64))
    complete = np.array(sorted(set().union(*(s.complete for s in got))), np.int64)
    files = {k: [[str(work / f"r{r:04d}.{k}{b}.npz") for r in range(len(got) + 1)] for b in range(n)]
             for k, n in (("v", VALUE_BUCKETS), ("p", PARTITION_BUCKETS))}
    values = _run(sc, "values", value_task, [(fs, joined.fixup, top_arr, complete, isolation == COMMITTED, limit,
                                               str(work / f"values{b}.npz")) for b, fs in enumerate(files["v"])])
    per_txn = [dict(np.load(v["arrays"])) for v in values]
    read_info = unique(np.concatenate([v["read_info"] for v in per_txn]))
    writers = np.concatenate([s.writers for s in got] + [joined.cut[:, [2, 3, 6]]])
    if len(writers):
        txn_tasks.fix_placeholders(writers[:, 1], joined.fixup)
    writers = writers[np.argsort(writers[:, 0], kind="stable")]
    nodes = ((writers[:, 2] == TYPES["ok"]) | (writers[:, 2] == TYPES["info"])).astype(np.int64)
    moves = np.array([(proc, p, i) for s in got for i, proc, ps in s.rebalances for p in ps], np.int64).reshape(-1, 3)
    shared = str(work / "shared.npz")
    np.savez(shared, writers=np.stack([writers[:, 0], writers[:, 1], nodes]), read_info=read_info, moves=moves)
    partitions = _run(sc, "partitions", partition_task, [(fs, joined.fixup, shared, limit, str(work / f"edges{b}.npz"))
                                                         for b, fs in enumerate(files["p"])])
    counts, examples = {}, {}
    for kind in BASE_COUNTS + ORDER_COUNTS:
        if kind == "torn_transaction":
            continue
        found = [r[kind] for r in (values if kind in values[0] else partitions)]  # (count, smallest keys) per task
        counts[kind] = sum(n for n, _ in found)
        examples[kind] = sorted(k for _, ks in found for k in ks)[:limit]
    torn = np.intersect1d(unique(np.concatenate([v["shown"] for v in per_txn])),
                          unique(np.concatenate([v["hidden"] for v in per_txn])), assume_unique=True)
    counts["torn_transaction"], examples["torn_transaction"] = len(torn), torn[:limit].tolist()
    backward = np.concatenate([r["backward"] for r in partitions])
    spans = group_spans(backward)
    kept = _run(sc, "cyclic edges", cyclic_task, [(r["edges"], spans) for r in partitions]) \
        if len(backward) else []  # no edge points back: no cycle, and no edge to read
    cycle_counts, cycle_examples = cycles(np.concatenate([np.zeros((0, len(EDGE_COLUMNS)), np.int64), *kept]))
    stats = _stats(got, joined, sum(v["values_read"] for v in values), test)
    return assemble({**counts, **cycle_counts}, examples, cycle_examples, sum(v["undecided"] for v in values),
                    isolation, stats)


def _stats(got: list[Stretch], joined: Any, values_read: int, test: dict[str, Any] | None) -> dict[str, Any]:
    complete = set().union(*(s.complete for s in got))
    parts = set().union(*(s.partitions for s in got))
    parts |= set(range(partition_count(test) or 0))
    return {"txn_invoke": joined.invoked, "txn_ok": joined.types["ok"], "txn_fail": joined.types["fail"],
            "txn_info": joined.types["info"], "committed_sends": sum(s.committed_sends for s in got),
            "values_read": values_read, "drain_ok": sum(s.drain_ok for s in got),
            "nemesis_ops": sum(s.nemesis_ops for s in got), "partitions_complete": sorted(complete),
            "partitions_incomplete": sorted(parts - complete)}


class TxnSparkChecker:
    """The txn workload's checker on Spark (core.protocols.Checker): `check_txn_spark` on the history."""

    def __init__(self, master: str = "local[*]"):
        self.master = master

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """`check_txn_spark(history_path, test)` on the process's SparkContext."""
        return check_txn_spark(spark_context(self.master), Path(history_path), test)

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` for each (test, history) pair, in order."""
        return [self.check(test, path) for test, path in runs]
