"""The anomaly half of the Spark queue checker: every count of docs/checkers.md as DataFrames.

`anomalies(ops, done)` takes the parsed history (checkers/queue.py `parse`,
usable client ops only) and returns, per kind, the count and the
MAX_EXAMPLES smallest keys, in one Spark action. The records of ok polls and
drains are exploded once; from them

- reads and acks grouped by (partition, offset) (`at_offset`), then ordered
  by offset within each partition (one window, offsets descending): whether
  some read returned a higher offset of the partition (the read bound) and
  which known offset comes next above (for poll skips);
- poll records per stream (consumer process, stream number, partition), in
  history order (one window): consecutive offsets a then b;
- ok sends per (process, partition) in history order (one window): the
  highest earlier acked offset (nonmonotonic_send);
- everything known about each value, grouped by value.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from checkers.reference import MAX_EXAMPLES

# Pseudo-kinds computed in the same pass as the counts, reported under `stats`.
VALUES_READ = "_values_read"
BAD_RECORDS = "_malformed_records"

_FLAGS = ("invoked", "acked", "failed", "ack_done", "mismatch", "drained", "beyond")


def anomalies(ops: DataFrame, done: list[int]) -> dict[str, tuple[int, list[Any]]]:
    """kind -> (count, up to MAX_EXAMPLES smallest keys) for every kind with a non-zero count.

    `ops` are the usable client ops of `parse` (with its `stream` column),
    `done` the partitions whose final read completed.
    """
    t, f = F.col("type"), F.col("f")
    sends = ops.filter((f == "send") & F.col("value").isNotNull())
    acks = sends.filter((t == "ok") & F.col("partition").isNotNull() & F.col("offset").isNotNull())
    entries = ops.filter(F.col("records").isNotNull()).select(
        "index", F.col("process").cast("long").alias("process"), "stream",
        (f == "drain").alias("drained"), F.posexplode("records").alias("pos", "r"))
    well_formed = (F.size("r") == 3) & F.forall("r", lambda x: x.isNotNull())
    reads = entries.filter(well_formed).select(
        "index", "process", "stream", "pos", "drained",
        F.get("r", 0).alias("p"), F.get("r", 1).alias("o"), F.get("r", 2).alias("v"))
    bad_records = entries.filter(F.col("r").isNull() | ~well_formed)

    at_offset = _at_offset(reads, acks)
    # Per acked (p, o): was the ack contradicted by a read there, or passed by a read above it?
    judged_acks = at_offset.select(
        "read_above", F.explode(F.transform("acks", lambda a: F.struct(
            a.alias("value"), F.exists("reads", lambda r: r != a).alias("mismatch")))).alias("a"))
    judged_acks = judged_acks.filter(F.col("a.mismatch") | F.col("read_above")).select(
        "a.value", "a.mismatch", F.col("read_above").alias("beyond"))

    def fact(df: DataFrame, **flags: Column) -> DataFrame:
        loc = flags.pop("loc", F.lit(None))
        return df.select("value", *[flags.get(c, F.lit(False)).alias(c) for c in _FLAGS],
                         loc.cast("struct<p:bigint,o:bigint>").alias("loc"))

    facts = (
        fact(sends, invoked=t == "invoke", acked=t == "ok", failed=t == "fail",
             ack_done=(t == "ok") & F.coalesce(F.col("partition").isin(done), F.lit(False)))
        .unionByName(fact(reads.withColumnRenamed("v", "value"), loc=F.struct("p", "o"),
                          drained=F.col("drained")))
        .unionByName(fact(judged_acks, mismatch=F.col("mismatch"), beyond=F.col("beyond"))))
    per_value = facts.groupBy("value").agg(
        *[F.max(c).alias(c) for c in _FLAGS], F.size(F.collect_set("loc")).alias("locations"))

    v, read = F.col, F.col("locations") > 0
    # Lost: (1) its partition's final read completed without it, even if a consumer
    # read it earlier (the log lost it after that, e.g. to a power failure); or (2)
    # by the read bound: never read, while a read returned a higher offset of its
    # partition. Unseen: never read, and neither rule applies.
    kinds = {
        "acked": v("acked"),
        "lost": (v("acked") & ~v("drained") & v("ack_done")) | (v("beyond") & ~read),
        "unseen": v("acked") & ~read & ~v("ack_done") & ~v("beyond"),
        "acked_offset_mismatch": v("mismatch") & v("acked"),
        "duplicate": v("locations") >= 2,
        "unexpected": read & ~v("invoked"),
        "failed_visible": read & v("failed"),
        VALUES_READ: read,
    }
    by_value = per_value.select(F.explode(F.filter(
        F.array(*[F.when(cond, F.lit(kind)) for kind, cond in kinds.items()]),
        lambda k: k.isNotNull())).alias("kind"), F.array("value").alias("k"))
    keyed = (by_value
             .unionByName(at_offset.filter(F.size("reads") >= 2).select(
                 F.lit("inconsistent_offset").alias("kind"), F.array("p", "o").alias("k")))
             .unionByName(_poll_anomalies(reads, at_offset))
             .unionByName(_nonmonotonic_sends(acks))
             .unionByName(bad_records.select(
                 F.lit(BAD_RECORDS).alias("kind"), F.array("index").alias("k"))))
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


def _at_offset(reads: DataFrame, acks: DataFrame) -> DataFrame:
    """One row per known (p, o): `reads` and `acks` (distinct values), `read_above` and `next_o`.

    `read_above`: some read returned an offset of p greater than o.
    `next_o`: the smallest known offset of p greater than o (null if none).
    Both come from one window over p by descending offset, whose frames only
    grow, so it stays linear.
    """
    grouped = (
        reads.select("p", "o", F.col("v").alias("read"), F.lit(None).cast("long").alias("acked"))
        .unionByName(acks.select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                 F.lit(None).cast("long").alias("read"), F.col("value").alias("acked")))
        .groupBy("p", "o")
        .agg(F.collect_set("read").alias("reads"), F.collect_set("acked").alias("acks")))
    down = Window.partitionBy("p").orderBy(F.col("o").desc())
    return grouped.select(
        "p", "o", "reads", "acks",
        F.coalesce(F.max(F.size("reads") > 0).over(down.rowsBetween(Window.unboundedPreceding, -1)),
                   F.lit(False)).alias("read_above"),
        F.lag("o").over(down).alias("next_o"))


def _poll_anomalies(reads: DataFrame, at_offset: DataFrame) -> DataFrame:
    """(kind, [process, p, a, b]) rows, distinct, for poll_skip and nonmonotonic_poll.

    A stream is one consumer process's poll records of one partition between
    two resets (`stream` counts the resets before each op), in history order
    and, within a poll, listed order. A step a -> b with b <= a goes back; one
    with b > a + 1 is a skip if the next known offset above a is below b.
    """
    stream = Window.partitionBy("process", "stream", "p").orderBy("index", "pos")
    steps = (reads.filter(~F.col("drained"))
             .select("process", "p", F.lag("o").over(stream).alias("a"), F.col("o").alias("b"))
             .filter(F.col("a").isNotNull()))
    back = steps.filter(F.col("b") <= F.col("a")).select(
        F.lit("nonmonotonic_poll").alias("kind"), F.array("process", "p", "a", "b").alias("k"))
    gaps = steps.filter(F.col("b") > F.col("a") + 1)
    known = at_offset.select(F.col("p").alias("kp"), F.col("o").alias("ko"), "next_o")
    skip = (gaps.join(known, (F.col("p") == F.col("kp")) & (F.col("a") == F.col("ko")))
            .filter(F.col("next_o") < F.col("b"))
            .select(F.lit("poll_skip").alias("kind"), F.array("process", "p", "a", "b").alias("k")))
    return back.unionByName(skip).distinct()


def _nonmonotonic_sends(acks: DataFrame) -> DataFrame:
    """(kind, [value]) rows, distinct: acks at or below an earlier ack of their process and partition."""
    earlier = (Window.partitionBy("process", "partition").orderBy("index")
               .rowsBetween(Window.unboundedPreceding, -1))
    return (acks.select("value", "offset", F.max("offset").over(earlier).alias("high"))
            .filter(F.col("offset") <= F.col("high"))
            .select(F.lit("nonmonotonic_send").alias("kind"), F.array("value").alias("k"))
            .distinct())
