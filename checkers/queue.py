"""The queue checker: were acknowledged sends kept, and did reads agree with each other?

Every count is a Spark DataFrame computation over the history's Parquet form;
the driver only receives counts, at most `limit` anomalies per kind, the
partition lists, per-second and per-epoch send counts, latency quantiles and
the nemesis lines. Definitions are in docs/checkers.md. `check_many` checks
several histories in one job: every grouping is also by `run`.
"""
from __future__ import annotations

import contextlib
import json
from collections import defaultdict
from functools import reduce
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from checkers.queue_anomalies import VALUES_READ, Found, anomalies
from checkers.reference import COUNTS, MAX_EXAMPLES, Settings, verdict
from checkers.spark import CORRUPT, read_history_df, readable_path, spark_session
from checkers.timeline import timelines
from harness.faults import FaultCatalogue, read_faults

__all__ = ["COUNTS", "MAX_EXAMPLES", "QueueChecker", "judge", "parse"]

OP_TYPES = ("invoke", "ok", "fail", "info")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
LATENCY_FS = ("send", "poll")
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
MAX_SECONDS = 3600  # rows of the per-second series per run, at most
TIMELINE_LIMIT = 10_000  # anomalies per kind listed with their times
EMPTY_STATS: dict[str, Any] = {
    "nemesis_ops": 0, "unparsed_lines": 0, "malformed_client_ops": 0,
    **{f"send_{ty}": 0 for ty in OP_TYPES}, "poll_ok": 0, "drain_ok": 0,
    "partitions_complete": [], "partitions_incomplete": [], "span_ns": 0, "malformed_records": 0,
    "reordered_acks": 0}

Latency = dict[str, dict[str, dict[str, float | int]]]  # f -> completion type -> stats


class QueueChecker:
    """Checks a queue-workload history against the definitions in docs/checkers.md."""

    def __init__(self, master: str = "local[*]", limit: int = TIMELINE_LIMIT):
        self.master = master
        self.limit = limit

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """Return `{"valid", "counts", "examples", "loss", "stats", "latency_ms", "idempotence", "timeline"}`.

        `valid` is False if an invalid anomaly was found, else "unknown" if some
        acked value could not be looked for (unseen) or some client op could not
        be parsed, else True. `loss` says whether the configuration promised no
        loss, as checkers/reference.py does. `test` may be empty: missing
        settings take the harness's defaults (idempotence off). `timeline` is
        checkers/timeline.py's section: fault windows, availability, and each
        anomaly (up to `limit` per kind) with when it was acked and exposed;
        the roles of fault ops come from faults.json beside the history (when
        absent, from the history itself; FaultsError when malformed).
        """
        return self.check_many([(test, Path(history_path))])[0]

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` for several histories at once: one Spark job over their union, one result each."""
        if not runs:
            return []
        faults = [read_faults(Path(path).parent) for _, path in runs]
        spark = spark_session(self.master)
        with contextlib.ExitStack() as stack:
            frames = [read_history_df(spark, stack.enter_context(readable_path(Path(path))))
                      .withColumn("run", F.lit(i).cast("long")) for i, (_, path) in enumerate(runs)]
            raw = reduce(DataFrame.unionByName, frames)
            ops = parse(raw)
            done_rows = _done(ops)
            done = spark.createDataFrame(done_rows, "run long, p long, done_ns long")
            complete: dict[int, set[int]] = defaultdict(set)
            for run, p, _ in done_rows:
                complete[run].add(p)
            stats, latency = _stats_and_latency(ops, [_topic_partitions(test) for test, _ in runs], complete)
            late = any(s["reordered_acks"] for s in stats.values())
            found = anomalies(ops.filter("usable"), done, self.limit, late)
            series = _series(ops, max((s["span_ns"] for s in stats.values()), default=0))
            events = _events(raw)
        return [self._result(test, stats[i], latency.get(i, {}), found.get(i, {}),
                             series.get(i, ([], [])), events.get(i, []), faults[i])
                for i, (test, _) in enumerate(runs)]

    @staticmethod
    def _result(test: dict[str, Any], stats: dict[str, Any], latency: Latency, found: dict[str, Found],
                series: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                events: list[dict[str, Any]], faults: FaultCatalogue | None = None) -> dict[str, Any]:
        settings = Settings.of(test)
        counts = {k: found[k].count if k in found else 0 for k in COUNTS}
        examples = {k: [item["key"] for item in found[k].items[:MAX_EXAMPLES]] for k in COUNTS if counts[k]}
        stats = {k: v for k, v in stats.items() if k not in ("span_ns", "reordered_acks")}
        stats["values_read"] = found[VALUES_READ].count if VALUES_READ in found else 0
        malformed = stats["malformed_client_ops"] + stats["malformed_records"]
        promised = settings.promises_no_loss
        per_epoch, per_second = series
        anomalies_ = {k: found[k].items for k in COUNTS if k != "acked" and counts[k]}
        return {"valid": judge(counts, settings.idempotence, malformed), "counts": counts,
                "examples": examples,
                "loss": {"acks": settings.acks, "promised": promised,
                         "expected_by_configuration": bool(counts["lost"]) and not promised},
                "stats": stats, "latency_ms": latency, "idempotence": settings.idempotence,
                "timeline": timelines(events, per_epoch, per_second, anomalies_, faults)}


def judge(counts: dict[str, int], idempotent: bool, malformed: int = 0) -> bool | str:
    """False if an invalid anomaly was counted, else "unknown" if unseen or malformed, else True.

    The reference's verdict (checkers/reference.py): duplicate and
    nonmonotonic_send are invalid only under idempotence (without it a retried
    send may legitimately be written twice, or reordered).
    """
    return verdict(counts, idempotent, malformed)


def parse(raw: DataFrame) -> DataFrame:
    """Every history line, typed for the checker (pairing was done by the converter).

    Columns: run, index, time, process, type, f, partition, value, offset,
    records, complete, latency_ns, stream, epoch, acked_before, plus flags
    `nemesis`, `corrupt` and `usable` (a client op the checker counts).
    `value` is kept on sends only, `records` on ok polls and drains only,
    `complete` on ok drains only.
    """
    t, f, proc = F.col("type"), F.col("f"), F.col("process")
    ok_read = (t == "ok") & f.isin("poll", "drain")
    nemesis = proc == "nemesis"
    corrupt = F.col(CORRUPT).isNotNull()
    usable = (proc.isNotNull() & ~nemesis & ~corrupt
              & F.coalesce(t.isin(*OP_TYPES), F.lit(False)) & f.isNotNull())
    return raw.select(
        "run", "index", "time", "process", "type", "f", "partition", "offset",
        "latency_ns", "stream", "epoch", "acked_before",
        F.when(f == "send", F.col("value")).alias("value"),
        F.when(ok_read, F.col("records")).alias("records"),
        F.when(ok_read & (f == "drain"), F.col("complete")).alias("complete"),
        F.coalesce(nemesis, F.lit(False)).alias("nemesis"), corrupt.alias("corrupt"),
        F.coalesce(usable, F.lit(False)).alias("usable"))


def _topic_partitions(test: dict[str, Any]) -> list[int]:
    n = (test.get("topic") or {}).get("partitions")
    return list(range(n)) if isinstance(n, int) and not isinstance(n, bool) else []


def _stats_and_latency(ops: DataFrame, topic_partitions: list[list[int]], complete: dict[int, set[int]]
                       ) -> tuple[dict[int, dict[str, Any]], dict[int, Latency]]:
    """Per run: line and op counts by kind, partitions with and without a completed final read
    (`complete`, from `_done`), latency.

    One aggregation grouped by run (a handful of groups): latency quantiles
    are conditional aggregates per (f, completion type).
    """
    t, f, usable, lat = F.col("type"), F.col("f"), F.col("usable"), F.col("latency_ns")

    def n(cond: Column) -> Column:
        return F.count(F.when(cond, 1))

    client = F.col("process").isNotNull() & ~F.col("nemesis")
    latency_aggs = []
    for fn in LATENCY_FS:
        for ty in OP_TYPES[1:]:
            x = F.when(usable & (f == fn) & (t == ty), lat)
            latency_aggs.append(F.struct(
                F.count(x).alias("count"),
                F.percentile_approx(x, list(QUANTILES.values()), 10000).alias("q"),
                F.max(x).alias("max")).alias(f"latency:{fn}:{ty}"))
    rows = ops.groupBy("run").agg(
        n(F.col("nemesis")).alias("nemesis_ops"),
        n(F.col("corrupt")).alias("unparsed_lines"),
        n(client & (~usable | ((f == "send") & F.col("value").isNull()))).alias("malformed_client_ops"),
        *[n(usable & (f == "send") & (t == ty)).alias(f"send_{ty}") for ty in OP_TYPES],
        n(usable & (f == "poll") & (t == "ok")).alias("poll_ok"),
        n(usable & (f == "drain") & (t == "ok")).alias("drain_ok"),
        F.collect_set(F.when(usable & f.isin("send", "drain"), F.col("partition"))).alias("seen"),
        (F.max("time") - F.min("time")).alias("span_ns"),
        # Read records that are not [partition, offset, value] integers, without exploding.
        F.coalesce(F.sum(F.size(F.filter("records", lambda r: r.isNull() | (F.size(r) != 3)
                                          | F.exists(r, lambda x: x.isNull())))), F.lit(0)
                   ).alias("malformed_records"),
        # Ok sends at or below an earlier ack of their process: nonmonotonic_send is looked for if any.
        n(usable & (f == "send") & (t == "ok") & (F.col("offset") <= F.col("acked_before"))
          ).alias("reordered_acks"),
        *latency_aggs,
    ).collect()
    stats: dict[int, dict[str, Any]] = {}
    latencies: dict[int, Latency] = {}
    for r in rows:
        row = r.asDict()
        run = row.pop("run")
        latency: Latency = {}
        for key in [k for k in row if k.startswith("latency:")]:
            _, fn, ty = key.split(":")
            agg = row.pop(key)
            if agg["count"]:
                entry: dict[str, float | int] = {"count": agg["count"]}
                entry.update({name: _ms(q) for name, q in zip(QUANTILES, agg["q"])})
                entry["max"] = _ms(agg["max"])
                latency.setdefault(fn, {})[ty] = entry
        done = complete.get(run, set())
        seen = set(row.pop("seen")) | set(topic_partitions[run])
        row["partitions_complete"] = sorted(done)
        row["partitions_incomplete"] = sorted(seen - done)
        row["span_ns"] = row["span_ns"] or 0
        stats[run], latencies[run] = row, latency
    for run in range(len(topic_partitions)):  # an empty history has no rows at all
        stats.setdefault(run, {**EMPTY_STATS, "partitions_incomplete": sorted(topic_partitions[run])})
    return stats, latencies


def _done(ops: DataFrame) -> list[tuple[int, int, int]]:
    """(run, p, done_ns): partitions whose final read completed, and when it first did."""
    t, f = F.col("type"), F.col("f")
    rows = (ops.filter(F.col("usable") & (f == "drain") & (t == "ok") & (F.col("complete") == F.lit(True))
                       & F.col("partition").isNotNull())
            .groupBy("run", F.col("partition").alias("p")).agg(F.min("time").alias("done_ns")).collect())
    return [tuple(r) for r in rows]


def _series(ops: DataFrame, span_ns: int) -> dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Per run: send counts per invocation epoch, and per second of invocation (with ok latency).

    Each send is placed by its invocation: a completion's invocation time is
    its time minus its latency. Seconds are widened so a run has at most
    MAX_SECONDS of them (a synthetic history may span days).
    """
    width = max(1, -(-span_ns // (MAX_SECONDS * NS_PER_S)))
    t, c = F.col("type"), F.col
    sends = ops.filter(c("usable") & (c("f") == "send")).select(
        "run", "type", "epoch", "latency_ns",
        F.floor((c("time") - F.coalesce(c("latency_ns"), F.lit(0))) / (width * NS_PER_S)).alias("second"))
    counts = [F.count(F.when(t == ty, 1)).alias("invoked" if ty == "invoke" else ty) for ty in OP_TYPES]
    out: dict[int, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = defaultdict(lambda: ([], []))
    for r in sends.groupBy("run", "epoch").agg(*counts).orderBy("run", "epoch").collect():
        out[r["run"]][0].append({k: r[k] for k in ("epoch", "invoked", "ok", "fail", "info")})
    ok_ms = F.when(t == "ok", c("latency_ns") / NS_PER_MS)
    quantiles = F.percentile_approx(ok_ms, list(QUANTILES.values()), 1000)
    for r in (sends.groupBy("run", "second").agg(*counts, quantiles.alias("q"), F.max(ok_ms).alias("max"))
              .orderBy("run", "second").collect()):
        entry = {"second": r["second"] * width, **{k: r[k] for k in ("invoked", "ok", "fail", "info")}}
        entry.update({name: None if r["q"] is None else round(q, 3) for name, q in
                      zip(QUANTILES, r["q"] or [None] * len(QUANTILES))})
        entry["max"] = None if r["max"] is None else round(r["max"], 3)
        out[r["run"]][1].append(entry)
    return out


def _events(raw: DataFrame) -> dict[int, list[dict[str, Any]]]:
    """Per run, the nemesis lines in file order (`epoch` is their ordinal)."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = (raw.filter(F.col("process") == "nemesis")
            .select("run", "index", "time", "type", "f", "nemesis", "epoch", "detail")
            .orderBy("run", "epoch").collect())
    for r in rows:
        try:
            detail = json.loads(r["detail"]) if r["detail"] else {}
        except ValueError:
            detail = {}
        out[r["run"]].append({"index": r["index"], "time": r["time"], "type": r["type"], "f": r["f"],
                              "nemesis": r["nemesis"], "epoch": r["epoch"],
                              "detail": detail if isinstance(detail, dict) else {}})
    return out


def _ms(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)
