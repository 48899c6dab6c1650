"""The anomaly half of the Spark queue checker: every count of docs/checkers.md as DataFrames.

`anomalies(ops, done, limit)` takes the parsed history of one or more runs
(checkers/queue.py `parse`: usable client ops, a `run` column) and returns,
per run and kind, the count and up to `limit` anomalies (smallest keys
first) with when each was acknowledged and exposed.

Built for 10M-line histories on two cores, where a Spark shuffle costs about
a second per million rows: only fixed-width aggregates (min/max/count, never
collect_set), two big groupings, and windows only over small sets.

- per value (`pv`): everything its sends and reads say, one grouping of the
  sends and the exploded read records; a value's read locations are told
  apart by the min and max of their partition and offset;
- per offset (`po`): one row per value location and acknowledgement, from
  `pv` (plus the raw reads of the few values read at two places), grouped by
  (run, partition, offset): distinct read values by min/max, first read time;
- poll steps: within one poll, consecutive records of a partition are
  neighbours in its records array; only the first and last record of each
  run of a partition go through a window over the consumer's stream;
- nonmonotonic sends come from the converter's `acked_before` column.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

__all__ = ["Found", "VALUES_READ", "VALUE_KINDS", "anomalies"]

# Pseudo-kinds computed in the same pass as the counts, reported under `stats`.
VALUES_READ = "_values_read"
VALUE_KINDS = ("acked", "lost", "unseen", "duplicate", "unexpected", "failed_visible")
_ANOMALOUS_VALUE_KINDS = VALUE_KINDS[1:]
_KEY = "struct<p:bigint,o:bigint>"


@dataclass
class Found:
    """One kind in one run: how many, and the first `limit` (by key) with their times in ns."""

    count: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)  # {"key", "acked_ns", "exposed_ns"}


Result = dict[int, dict[str, Found]]  # run -> kind -> Found


def _b(c: str) -> Column:
    return F.coalesce(F.col(c), F.lit(False))


def anomalies(ops: DataFrame, done: DataFrame, limit: int, late: bool = True) -> Result:
    """run -> kind -> Found for every kind with a non-zero count (and `acked`'s smallest keys).

    `ops` are the usable client ops of `parse`; `done` has one row (run, p,
    done_ns) per partition whose final read completed, with its time.
    `late`: whether some ok send landed at or below an earlier ack of its
    process (else nonmonotonic_send is not looked for).
    """
    spark = ops.sparkSession
    t, f = F.col("type"), F.col("f")
    sends = ops.filter((f == "send") & F.col("value").isNotNull())
    located = (t == "ok") & F.col("partition").isNotNull() & F.col("offset").isNotNull()
    reads = _reads(ops)
    facts = sends.select(
        "run", "value", (t == "invoke").alias("invoked"), (t == "ok").alias("acked"),
        (t == "fail").alias("failed"), F.when(located, F.col("partition")).alias("ap"),
        F.when(located, F.col("offset")).alias("ao"), F.when(t == "ok", F.col("time")).alias("at"),
        # The partition of an ack, even one without an offset (acks=0): its final read decides.
        F.when(t == "ok", F.col("partition")).alias("dp"),
    ).unionByName(reads.select(
        "run", F.col("v").alias("value"), F.lit(True).alias("read"), "drained",
        F.col("p").alias("rp"), F.col("o").alias("ro"), F.col("time").alias("rt")),
        allowMissingColumns=True)
    pv = facts.groupBy("run", "value").agg(
        *[F.max(c).alias(c) for c in ("invoked", "acked", "failed", "read", "drained")],
        *[agg(c).alias(f"{c}_{name}") for c in ("ap", "ao", "rp", "ro")
          for name, agg in (("min", F.min), ("max", F.max))],
        F.min("at").alias("at"), F.min("rt").alias("rt"), F.min("dp").alias("dp"))
    pv = pv.select(
        "run", "value", "at", "rt", "dp", "ap_min", "ao_min", "rp_min", "ro_min",
        *[_b(c).alias(c) for c in ("invoked", "acked", "failed", "read", "drained")],
        # Read at exactly one location; acknowledged at more than one (ack_multi).
        ((F.col("rp_min") == F.col("rp_max")) & (F.col("ro_min") == F.col("ro_max"))).alias("single"),
        ((F.col("ap_min") != F.col("ap_max")) | (F.col("ao_min") != F.col("ao_max"))).alias("ack_multi"),
    ).persist()
    cached = [pv]
    try:
        twice = pv.agg(F.count(F.when(F.col("read") & ~F.col("single"), 1)).alias("reads"),
                       F.count(F.when(F.col("ack_multi"), 1)).alias("acks")).first()
        po_rows, extra = _offset_rows(pv, reads, sends.filter(located), twice["reads"] > 0, twice["acks"] > 0)
        cached += extra
        po = po_rows.groupBy("run", "p", "o").agg(
            F.count("rv").alias("n_rv"), F.min("rv").alias("rv_min"), F.max("rv").alias("rv_max"),
            F.count("av").alias("n_av"), F.min("av").alias("av_min"), F.max("av").alias("av_max"),
            F.min("rt").alias("rt")).persist()
        cached.append(po)
        return _judge(spark, ops, pv, po, po_rows, reads, done, limit, late)
    finally:
        for df in cached:
            df.unpersist()


def _reads(ops: DataFrame) -> DataFrame:
    """The well-formed read records, with their neighbours in the same op.

    Columns: run, index, time, process, stream, drained, pos, p, o, v, and
    prev_p/prev_o, next_p (the records listed before and after in the op).
    """
    with_records = ops.filter(F.size("records") > 0)
    n = F.size("records")
    nothing = F.array(F.lit(None).cast("array<bigint>"))
    zipped = F.arrays_zip(
        F.col("records").alias("r"),
        F.concat(nothing, F.slice("records", 1, n - 1)).alias("prev"),
        F.concat(F.slice("records", 2, n), nothing).alias("next"))
    entries = with_records.select(
        "run", "index", "time", F.col("process").cast("long").alias("process"), "stream",
        (F.col("f") == "drain").alias("drained"), F.posexplode(zipped).alias("pos", "e"))
    r = F.col("e.r")
    well_formed = F.coalesce((F.size(r) == 3) & F.forall(r, lambda x: x.isNotNull()), F.lit(False))
    reads = entries.filter(well_formed).select(
        "run", "index", "time", "process", "stream", "drained", "pos",
        F.get(r, 0).alias("p"), F.get(r, 1).alias("o"), F.get(r, 2).alias("v"),
        F.get("e.prev", 0).alias("prev_p"), F.get("e.prev", 1).alias("prev_o"),
        F.get("e.next", 0).alias("next_p"))
    return reads


def _offset_rows(pv: DataFrame, reads: DataFrame, acks: DataFrame, read_twice: bool,
                 acked_twice: bool) -> tuple[DataFrame, list[DataFrame]]:
    """(run, p, o, rv, rt, av): each value where it was read (rv, first read time rt) and acked (av).

    The raw reads (acks) are looked at again only if some value was read
    (acked) at two places: `read_twice` (`acked_twice`). Returns the rows and
    the cached DataFrames to unpersist when done.
    """
    cols = ("run", "p", "o", "rv", "rt", "av")
    null = F.lit(None).cast("bigint")
    at_read = (F.col("single") & ~F.coalesce(F.col("ack_multi"), F.lit(False))
               & (F.col("ap_min") == F.col("rp_min")) & (F.col("ao_min") == F.col("ro_min")))
    read_once = pv.filter("single").select(
        "run", F.col("rp_min").alias("p"), F.col("ro_min").alias("o"), F.col("value").alias("rv"),
        "rt", F.when(at_read, F.col("value")).alias("av"))
    acked_elsewhere = pv.filter(F.col("ap_min").isNotNull() & ~F.coalesce(at_read, F.lit(False))
                                & ~F.coalesce(F.col("ack_multi"), F.lit(False))).select(
        "run", F.col("ap_min").alias("p"), F.col("ao_min").alias("o"), null.alias("rv"),
        null.alias("rt"), F.col("value").alias("av"))
    # The few values read at several locations, or acked at several, from the raw rows.
    rows = read_once.select(*cols).unionByName(acked_elsewhere.select(*cols))
    # These few rows are kept once computed: several later queries look at them.
    extra = []
    if read_twice:
        dup = F.broadcast(pv.filter(F.col("read") & ~F.col("single")).select("run", F.col("value").alias("v")))
        extra.append(reads.join(dup, ["run", "v"], "left_semi").groupBy("run", "p", "o", "v")
                     .agg(F.min("time").alias("rt"))
                     .select("run", "p", "o", F.col("v").alias("rv"), "rt", null.alias("av")).persist())
    if acked_twice:
        multi = F.broadcast(pv.filter(F.col("ack_multi")).select("run", "value"))
        extra.append(acks.join(multi, ["run", "value"], "left_semi").select(
            "run", F.col("partition").alias("p"), F.col("offset").alias("o"), null.alias("rv"),
            null.alias("rt"), F.col("value").alias("av")).persist())
    for df in extra:
        rows = rows.unionByName(df)
    return rows, extra


def _judge(spark: SparkSession, ops: DataFrame, pv: DataFrame, po: DataFrame, po_rows: DataFrame,
           reads: DataFrame, done: DataFrame, limit: int, late: bool) -> Result:
    from checkers.queue_detail import collect_kinds, count_frames, detail_frames, other_frames

    high = F.broadcast(po.filter(F.col("n_rv") > 0).groupBy("run", "p").agg(F.max("o").alias("high"))
                       .withColumnRenamed("p", "ap_min"))
    fin = F.broadcast(done.withColumnRenamed("p", "dp"))
    v = pv.join(high, ["run", "ap_min"], "left").join(fin, ["run", "dp"], "left")
    c = F.col
    beyond = F.coalesce(c("ao_min") < c("high"), F.lit(False))
    ack_done = c("acked") & c("done_ns").isNotNull()
    kinds = {
        "acked": c("acked"),
        # Lost: (1) its partition's final read completed without it, even if a consumer
        # read it earlier (the log lost it after that, e.g. to a power failure); or (2)
        # by the read bound: never read, while a read returned a higher offset of its
        # partition. Unseen: never read, and neither rule applies.
        "lost": (ack_done & ~c("drained")) | (beyond & ~c("read")),
        "unseen": c("acked") & ~c("read") & ~ack_done & ~beyond,
        "duplicate": c("read") & ~c("single"),
        "unexpected": c("read") & ~c("invoked"),
        "failed_visible": c("read") & c("failed"),
        VALUES_READ: c("read"),
    }
    judged = v.select("run", "value", "at", "rt", "ap_min", "ao_min", "done_ns",
                      (beyond & ~c("read")).alias("read_bound"),
                      *[cond.alias(k) for k, cond in kinds.items()])
    result: Result = {}
    rows = judged.groupBy("run").agg(*[F.count(F.when(c(k), 1)).alias(k) for k in kinds]).collect()
    for row in rows:
        result[row["run"]] = {k: Found(row[k]) for k in kinds if row[k]}
    frames, cached = other_frames(po, po_rows, reads, ops, late)
    try:
        count_frames(frames, result)
        collect_kinds(spark, judged, po, po_rows, result, limit)
        detail_frames(frames, po_rows, pv, result, limit)
    finally:
        for df in cached:
            df.unpersist()
    return {run: {k: found for k, found in kinds_.items() if found.count} for run, kinds_ in result.items()}
