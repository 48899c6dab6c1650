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

from checkers.spark import CORRUPT, read_history_df, readable_path, spark_session

OP_TYPES = ("invoke", "ok", "fail", "info")
COUNTS = ("acked", "lost", "unseen", "acked_offset_mismatch", "duplicate",
          "inconsistent_offset", "unexpected", "failed_visible")
INVALID_COUNTS = ("lost", "acked_offset_mismatch", "inconsistent_offset", "unexpected")
MAX_EXAMPLES = 10
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
LATENCY_FS = ("send", "poll")
NS_PER_MS = 1_000_000

Latency = dict[str, dict[str, dict[str, float | int]]]  # f -> completion type -> stats

# Pseudo-kinds computed in the same pass as the counts, reported under `stats`.
_VALUES_READ = "_values_read"
_BAD_RECORDS = "_malformed_records"


class QueueChecker:
    """Checks a queue-workload history against the definitions in docs/checkers.md."""

    def __init__(self, master: str = "local[*]"):
        self.master = master

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """Return `{"valid", "counts", "examples", "stats", "latency_ms", "idempotence"}`.

        `valid` is False if an invalid anomaly was found, else "unknown" if some
        acked value could not be looked for (unseen) or some client op could not
        be parsed, else True. `test` may be empty: idempotence is then off.
        """
        test = test or {}
        idempotent = (test.get("producer") or {}).get("idempotence") is True
        spark = spark_session(self.master)
        with readable_path(Path(history_path)) as path:
            ops = parse(read_history_df(spark, path)).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                stats, latency = _stats_and_latency(ops, _topic_partitions(test))
                found = _anomalies(ops.filter("usable"), stats["partitions_complete"])
            finally:
                ops.unpersist()
        counts = {k: found.get(k, (0, []))[0] for k in COUNTS}
        examples = {k: found[k][1] for k in COUNTS if counts[k]}
        stats["values_read"] = found.get(_VALUES_READ, (0, []))[0]
        stats["malformed_records"] = found.get(_BAD_RECORDS, (0, []))[0]
        malformed = stats["malformed_client_ops"] + stats["malformed_records"]
        return {"valid": judge(counts, idempotent, malformed), "counts": counts,
                "examples": examples, "stats": stats, "latency_ms": latency,
                "idempotence": idempotent}


def judge(counts: dict[str, int], idempotent: bool, malformed: int = 0) -> bool | str:
    """False if an invalid anomaly was counted, else "unknown" if unseen or malformed, else True.

    Duplicates are invalid only under idempotence: without it a retried send
    may legitimately be written twice.
    """
    if any(counts[k] for k in INVALID_COUNTS) or (idempotent and counts["duplicate"]):
        return False
    if counts["unseen"] or malformed:
        return "unknown"
    return True


def parse(raw: DataFrame) -> DataFrame:
    """Every history line, typed for the checker, each completion joined to its invocation.

    Columns: index, process, type, f, partition, value, offset, records,
    complete, latency_ns, plus flags `nemesis`, `corrupt` and `usable` (a
    client op the checker counts). `value` is read on sends only; `value` and
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
    return lines.select(
        "index", "process", "type", "f", "offset", "records", "complete", "nemesis", "corrupt",
        inherited("value"), inherited("partition"),
        F.when(paired, F.col("time") - F.lag("time").over(w)).alias("latency_ns"),
        usable.alias("usable"),
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


def _anomalies(ops: DataFrame, done: list[int]) -> dict[str, tuple[int, list[Any]]]:
    """kind -> (count, up to MAX_EXAMPLES smallest keys) for every kind with a non-zero count.

    Two groupings do the work: reads and acks by (partition, offset), then
    everything known about each value by value.
    """
    t, f = F.col("type"), F.col("f")
    no_long = F.lit(None).cast("long")
    sends = ops.filter((f == "send") & F.col("value").isNotNull())
    entries = ops.filter(F.col("records").isNotNull()).select(
        "index", (f == "drain").alias("drained"), F.explode("records").alias("r"))
    well_formed = (F.size("r") == 3) & F.forall("r", lambda x: x.isNotNull())
    reads = entries.filter(well_formed).select(
        F.get("r", 0).alias("p"), F.get("r", 1).alias("o"), F.get("r", 2).alias("v"), "drained")
    bad_records = entries.filter(F.col("r").isNull() | ~well_formed)

    acks = sends.filter((t == "ok") & F.col("partition").isNotNull() & F.col("offset").isNotNull())
    at_offset = (
        reads.select("p", "o", F.col("v").alias("read"), no_long.alias("acked"))
        .unionByName(acks.select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                 no_long.alias("read"), F.col("value").alias("acked")))
        .groupBy("p", "o")
        .agg(F.collect_set("read").alias("reads"), F.collect_set("acked").alias("acks")))
    mismatched = at_offset.select(F.explode(F.filter(
        "acks", lambda a: F.exists("reads", lambda r: r != a))).alias("value"))

    def fact(df: DataFrame, invoked: Column = F.lit(False), acked: Column = F.lit(False),
             failed: Column = F.lit(False), ack_done: Column = F.lit(False),
             loc: Column = F.lit(None), mismatch: Column = F.lit(False),
             drained: Column = F.lit(False)) -> DataFrame:
        return df.select("value", invoked.alias("invoked"), acked.alias("acked"),
                         failed.alias("failed"), ack_done.alias("ack_done"),
                         loc.cast("struct<p:bigint,o:bigint>").alias("loc"),
                         mismatch.alias("mismatch"), drained.alias("drained"))

    facts = (
        fact(sends, invoked=t == "invoke", acked=t == "ok", failed=t == "fail",
             ack_done=(t == "ok") & F.coalesce(F.col("partition").isin(done), F.lit(False)))
        .unionByName(fact(reads.withColumnRenamed("v", "value"), loc=F.struct("p", "o"),
                          drained=F.col("drained")))
        .unionByName(fact(mismatched, mismatch=F.lit(True))))
    per_value = facts.groupBy("value").agg(
        *[F.max(c).alias(c) for c in ("invoked", "acked", "failed", "ack_done", "mismatch", "drained")],
        F.size(F.collect_set("loc")).alias("locations"))

    v, read = F.col, F.col("locations") > 0
    # An acked value is lost if (one of) its partition's final reads completed
    # without it, even if a consumer read it earlier (the log lost it after
    # that, e.g. to a power failure). An acked value never read at all is
    # unseen when no final read of its partition completed.
    kinds = {
        "acked": v("acked"),
        "lost": v("acked") & ~v("drained") & v("ack_done"),
        "unseen": v("acked") & ~read & ~v("ack_done"),
        "acked_offset_mismatch": v("mismatch") & v("acked"),
        "duplicate": v("locations") >= 2,
        "unexpected": read & ~v("invoked"),
        "failed_visible": read & v("failed"),
        _VALUES_READ: read,
    }
    by_value = per_value.select(F.explode(F.filter(
        F.array(*[F.when(cond, F.lit(kind)) for kind, cond in kinds.items()]),
        lambda k: k.isNotNull())).alias("kind"), F.array("value").alias("k"))
    keyed = (by_value
             .unionByName(at_offset.filter(F.size("reads") >= 2).select(
                 F.lit("inconsistent_offset").alias("kind"), F.array("p", "o").alias("k")))
             .unionByName(bad_records.select(
                 F.lit(_BAD_RECORDS).alias("kind"), F.array("index").alias("k"))))
    # Keys are distinct within a kind (bad records aside, which are only counted).
    rows = (keyed
            .withColumn("rank", F.row_number().over(Window.partitionBy("kind").orderBy("k")))
            .withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("kind")))
            .filter(F.col("rank") <= MAX_EXAMPLES)
            .collect())
    result: dict[str, tuple[int, list[Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["kind"], r["rank"])):
        _, examples = result.setdefault(row["kind"], (row["n"], []))
        examples.append(row["k"][0] if len(row["k"]) == 1 else list(row["k"]))
    return result


def _ms(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)
