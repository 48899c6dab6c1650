"""A workload's part of report.html: what it read from the run's history, its plots, and the template that shows
them (`WorkloadKind.report`).

The template defines four macros that report.html.j2 calls with the page's context: `headline()` (the verdict
line's numbers), `body()` (where the plots and the workload's own tables go), `intro()` (the paragraph above the
anomaly table) and `after_anomalies()` (the queue's availability; empty where nothing follows). The queue's,
txn's and copy's sections are built here; a workload of its own may build one from any template of the report's
environment (`kchaos.reports.html.ENV`).
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from jinja2 import Template

from kchaos.checkers.outages import outages_of
from kchaos.checkers.parquet import CheckInputError, convert
from kchaos.checkers.txn.reference import isolation_of
from kchaos.core.faults import FaultCatalogue
from kchaos.evidence.explain.txn import load_txn_explanation
from kchaos.evidence.explain.txn_text import txn_story, txn_summary
from kchaos.reports.run import plots, read_plots, txn_plots
from kchaos.reports.run.copy_data import read_copy_run
from kchaos.reports.run.reads import Reads, lag_series, read_reads, unseen_series
from kchaos.reports.run.txn_cycles import anchor
from kchaos.reports.run.txn_data import Rebalance, read_rebalances, read_txn_run

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
_COLUMNS = ["time", "process", "type", "f", "partition", "value", "offset", "latency_ns", "epoch", "index",
            "nemesis", "detail", "error", "records"]
_ROWS = ("send", "poll", "drain")  # the client ops the queue's section reads; and every nemesis line
# Draws the section's plots: (fault windows, catalogue, rebalance times, results.json's counts) -> name -> PNG.
Draw = Callable[[list[dict[str, Any]], FaultCatalogue, list[float], Mapping[str, Any]], dict[str, Any]]


@dataclass
class Section:
    """A workload's part of report.html. `data` is what its template reads (the queue's plots.Sends, a txn
    run's TxnRun, a copy run's CopyRun); `events` the history's nemesis ops; `per_epoch` its sends per epoch
    (the availability input when results.json has none); `latency` per completion type when results.json has
    none; `ops` the ops its examples link to (op index -> op with its history lines); `context` its template's
    own variables."""

    template: str | Template
    unit: str  # what its latency table measures: "send", "transaction", ...
    data: Any
    draw: Draw
    events: list[dict[str, Any]] = field(default_factory=list)
    rebalances: list[Rebalance] = field(default_factory=list)
    per_epoch: list[dict[str, Any]] = field(default_factory=list)
    latency: dict[str, Any] = field(default_factory=dict)
    ops: Mapping[int, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)


def latency_table(latency_ms: np.ndarray, types: np.ndarray) -> dict[str, Any]:
    """Per completion type, the count, quantiles and max of `latency_ms` (NaN: no latency, left out)."""
    out = {}
    for k in plots.TYPES:
        lat = np.sort(latency_ms[(types == k) & np.isfinite(latency_ms)])
        if len(lat):
            # Like the checker's: a latency that occurred, the smallest with >= q of them at or below it.
            out[k] = {"count": len(lat), **{name: round(float(lat[max(0, int(np.ceil(q * len(lat))) - 1)]), 3)
                                            for name, q in QUANTILES}, "max": round(float(lat[-1]), 3)}
    return out


# --- the queue: sends, from the history's Parquet form ---

def _read_history(history: Path) -> pa.Table:
    try:
        out = convert(history)
    except CheckInputError:
        out = convert(history, validate=False)  # malformed: still plot what can be read
    t = pq.read_table(out, columns=_COLUMNS)
    return t.filter(pc.fill_null(pc.or_(pc.is_in(t["f"], value_set=pa.array(_ROWS)),
                                        pc.equal(t["process"], "nemesis")), False))


def _np(col: pa.ChunkedArray, fill: Any) -> np.ndarray:
    return col.fill_null(fill).to_numpy()


def read_sends(t: pa.Table) -> tuple[plots.Sends, list[dict[str, Any]]]:
    """The completed sends, and per-epoch send counts (the checker's availability input)."""
    s = t.filter(pc.equal(t["f"], "send"))
    kind = _np(s["type"], "").astype(object)
    epoch = _np(s["epoch"], -1)
    per_epoch = pd.crosstab(epoch, kind, rownames=["epoch"]).reindex(columns=["invoke", "ok", "fail", "info"],
                                                                     fill_value=0).rename(columns={"invoke": "invoked"})
    done = (kind != "invoke") & s["latency_ns"].is_valid().to_numpy(zero_copy_only=False)
    time, lat = _np(s["time"], 0)[done], _np(s["latency_ns"], 0)[done]
    sends = plots.Sends(invoke_s=(time - lat) / 1e9, done_s=time / 1e9, latency_ms=lat / 1e6, type=kind[done],
                        partition=_np(s["partition"], plots.NULL)[done], value=_np(s["value"], plots.NULL)[done],
                        offset=_np(s["offset"], plots.NULL)[done])
    return sends, per_epoch.reset_index().to_dict("records")


def _events(t: pa.Table) -> list[dict[str, Any]]:
    rows = t.filter(pc.equal(t["process"], "nemesis")).select(
        ["index", "time", "type", "f", "nemesis", "epoch", "detail"]).to_pylist()
    for r in rows:
        try:
            r["detail"] = json.loads(r["detail"]) if r["detail"] else {}
        except ValueError:
            r["detail"] = {}
        r["epoch"] = r["epoch"] or 0
    return [r for r in rows if r["time"] is not None and r["index"] is not None and r["f"] and r["type"]]


def anomaly_marks(results: Mapping[str, Any] | None) -> plots.Marks:
    """What the offsets plot marks, from results.json: the keys of timeline.anomalies and of examples."""
    r = results or {}
    anomalies = (r.get("timeline") or {}).get("anomalies") or {}
    examples = r.get("examples") or {}

    def keys(kind: str) -> list:
        return [a.get("key") for a in anomalies.get(kind) or []] + list(examples.get(kind) or [])

    values = lambda kind: sorted({k for k in keys(kind) if isinstance(k, int)})  # noqa: E731
    pairs = {tuple(k) for k in keys("inconsistent_offset") if isinstance(k, list) and len(k) == 2}
    exposed = {tuple(a["key"]): a.get("exposed_s") for a in anomalies.get("inconsistent_offset") or []
               if isinstance(a.get("key"), list) and len(a["key"]) == 2}
    return plots.Marks(lost=values("lost"), mismatch=values("acked_offset_mismatch"), inconsistent=sorted(pairs),
                       exposed_s=exposed, counts=r.get("counts") or {})


def sends_section(sends: plots.Sends, results: Mapping[str, Any] | None, events: list[dict[str, Any]] | None = None,
                  per_epoch: list[dict[str, Any]] | None = None, rebalances: list[Rebalance] | None = None,
                  consumed: Consumed | None = None) -> Section:
    """The send plots (latency, throughput, the sends' errors per second, acknowledged offsets) of `sends`, and
    with `consumed` the read plots (unseen writes, realtime lag): the queue's section, and any run's whose history
    could not be read (with no sends)."""
    stretches = outages_of(results).get("stretches") or []

    def draw(w: list[dict[str, Any]], c: FaultCatalogue, rb: list[float], counts: Mapping[str, Any]
             ) -> dict[str, Any]:
        out: dict[str, bytes] = {"latency": plots.latency_png(sends, w, catalogue=c, rebalances=rb),
               "latency_quantiles": plots.latency_quantiles_png(sends, w, catalogue=c, rebalances=rb),
               "throughput": plots.throughput_png(sends, w, catalogue=c, rebalances=rb, outages=stretches),
               "offsets": plots.offsets_png(sends, w, anomaly_marks(results), catalogue=c, rebalances=rb)}
        if consumed is not None:
            out.update(consumed.draw(sends, w, c, rb))
        return out

    return Section("queue.html.j2", "send", sends, draw, events=list(events or []), rebalances=list(rebalances or []),
                   per_epoch=list(per_epoch or []), latency=latency_table(sends.latency_ms, sends.type))


@dataclass(frozen=True)
class Consumed:
    """What a queue run read, with what its read plots need beside the sends: the failed and unknown sends'
    completion times and errors, the consumers' assignments (subscribe mode's rebalances; none in assign mode,
    where each consumer reads every partition), the topic's partitions and when the final read began."""

    reads: Reads
    error_s: np.ndarray
    errors: np.ndarray
    assignments: list[Rebalance]
    partitions: list[int]
    final_read_s: float | None

    def draw(self, sends: plots.Sends, w: list[dict[str, Any]], c: FaultCatalogue, rb: list[float]
             ) -> dict[str, bytes]:
        """The plots of unseen writes, of each consumer's realtime lag and of the sends' errors per second."""
        ok = sends.type == "ok"
        times, unseen = unseen_series(sends.value[ok], sends.done_s[ok], self.reads)
        lags = lag_series(sends.partition[ok], sends.offset[ok], sends.done_s[ok], self.reads, self.assignments,
                          self.partitions)
        return {"unseen": read_plots.unseen_png(times, unseen, w, catalogue=c, rebalances=rb,
                                                final_read_s=self.final_read_s),
                "lag": read_plots.lag_png(lags, w, catalogue=c, rebalances=rb),
                "errors": read_plots.errors_png(self.error_s, self.errors, w, catalogue=c, rebalances=rb,
                                                span=plots.time_span(sends)) if len(self.errors) else b""}


def queue_section(history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Section:
    """The queue's section: its sends and reads from the history's Parquet form, and a subscribe-mode run's
    rebalances."""
    t = _read_history(history)
    sends, per_epoch = read_sends(t)
    moves = read_rebalances(history) if (test.get("workload") or {}).get("consumer_mode") == "subscribe" else []
    failed = t.filter(pc.fill_null(pc.and_(pc.equal(t["f"], "send"),
                                           pc.is_in(t["type"], value_set=pa.array(["fail", "info"]))), False))
    drains = t.filter(pc.fill_null(pc.equal(t["f"], "drain"), False))["time"]
    n = (test.get("topic") or {}).get("partitions")
    consumed = Consumed(read_reads(t), _np(failed["time"], 0) / 1e9, _np(failed["error"], "").astype(object), moves,
                        list(range(n)) if isinstance(n, int) else [],
                        None if not len(drains) or drains.null_count == len(drains) else pc.min(drains).as_py() / 1e9)
    return sends_section(sends, results, _events(t), per_epoch, moves, consumed)


# --- transactions: the txn and copy workloads ---

def _txn_draw(done_s: np.ndarray, types: np.ndarray, latency_ms: np.ndarray, marks: Mapping[str, list[float]] | None
              ) -> Draw:
    def draw(w: list[dict[str, Any]], c: FaultCatalogue, rb: list[float], counts: Mapping[str, Any]
             ) -> dict[str, Any]:
        return {"txn": txn_plots.txn_png(done_s, types, w, marks=marks, counts=counts, rebalances=rb, catalogue=c),
                "txn_latency": txn_plots.txn_latency_png(done_s, types, latency_ms, w, rebalances=rb, catalogue=c)}

    return draw


def _txn_why(run: Path, ops: Mapping[int, Any]) -> dict[str, Any] | None:
    """A txn run's explanation (evidence/txn_explanation.json, written by the run's end or `kchaos explain`) as the
    page shows it: the summary line, then per transaction its op (linked where its lines are quoted), kinds, cause
    and the facts' lines; None when the run has none."""
    exp = load_txn_explanation(run)
    if not exp or not exp.get("transactions"):
        return None
    return {"summary": txn_summary(exp), "rows": [
        {"op": t["index"], "anchor": anchor(t["index"]) if t["index"] in ops else None,
         "kinds": ", ".join(t.get("anomalies") or {}), "cause": t.get("cause") or "not read off the files",
         "facts": "\n".join(txn_story(t))} for t in exp["transactions"]]}


def txn_section(history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Section:
    """A txn run's section, read from its history as JSON lines (never converted to Parquet): transactions per
    second and latency, the explanation from Kafka's files, example cycles."""
    isolation = isolation_of(test)
    txn = read_txn_run(history, results, isolation)
    return Section("txn.html.j2", "transaction", txn, _txn_draw(txn.done_s, txn.type, txn.latency_ms, txn.marks),
                   events=list(txn.events), rebalances=list(txn.rebalances),
                   latency=latency_table(txn.latency_ms, txn.type), ops=txn.ops,
                   context={"txn_stats": (results or {}).get("stats") or {}, "isolation": isolation,
                            "txn_why": _txn_why(history.parent, txn.ops)})


def copy_section(history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Section:
    """A copy run's section, read from its history as JSON lines: the input against the output, copy transactions
    per second and latency, example anomalies linked to the copy ops that carried them."""
    copy = read_copy_run(history, test, results)
    return Section("copy.html.j2", "copy transaction", copy, _txn_draw(copy.done_s, copy.type, copy.latency_ms, None),
                   events=list(copy.events), rebalances=list(copy.rebalances),
                   latency=latency_table(copy.latency_ms, copy.type), ops=dict(copy.ops),
                   context={"isolation": isolation_of(test)})


def share_section(history: Path, test: Mapping[str, Any], results: Mapping[str, Any] | None) -> Section:
    """A share run's section: the share checker's counts and redeliveries by cause, its deliveries,
    acknowledgements and redeliveries per second, and the send plots of its producers (read as the queue's are)."""
    from kchaos.checkers.share.check import SHARE, SHARE_KINDS
    from kchaos.reports.run.share_plots import share_png

    t = _read_history(history)
    sends, per_epoch = read_sends(t)
    queue = sends_section(sends, results, _events(t), per_epoch)
    share = ((results or {}).get("checkers") or {}).get(SHARE)
    error = share.get("error") if share and "counts" not in share else None
    share = None if error else share
    sends_draw = queue.draw

    def draw(w: list[dict[str, Any]], c: FaultCatalogue, rb: list[float], counts: Mapping[str, Any]
             ) -> dict[str, Any]:
        out = sends_draw(w, c, rb, counts)
        if share is not None:
            out["share"] = share_png(share.get("per_second") or [], w, marks=share.get("marks") or {},
                                     counts=share.get("counts") or {}, rebalances=rb, catalogue=c,
                                     span=plots.time_span(sends))
        return out

    return dataclasses.replace(queue, template="share.html.j2", draw=draw,
                               context={"share": share, "kinds": SHARE_KINDS, "error": error})
