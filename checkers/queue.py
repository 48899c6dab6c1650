"""The queue checker: were acknowledged sends kept, and did reads agree with each other?

Every count is a Spark DataFrame computation over the history; the driver only
receives counts, at most MAX_EXAMPLES examples per count, the partition lists
and latency quantiles. Definitions are in docs/checkers.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.queue_anomalies import BAD_RECORDS, VALUES_READ, anomalies
from checkers.reference import COUNTS, MAX_EXAMPLES, Settings, verdict
from checkers.spark import CORRUPT, read_history_df, readable_path, spark_session

__all__ = ["COUNTS", "MAX_EXAMPLES", "QueueChecker", "judge", "parse"]

OP_TYPES = ("invoke", "ok", "fail", "info")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
LATENCY_FS = ("send", "poll")
NS_PER_MS = 1_000_000

Latency = dict[str, dict[str, dict[str, float | int]]]  # f -> completion type -> stats


class QueueChecker:
    """Checks a queue-workload history against the definitions in docs/checkers.md."""

    def __init__(self, master: str = "local[*]"):
        self.master = master

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """Return `{"valid", "counts", "examples", "loss", "stats", "latency_ms", "idempotence"}`.

        `valid` is False if an invalid anomaly was found, else "unknown" if some
        acked value could not be looked for (unseen) or some client op could not
        be parsed, else True. `loss` says whether the configuration promised no
        loss, as checkers/reference.py does. `test` may be empty: missing
        settings take the harness's defaults (idempotence off).
        """
        test = test or {}
        settings = Settings.of(test)
        spark = spark_session(self.master)
        with readable_path(Path(history_path)) as path:
            ops = parse(read_history_df(spark, path)).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                stats, latency = _stats_and_latency(ops, _topic_partitions(test))
                found = anomalies(ops.filter("usable"), stats["partitions_complete"])
            finally:
                ops.unpersist()
        counts = {k: found.get(k, (0, []))[0] for k in COUNTS}
        examples = {k: found[k][1] for k in COUNTS if counts[k]}
        stats["values_read"] = found.get(VALUES_READ, (0, []))[0]
        stats["malformed_records"] = found.get(BAD_RECORDS, (0, []))[0]
        malformed = stats["malformed_client_ops"] + stats["malformed_records"]
        promised = settings.promises_no_loss
        return {"valid": judge(counts, settings.idempotence, malformed), "counts": counts,
                "examples": examples,
                "loss": {"acks": settings.acks, "promised": promised,
                         "expected_by_configuration": bool(counts["lost"]) and not promised},
                "stats": stats, "latency_ms": latency, "idempotence": settings.idempotence}


def judge(counts: dict[str, int], idempotent: bool, malformed: int = 0) -> bool | str:
    """False if an invalid anomaly was counted, else "unknown" if unseen or malformed, else True.

    The reference's verdict (checkers/reference.py): duplicate and
    nonmonotonic_send are invalid only under idempotence (without it a retried
    send may legitimately be written twice, or reordered).
    """
    return verdict(counts, idempotent, malformed)


def parse(raw: DataFrame) -> DataFrame:
    """Every history line, typed for the checker, each completion joined to its invocation.

    Columns: index, process, type, f, partition, value, offset, records,
    complete, latency_ns, plus flags `nemesis`, `corrupt` and `usable` (a
    client op the checker counts), and `stream`: how many resets (assign ops,
    info polls) of its process came up to this op. `value` is read on sends only; `value` and
    `partition` on a completion fall back to its invocation's. `latency_ns` is
    set on completions whose previous line of the same process is an
    invocation of the same f. `records` is kept on ok polls and drains only,
    `complete` on ok drains only.
    """
    t, f, proc = F.col("type"), F.col("f"), F.col("process")
    ok_read = (t == "ok") & f.isin("poll", "drain")
    # Selecting every typed column here makes Spark parse each line against the
    # whole schema, so `corrupt` does not depend on which columns a query uses.
    lines = raw.select(
        "index", "time", "process", "type", "f", "offset",
        F.col(CORRUPT).isNotNull().alias("corrupt"),
        (proc == "nemesis").alias("nemesis"),
        F.col("partition").try_cast("long").alias("partition"),
        F.when(f == "send", F.col("value").try_cast("long")).alias("value"),
        F.when(ok_read, F.col("records")).alias("records"),
        F.when(ok_read & (f == "drain"), F.col("complete")).alias("complete"),
    )
    w = Window.partitionBy("process").orderBy("index")
    paired = (t != "invoke") & (F.lag("type").over(w) == "invoke") & (F.lag("f").over(w) == f)

    def inherited(c: str) -> Column:
        return F.when(t == "invoke", F.col(c)).otherwise(
            F.coalesce(F.col(c), F.when(paired, F.lag(c).over(w)))).alias(c)

    usable = (proc.isNotNull() & ~F.col("nemesis") & ~F.col("corrupt")
              & F.coalesce(t.isin(*OP_TYPES), F.lit(False)) & f.isNotNull())
    # A consumer's stream ends at an assign (invocation or completion) or a poll that
    # completed info: `stream` numbers them per process.
    reset = usable & ((f == "assign") | ((f == "poll") & (t == "info")))
    return lines.select(
        "index", "process", "type", "f", "offset", "records", "complete", "nemesis", "corrupt",
        inherited("value"), inherited("partition"),
        F.when(paired, F.col("time") - F.lag("time").over(w)).alias("latency_ns"),
        usable.alias("usable"),
        F.count(F.when(reset, 1)).over(w.rowsBetween(Window.unboundedPreceding, 0)).alias("stream"),
    )


def _topic_partitions(test: dict[str, Any]) -> list[int]:
    n = (test.get("topic") or {}).get("partitions")
    return list(range(n)) if isinstance(n, int) and not isinstance(n, bool) else []


def _stats_and_latency(ops: DataFrame,
                       topic_partitions: list[int]) -> tuple[dict[str, Any], Latency]:
    """Line and op counts by kind, which partitions completed their final read, and latency.

    One global aggregation: latency quantiles are conditional aggregates per
    (f, completion type), so no grouping shuffle is needed.
    """
    t, f, usable, lat = F.col("type"), F.col("f"), F.col("usable"), F.col("latency_ns")

    def n(cond: Column) -> Column:
        return F.count(F.when(cond, 1))

    client = F.col("process").isNotNull() & ~F.col("nemesis")
    drain_done = usable & (f == "drain") & (t == "ok") & (F.col("complete") == F.lit(True))
    latency_aggs = []
    for fn in LATENCY_FS:
        for ty in OP_TYPES[1:]:
            x = F.when(usable & (f == fn) & (t == ty), lat)
            latency_aggs.append(F.struct(
                F.count(x).alias("count"),
                F.percentile_approx(x, list(QUANTILES.values()), 10000).alias("q"),
                F.max(x).alias("max")).alias(f"latency:{fn}:{ty}"))
    row = ops.agg(
        n(F.col("nemesis")).alias("nemesis_ops"),
        n(F.col("corrupt")).alias("unparsed_lines"),
        n(client & (~usable | ((f == "send") & F.col("value").isNull()))).alias("malformed_client_ops"),
        *[n(usable & (f == "send") & (t == ty)).alias(f"send_{ty}") for ty in OP_TYPES],
        n(usable & (f == "poll") & (t == "ok")).alias("poll_ok"),
        n(usable & (f == "drain") & (t == "ok")).alias("drain_ok"),
        F.collect_set(F.when(drain_done, F.col("partition"))).alias("done"),
        F.collect_set(F.when(usable & f.isin("send", "drain"), F.col("partition"))).alias("seen"),
        *latency_aggs,
    ).first().asDict()
    latency: Latency = {}
    for key in [k for k in row if k.startswith("latency:")]:
        _, fn, ty = key.split(":")
        agg = row.pop(key)
        if agg["count"]:
            entry: dict[str, float | int] = {"count": agg["count"]}
            entry.update({name: _ms(q) for name, q in zip(QUANTILES, agg["q"])})
            entry["max"] = _ms(agg["max"])
            latency.setdefault(fn, {})[ty] = entry
    done = set(row.pop("done"))
    seen = set(row.pop("seen")) | set(topic_partitions)
    row["partitions_complete"] = sorted(done)
    row["partitions_incomplete"] = sorted(seen - done)
    return row, latency


def _ms(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)
