"""The kinds of the Spark queue checker beyond the per-value flags, and the times of every anomaly.

Helpers of checkers/queue_anomalies.py. Each fills `result[run][kind]` with
the count and the first `limit` anomalies by key, each with `acked_ns` (when
its value was acknowledged, if it was) and `exposed_ns` (when the history
first showed it). Every DataFrame that reaches the driver is bounded by
`limit` rows per run and kind.
"""
from __future__ import annotations

from collections import defaultdict
from functools import reduce
from typing import Any, Iterable

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.queue_anomalies import VALUE_KINDS, Found, Result
from checkers.reference import MAX_EXAMPLES

__all__ = ["collect_kinds", "count_frames", "detail_frames", "other_frames"]

# Offsets are grouped in blocks of this size to test "some offset lies strictly
# between a and b" by an equi-join on the block instead of a range join.
BLOCK = 1024


def _capped(df: DataFrame, kind: Column | str, order: list[str], limit: int) -> list[Any]:
    """The rows of `df` ranked 1..limit by `order` within each (run, kind)."""
    kind = F.col(kind) if isinstance(kind, str) else kind
    w = Window.partitionBy("run", kind).orderBy(*order)
    return df.withColumn("_rank", F.row_number().over(w)).filter(F.col("_rank") <= limit).collect()


def _add(result: Result, run: int, kind: str, key: Any, acked: int | None, exposed: int | None) -> None:
    result[run][kind].items.append({"key": key, "acked_ns": acked, "exposed_ns": exposed})


def collect_kinds(spark: SparkSession, judged: DataFrame, po: DataFrame, po_rows: DataFrame,
                  result: Result, limit: int) -> None:
    """The items of the per-value kinds (counts are already in `result`).

    acked: the MAX_EXAMPLES smallest values. lost: exposed by its partition's
    completed final read, or by the first read of a higher offset (read
    bound). duplicate: by the first read at its second location. unexpected,
    failed_visible: by its first read. unseen: never.
    """
    runs = [run for run, kinds in result.items() if kinds.get("acked")]
    acked = judged.filter("acked").select("run", "value", "at")
    if len(runs) <= 8:
        rows = [r for run in runs for r in acked.filter(F.col("run") == run)
                .orderBy("value").limit(MAX_EXAMPLES).collect()]
    else:
        rows = _capped(acked.withColumn("kind", F.lit("acked")), "kind", ["value"], MAX_EXAMPLES)
    for r in sorted(rows, key=lambda r: (r["run"], r["value"])):
        _add(result, r["run"], "acked", r["value"], r["at"], r["at"])

    kinds = VALUE_KINDS[1:]
    if not any(result[run].get(k) for run in result for k in kinds):
        return
    flagged = judged.filter(reduce(Column.__or__, [F.col(k) for k in kinds])).select(
        "run", "value", "at", "rt", "ap_min", "ao_min", "done_ns", "read_bound",
        F.explode(F.filter(F.array(*[F.when(F.col(k), F.lit(k)) for k in kinds]),
                           lambda k: k.isNotNull())).alias("kind"))
    rows = _capped(flagged, "kind", ["value"], limit)
    bound = [(r["run"], r["ap_min"], r["ao_min"]) for r in rows if r["kind"] == "lost" and r["read_bound"]]
    above = _first_read_above(spark, po, bound)
    dups = [(r["run"], r["value"]) for r in rows if r["kind"] == "duplicate"]
    second = _second_location(spark, po_rows, dups)
    for r in sorted(rows, key=lambda r: (r["run"], r["kind"], r["value"])):
        kind, run = r["kind"], r["run"]
        if kind == "lost":
            times = [r["done_ns"], above.get((run, r["ap_min"], r["ao_min"])) if r["read_bound"] else None]
            exposed = min((x for x in times if x is not None), default=None)
        elif kind == "duplicate":
            exposed = second.get((run, r["value"]))
        elif kind == "unseen":
            exposed = None
        else:
            exposed = r["rt"]
        _add(result, run, kind, r["value"], r["at"], exposed)


def _small_df(spark: SparkSession, rows: Iterable[tuple], schema: str) -> DataFrame:
    return F.broadcast(spark.createDataFrame(list(rows), schema))


def _first_read_above(spark: SparkSession, po: DataFrame,
                      keys: list[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
    """(run, p, o) -> the earliest first-read time of an offset of p above o, for `keys`."""
    if not keys:
        return {}
    want = _small_df(spark, set(keys), "run long, p long, o long")
    down = Window.partitionBy("run", "p").orderBy(F.col("o").desc()).rowsBetween(Window.unboundedPreceding, -1)
    rows = (po.join(want.select("run", "p").distinct(), ["run", "p"], "left_semi")
            .select("run", "p", "o", F.min("rt").over(down).alias("above"))
            .join(want, ["run", "p", "o"], "left_semi").collect())
    return {(r["run"], r["p"], r["o"]): r["above"] for r in rows if r["above"] is not None}


def _second_location(spark: SparkSession, po_rows: DataFrame,
                     values: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(run, value) -> when `value` was first read at its second location."""
    if not values:
        return {}
    want = _small_df(spark, set(values), "run long, rv long")
    firsts: dict[tuple[int, int], list[int]] = defaultdict(list)
    for r in po_rows.join(want, ["run", "rv"], "left_semi").collect():
        if r["rt"] is not None:
            firsts[(r["run"], r["rv"])].append(r["rt"])
    return {k: sorted(ts)[1] for k, ts in firsts.items() if len(ts) >= 2}


def other_frames(po: DataFrame, po_rows: DataFrame, reads: DataFrame, ops: DataFrame,
                 late: bool) -> tuple[dict[str, DataFrame], list[DataFrame]]:
    """The keyed rows of the kinds not judged per value, each with `run` and `kind` columns.

    inconsistent_offset (run, p, o): two values read at one offset.
    acked_offset_mismatch (run, value, p, o): a read at an acked value's
    offset returned another value. nonmonotonic_poll and poll_skip (run,
    process, p, a, b, time): a consumer stream's step from offset a to b that
    goes back, or skips a known offset. nonmonotonic_send (run, value, time):
    an ok send at or below an offset its process had been acknowledged
    earlier in that partition (the converter's `acked_before`), only if `late`.
    Returns the frames and the cached DataFrames to unpersist when done.
    """
    c = F.col
    inconsistent = po.filter(c("rv_min") != c("rv_max")).select("run", "p", "o")
    one_ack = po.filter((c("n_rv") > 0) & (c("av_min") == c("av_max"))
                        & ((c("rv_min") != c("av_min")) | (c("rv_max") != c("av_min"))))
    several = po.filter((c("n_rv") > 0) & (c("av_min") != c("av_max"))).select(
        "run", "p", "o", "rv_min", "rv_max")
    several_acks = (po_rows.filter(c("av").isNotNull()).join(F.broadcast(several), ["run", "p", "o"])
                    .filter((c("rv_min") != c("av")) | (c("rv_max") != c("av"))))
    mismatched = (one_ack.select("run", c("av_min").alias("value"), "p", "o")
                  .unionByName(several_acks.select("run", c("av").alias("value"), "p", "o"))
                  .groupBy("run", "value").agg(F.min(F.struct("p", "o")).alias("at_offset"))
                  .select("run", "value", "at_offset.p", "at_offset.o"))
    reordered = (ops.filter((c("f") == "send") & (c("type") == "ok") & c("value").isNotNull()
                       & (c("offset") <= c("acked_before")))
            .groupBy("run", "value").agg(F.min("time").alias("time")))
    frames = {"inconsistent_offset": inconsistent, "acked_offset_mismatch": mismatched}
    if late:
        frames["nonmonotonic_send"] = reordered
    frames = {k: df.withColumn("kind", F.lit(k)) for k, df in frames.items()}
    steps = _poll_steps(reads).persist()
    frames["poll"] = _poll_kinds(steps, po).persist()
    return frames, [frames["poll"], steps]


def count_frames(frames: dict[str, DataFrame], result: Result) -> None:
    """Count every frame's rows per (run, kind) in one action, into `result`."""
    counted = reduce(DataFrame.unionByName, [df.select("run", "kind") for df in frames.values()])
    for row in counted.groupBy("run", "kind").count().collect():
        result.setdefault(row["run"], {})[row["kind"]] = Found(row["count"])


def detail_frames(frames: dict[str, DataFrame], po_rows: DataFrame, pv: DataFrame,
                  result: Result, limit: int) -> None:
    """The items of the kinds in `frames` that have a non-zero count."""
    def has(*kinds: str) -> bool:
        return any(k in found for found in result.values() for k in kinds)

    if has("inconsistent_offset", "acked_offset_mismatch"):
        _offset_items(frames, po_rows, pv, result, limit)
    if has("poll_skip", "nonmonotonic_poll"):
        for r in sorted(_capped(frames["poll"], "kind", ["process", "p", "a", "b"], limit),
                        key=lambda r: (r["run"], r["kind"], r["process"], r["p"], r["a"], r["b"])):
            _add(result, r["run"], r["kind"], [r["process"], r["p"], r["a"], r["b"]], None, r["time"])
    if has("nonmonotonic_send") and "nonmonotonic_send" in frames:
        for r in sorted(_capped(frames["nonmonotonic_send"], "kind", ["value"], limit),
                        key=lambda r: (r["run"], r["value"])):
            _add(result, r["run"], "nonmonotonic_send", r["value"], r["time"], r["time"])


def _offset_items(frames: dict[str, DataFrame], po_rows: DataFrame, pv: DataFrame,
                  result: Result, limit: int) -> None:
    spark = pv.sparkSession
    bad = _capped(frames["inconsistent_offset"], "kind", ["p", "o"], limit)
    wrong = _capped(frames["acked_offset_mismatch"], "kind", ["value"], limit)
    keys = {(r["run"], r["p"], r["o"]) for r in bad + wrong}
    reads_at: dict[tuple[int, int, int], list[tuple[int, int]]] = defaultdict(list)
    if keys:
        want = _small_df(spark, keys, "run long, p long, o long")
        for r in po_rows.filter(F.col("rv").isNotNull()).join(want, ["run", "p", "o"], "left_semi").collect():
            reads_at[(r["run"], r["p"], r["o"])].append((r["rt"], r["rv"]))
    ack_time = {}
    if wrong:
        want = _small_df(spark, {(r["run"], r["value"]) for r in wrong}, "run long, value long")
        ack_time = {(r["run"], r["value"]): r["at"] for r in pv.join(want, ["run", "value"], "left_semi")
                    .select("run", "value", "at").collect()}
    for r in sorted(bad, key=lambda r: (r["run"], r["p"], r["o"])):
        firsts = sorted(t for t, _ in reads_at[(r["run"], r["p"], r["o"])] if t is not None)
        _add(result, r["run"], "inconsistent_offset", [r["p"], r["o"]], None,
             firsts[1] if len(firsts) > 1 else None)
    for r in sorted(wrong, key=lambda r: (r["run"], r["value"])):
        other = [t for t, v in reads_at[(r["run"], r["p"], r["o"])] if v != r["value"] and t is not None]
        _add(result, r["run"], "acked_offset_mismatch", r["value"], ack_time.get((r["run"], r["value"])),
             min(other, default=None))


def _poll_steps(reads: DataFrame) -> DataFrame:
    """(run, process, p, a, b, time): every step of a consumer stream from offset a to b that is
    not b = a + 1. Within one poll, consecutive records of a partition are neighbours in its
    records array; only the first and last record of each run of a partition go through a
    window over the stream."""
    c = F.col
    polls = reads.filter(~c("drained"))
    step = ["run", "process", "p", "a", "b", "time"]
    inside = polls.filter(c("prev_p") == c("p")).select(
        "run", "process", "p", c("prev_o").alias("a"), c("o").alias("b"), "time")
    starts = c("prev_p").isNull() | (c("prev_p") != c("p"))
    ends = c("next_p").isNull() | (c("next_p") != c("p"))
    stream = Window.partitionBy("run", "process", "stream", "p").orderBy("index", "pos")
    across = (polls.filter(starts | ends)
              .select("run", "process", "p", F.lag("o").over(stream).alias("a"), c("o").alias("b"), "time",
                      starts.alias("start"))
              .filter(c("start") & c("a").isNotNull()).select(*step))
    return inside.unionByName(across).filter(c("b") != c("a") + 1)


def _poll_kinds(steps: DataFrame, po: DataFrame) -> DataFrame:
    """(run, kind, process, p, a, b, time) for nonmonotonic_poll (b <= a) and poll_skip (b > a + 1
    with a known offset between), distinct, `time` the first poll that made the step."""
    c = F.col
    step = ["run", "process", "p", "a", "b", "time"]
    back = steps.filter(c("b") <= c("a")).withColumn("kind", F.lit("nonmonotonic_poll"))
    gaps = steps.filter(c("b") > c("a") + 1)
    blocks = gaps.select(*step, F.explode(F.sequence(F.floor((c("a") + 1) / BLOCK),
                                                     F.floor((c("b") - 1) / BLOCK))).alias("blk"))
    known = po.select("run", c("p"), c("o").alias("k"), F.floor(c("o") / BLOCK).alias("blk"))
    skips = (known.join(F.broadcast(blocks), ["run", "p", "blk"])
             .filter((c("k") > c("a")) & (c("k") < c("b")))
             .select(*step).withColumn("kind", F.lit("poll_skip")))
    return (back.unionByName(skips).groupBy("run", "kind", "process", "p", "a", "b")
            .agg(F.min("time").alias("time")))
