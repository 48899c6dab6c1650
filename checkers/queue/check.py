"""The queue checker: were acknowledged sends kept, and did reads agree with each other?

Every count is computed by Spark tasks over the history's Parquet form and its
bucket layout; the driver only receives counts, at most `limit`
anomalies per kind, the partition lists, per-second and per-epoch send
counts, latency samples and the nemesis lines. Definitions are in
docs/checkers.md. `check_many` checks several histories in the same two jobs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from kchaos.checkers.outages import outages
from kchaos.checkers.parquet import convert
from kchaos.checkers.queue.anomalies import VALUES_READ, Found, anomalies
from kchaos.checkers.queue.line_tasks import OP_TYPES, quantiles
from kchaos.checkers.queue.reference import COUNTS, MAX_EXAMPLES, verdict
from kchaos.checkers.queue.timeline import timelines
from kchaos.checkers.spark import spark_context
from kchaos.core.faults import FaultCatalogue, read_faults
from kchaos.core.promise import Promise

__all__ = ["COUNTS", "MAX_EXAMPLES", "QueueChecker", "judge"]

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
LATENCY_FS = ("send", "poll")
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
MAX_SECONDS = 3600  # rows of the per-second series per run, at most
TIMELINE_LIMIT = 10_000  # anomalies per kind listed with their times
STAT_KEYS = ("nemesis_ops", "unparsed_lines", "malformed_client_ops", *(f"send_{ty}" for ty in OP_TYPES),
             "poll_ok", "drain_ok", "malformed_records")

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
        loss, as the reference checker does. `test` may be empty: missing
        settings take the harness's defaults (idempotence off). `timeline` is
        the section `timelines` makes: fault windows, availability, and each
        anomaly (up to `limit` per kind) with when it was acked and exposed,
        and its `outages` (`checkers.outages`: availability as time);
        the roles of fault ops come from faults.json beside the history
        (`read_faults`: FaultsError when it is malformed, or missing while the
        history has nemesis lines).
        """
        return self.check_many([(test, Path(history_path))])[0]

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` for several histories at once: the same Spark jobs over all of them, one result each."""
        if not runs:
            return []
        sc = spark_context(self.master)
        parquets = [convert(Path(path).resolve(), validate=False) for _, path in runs]
        found, done, lines = anomalies(sc, parquets, self.limit)
        out = []
        for i, (test, path) in enumerate(runs):
            stats, latency, series = _summaries(lines[i], _topic_partitions(test), set(done.get(i, {})))
            faults = read_faults(Path(path).parent, lines[i]["events"])
            out.append(self._result(test, stats, latency, found.get(i, {}), series, lines[i]["events"], faults,
                                    _acks(lines[i])))
        return out

    @staticmethod
    def _result(test: dict[str, Any], stats: dict[str, Any], latency: Latency, found: dict[str, Found],
                series: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                events: list[dict[str, Any]], faults: FaultCatalogue,
                acks: tuple[list[float], float | None, float | None]) -> dict[str, Any]:
        settings = Promise.of(test)
        counts = {k: found[k].count if k in found else 0 for k in COUNTS}
        examples = {k: [item["key"] for item in found[k].items[:MAX_EXAMPLES]] for k in COUNTS if counts[k]}
        stats = {k: v for k, v in stats.items() if k != "span_ns"}
        stats["values_read"] = found[VALUES_READ].count if VALUES_READ in found else 0
        malformed = stats["malformed_client_ops"] + stats["malformed_records"]
        promised = settings.no_loss
        per_epoch, per_second = series
        anomalies_ = {k: found[k].items for k in COUNTS if k != "acked" and counts[k]}
        timeline = timelines(events, per_epoch, per_second, anomalies_, faults)
        timeline["outages"] = outages(*acks, timeline["windows"])
        return {"valid": judge(counts, settings.idempotence, malformed), "counts": counts,
                "examples": examples,
                "loss": {"acks": settings.acks, "promised": promised,
                         "expected_by_configuration": bool(counts["lost"]) and not promised},
                "stats": stats, "latency_ms": latency, "idempotence": settings.idempotence,
                "timeline": timeline}


def judge(counts: dict[str, int], idempotent: bool, malformed: int = 0) -> bool | str:
    """False if an invalid anomaly was counted, else "unknown" if unseen or malformed, else True.

    The reference checker's verdict: duplicate and
    nonmonotonic_send are invalid only under idempotence (without it a retried
    send may legitimately be written twice, or reordered).
    """
    return verdict(counts, idempotent, malformed)


def _acks(lines: dict[str, Any]) -> tuple[list[float], float | None, float | None]:
    """The run's acknowledgement times, to the hundredth of a second, and its first and last send, in seconds."""
    first, last = lines["send_first"], lines["send_last"]
    return ([int(c) / 100 for c in lines["ack_cs"]], None if first is None else first / NS_PER_S,
            None if last is None else last / NS_PER_S)


def _topic_partitions(test: dict[str, Any]) -> list[int]:
    n = (test.get("topic") or {}).get("partitions")
    return list(range(n)) if isinstance(n, int) and not isinstance(n, bool) else []


def _summaries(lines: dict[str, Any], topic_partitions: list[int], done: set[int]
               ) -> tuple[dict[str, Any], Latency, tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(stats, latency_ms, (sends per epoch, sends per second)) of one run from its merged line results.

    Seconds are widened so a run has at most MAX_SECONDS of them (a synthetic
    history may span days); a send is placed by its invocation.
    """
    stats: dict[str, Any] = {k: lines.get(k, 0) for k in STAT_KEYS}
    stats["partitions_complete"] = sorted(done)
    stats["partitions_incomplete"] = sorted((lines["seen"] | set(topic_partitions)) - done)
    latency: Latency = {}
    for (fn, ty), samples in sorted(lines["latency"].items()):
        count = int(sum(s[1].sum() for s in samples))
        if count:
            qs = quantiles(samples, [*QUANTILES.values(), 1.0])
            entry: dict[str, float | int] = {"count": count}
            # cast: with count > 0 every quantile exists (quantiles gives None only for no samples)
            entry.update({name: _ms(cast(float, q)) for name, q in zip(QUANTILES, qs)})
            entry["max"] = _ms(max(s[0][-1] for s in samples if len(s[0])))
            latency.setdefault(fn, {})[ty] = entry
    names = ("invoked", "ok", "fail", "info")
    per_epoch = [{"epoch": e, **dict(zip(names, map(int, c)))} for e, c in sorted(lines["per_epoch"].items())]
    span = (lines["tmax"] - lines["tmin"]) if lines["tmin"] is not None else 0
    width = max(1, -(-span // (MAX_SECONDS * NS_PER_S)))
    seconds: dict[int, list] = {}
    for sec, counts in lines["per_second"].items():
        seconds.setdefault(sec // width, [0, 0, 0, 0, []])
        for i in range(4):
            seconds[sec // width][i] += int(counts[i])
    for sec, samples in lines["second_latency"].items():
        seconds.setdefault(sec // width, [0, 0, 0, 0, []])[4].extend(samples)
    per_second = []
    for sec in sorted(seconds):
        *counts, samples = seconds[sec]
        row: dict[str, float | None] = {"second": sec * width, **dict(zip(names, counts))}
        qs = quantiles(samples, list(QUANTILES.values()))
        row.update({name: None if q is None else round(q / NS_PER_MS, 3) for name, q in zip(QUANTILES, qs)})
        top = max((s[0][-1] for s in samples if len(s[0])), default=None)
        row["max"] = None if top is None else round(top / NS_PER_MS, 3)
        per_second.append(row)
    return stats, latency, (per_epoch, per_second)


def _ms(ns: float) -> float:
    return round(ns / NS_PER_MS, 3)
