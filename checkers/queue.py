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
            raw = read_history_df(spark, path)
            ops = client_ops(raw).persist(StorageLevel.MEMORY_AND_DISK)
            try:
                stats = _line_stats(raw)
                stats.update(_op_stats(ops, _topic_partitions(test)))
                found = _anomalies(ops)
                latency = _latency(ops)
            finally:
                ops.unpersist()
        counts = {k: found.get(k, (0, []))[0] for k in COUNTS}
        examples = {k: found[k][1] for k in COUNTS if counts[k]}
        stats["values_read"] = found.get(_VALUES_READ, (0, []))[0]
        stats["malformed_records"] = found.get(_BAD_RECORDS, (0, []))[0]
        malformed = (stats["malformed_client_ops"] + stats["sends_without_value"]
                     + stats["malformed_records"])
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


def client_ops(raw: DataFrame) -> DataFrame:
    """Client ops from the raw history, each completion joined to its invocation.

    Columns: index, process, type, f, partition, value, offset, records,
    complete, latency_ns. `value` and `partition` on a completion fall back to
    its invocation's. `latency_ns` is set on completions whose previous op of
    the same process is an invocation of the same f. `records` is kept on ok
    polls and drains only, `complete` on ok drains only.
    """
    t, f = F.col("type"), F.col("f")
    ok_read = (t == "ok") & f.isin("poll", "drain")
    ops = raw.filter(F.col(CORRUPT).isNull() & F.col("process").isNotNull()
                     & (F.col("process") != "nemesis") & t.isin(*OP_TYPES) & f.isNotNull())
    ops = ops.select(
        "index", "time", "process", "type", "f", "offset",
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

    return ops.select(
        "index", "process", "type", "f", "offset", "records", "complete",
        inherited("value"), inherited("partition"),
        F.when(paired, F.col("time") - F.lag("time").over(w)).alias("latency_ns"),
    )


def _topic_partitions(test: dict[str, Any]) -> list[int]:
    n = (test.get("topic") or {}).get("partitions")
    return list(range(n)) if isinstance(n, int) and not isinstance(n, bool) else []


def _line_stats(raw: DataFrame) -> dict[str, int]:
    """Lines that are not usable client ops: nemesis ops and anything unparsable."""
    proc, corrupt = F.col("process"), F.col(CORRUPT).isNotNull()
    client = proc.isNotNull() & (proc != "nemesis")
    known_type = F.coalesce(F.col("type").isin(*OP_TYPES), F.lit(False))
    bad_client = client & (corrupt | ~known_type | F.col("f").isNull())
    row = raw.agg(
        F.count(F.when(proc == "nemesis", 1)).alias("nemesis_ops"),
        F.count(F.when(corrupt, 1)).alias("unparsed_lines"),
        F.count(F.when(bad_client, 1)).alias("malformed_client_ops"),
    ).first()
    return row.asDict() if row else {}


def _op_stats(ops: DataFrame, topic_partitions: list[int]) -> dict[str, Any]:
    """Op counts by kind, and which partitions completed their final read."""
    t, f = F.col("type"), F.col("f")

    def n(cond: Column) -> Column:
        return F.count(F.when(cond, 1))

    drain_done = (f == "drain") & (t == "ok") & (F.col("complete") == F.lit(True))
    row = ops.agg(
        *[n((f == "send") & (t == ty)).alias(f"send_{ty}") for ty in OP_TYPES],
        n((f == "poll") & (t == "ok")).alias("poll_ok"),
        n((f == "drain") & (t == "ok")).alias("drain_ok"),
        n((f == "send") & F.col("value").isNull()).alias("sends_without_value"),
        F.collect_set(F.when(drain_done, F.col("partition"))).alias("done"),
        F.collect_set(F.when(f.isin("send", "drain"), F.col("partition"))).alias("seen"),
    ).first().asDict()
    done = set(row.pop("done"))
    seen = set(row.pop("seen")) | set(topic_partitions)
    row["partitions_complete"] = sorted(done)
    row["partitions_incomplete"] = sorted(seen - done)
    return row


def _reads(ops: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(distinct (p, o, v) triples read by ok polls and drains, malformed record entries)."""
    entries = ops.filter(F.col("records").isNotNull()).select(
        "index", F.explode("records").alias("r"))
    well_formed = (F.size("r") == 3) & F.forall("r", lambda x: x.isNotNull())
    good = entries.filter(well_formed).select(
        F.get("r", 0).alias("p"), F.get("r", 1).alias("o"), F.get("r", 2).alias("v")).distinct()
    bad = entries.filter(~well_formed | F.col("r").isNull())
    return good, bad


def _anomalies(ops: DataFrame) -> dict[str, tuple[int, list[Any]]]:
    """kind -> (count, up to MAX_EXAMPLES smallest keys) for every kind with a non-zero count."""
    t, f = F.col("type"), F.col("f")
    sends = ops.filter((f == "send") & F.col("value").isNotNull())
    invoked = sends.filter(t == "invoke").select("value").distinct()
    failed = sends.filter(t == "fail").select("value").distinct()
    acked = sends.filter(t == "ok").select("value", "partition", "offset").distinct()
    done = (ops.filter((f == "drain") & (t == "ok") & (F.col("complete") == F.lit(True)))
            .select("partition", F.lit(True).alias("done")).distinct())
    reads, bad_records = _reads(ops)
    read_values = reads.select(F.col("v").alias("value")).distinct()

    # An acked value never read is lost if its partition's final read completed,
    # unseen otherwise (including when its partition is unknown).
    unread = (acked.join(read_values, "value", "left_anti")
              .join(F.broadcast(done), "partition", "left")
              .groupBy("value").agg(F.max(F.coalesce("done", F.lit(False))).alias("done")))
    mismatch = acked.join(
        reads, (acked["partition"] == reads["p"]) & (acked["offset"] == reads["o"])
        & (acked["value"] != reads["v"])
    ).select("value")
    duplicate = reads.groupBy("v").count().filter("count >= 2").select(F.col("v").alias("value"))
    inconsistent = reads.groupBy("p", "o").count().filter("count >= 2")

    def by_value(kind: str, df: DataFrame) -> DataFrame:
        return df.select(F.lit(kind).alias("kind"), F.array(F.col("value")).alias("k"))

    found = [
        by_value("acked", acked),
        by_value("lost", unread.filter("done")),
        by_value("unseen", unread.filter(~F.col("done"))),
        by_value("acked_offset_mismatch", mismatch),
        by_value("duplicate", duplicate),
        inconsistent.select(F.lit("inconsistent_offset").alias("kind"), F.array("p", "o").alias("k")),
        by_value("unexpected", read_values.join(invoked, "value", "left_anti")),
        by_value("failed_visible", failed.join(read_values, "value", "left_semi")),
        by_value(_VALUES_READ, read_values),
        bad_records.select(F.lit(_BAD_RECORDS).alias("kind"), F.array("index").alias("k")),
    ]
    union = found[0]
    for df in found[1:]:
        union = union.unionByName(df)
    # Keys are distinct within a kind, so count(*) is the number of distinct keys.
    rows = (union.distinct()
            .withColumn("rank", F.row_number().over(Window.partitionBy("kind").orderBy("k")))
            .withColumn("n", F.count(F.lit(1)).over(Window.partitionBy("kind")))
            .filter(F.col("rank") <= MAX_EXAMPLES)
            .collect())
    result: dict[str, tuple[int, list[Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["kind"], r["rank"])):
        n, examples = result.setdefault(row["kind"], (row["n"], []))
        examples.append(row["k"][0] if len(row["k"]) == 1 else list(row["k"]))
    return result


def _latency(ops: DataFrame) -> dict[str, dict[str, dict[str, float | int]]]:
    """f -> completion type -> {count, p50, p90, p99, max} in ms, for sends and polls."""
    lat = F.col("latency_ns")
    rows = (ops.filter(lat.isNotNull() & F.col("f").isin(*LATENCY_FS))
            .groupBy("f", "type")
            .agg(F.count(lat).alias("count"),
                 F.percentile_approx(lat, list(QUANTILES.values()), 10000).alias("q"),
                 F.max(lat).alias("max"))
            .collect())
    out: dict[str, dict[str, dict[str, float | int]]] = {}
    order = {ty: i for i, ty in enumerate(OP_TYPES)}
    for row in sorted(rows, key=lambda r: (LATENCY_FS.index(r["f"]), order[r["type"]])):
        entry: dict[str, float | int] = {"count": row["count"]}
        entry.update({name: _ms(q) for name, q in zip(QUANTILES, row["q"])})
        entry["max"] = _ms(row["max"])
        out.setdefault(row["f"], {})[row["type"]] = entry
    return out


def _ms(ns: int) -> float:
    return round(ns / NS_PER_MS, 3)
