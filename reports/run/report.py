"""The per-run report: one self-contained report.html in the run directory.

`write_report(run)` reads test.json, results.json (when the run was checked),
the history (through its Parquet form, `checkers.parquet.convert`),
faults.json (each nemesis's colour) and isr.jsonl (when recorded), and
writes `run/report.html`: the verdict (checkers/verdict/judge.py: pass, fail or
unknown, on a badge coloured by severity) with what failed and what was
observed and allowed, what the configuration promises and how many lost
writes were inside the promise; four plots (reports/run/plots.py) embedded as PNG
data URIs; the Evidence section when writes were lost (the lost writes
grouped by cause, reports/run/evidence_html.py); then configuration, anomaly
counts with examples, availability, latency, fault windows, and relative
links to the run's files. A txn run (never converted to Parquet) has its
transactions per second and latency instead of the send plots, and its
example cycles as tables whose ops link to their history lines quoted in the
page (reports/run/txn_data.py, txn_plots.py, txn_cycles.py). A copy run (never
converted either) has its input against its output, its copy transactions per
second and latency, and its example anomalies linked to the copy ops that
carried them (reports/run/copy_data.py). Rebalances are drawn on every plot and
listed. docs/reports.md says how to read it.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from markupsafe import Markup

from kchaos.checkers import workload_kind
from kchaos.checkers.copy.check import COPY
from kchaos.checkers.kafka_errors import errors_line
from kchaos.checkers.parquet import CheckInputError, convert
from kchaos.checkers.queue.timeline import availability as timeline_availability
from kchaos.checkers.queue.timeline import fault_windows
from kchaos.checkers.verdict.judge import Judgement, history_line, judge, lost_in_promise
from kchaos.checkers.verdict.promise import GUARANTEE
from kchaos.core.faults import FAULTS_FILE, FaultCatalogue, FaultsError, run_faults
from kchaos.core.page_cache import describe as describe_page_cache
from kchaos.core.promise import Promise
from kchaos.evidence.explain.lost import load_explanation
from kchaos.evidence.explain.text import groups_of
from kchaos.evidence.explain.txn import load_txn_explanation
from kchaos.evidence.explain.txn_text import txn_story, txn_summary
from kchaos.evidence.files import ISR_FILE, read_isr
from kchaos.reports import ReportsInputError
from kchaos.reports.html import write_page, yes
from kchaos.reports.run import plots, txn_plots
from kchaos.reports.run.copy_data import CopyRun, read_copy_run
from kchaos.reports.run.evidence_html import evidence_section
from kchaos.reports.run.txn_cycles import anchor, cycle_tables, op_excerpts
from kchaos.reports.run.txn_data import Rebalance, TxnRun, read_rebalances, read_txn_run
from kchaos.reports.severity import level, loss_rate

__all__ = ["ReportError", "REPORT_FILE", "RunData", "anomaly_marks", "load_run", "write_report"]

REPORT_FILE = "report.html"
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
MAX_REBALANCES = 40  # rows of the rebalance table; the plots draw every one
_COLUMNS = ["time", "process", "type", "f", "partition", "value", "offset", "latency_ns", "epoch", "index",
            "nemesis", "detail"]


class ReportError(ReportsInputError):
    """The run directory cannot be reported on (no history.jsonl or no readable test.json)."""


@dataclass
class RunData:
    """What the report is made of, read once from a run directory."""

    run: Path
    test: dict[str, Any]
    results: dict[str, Any] | None
    sends: plots.Sends
    windows: list[dict[str, Any]]
    availability: dict[str, Any] | None
    latency: dict[str, Any]
    isr: list[dict[str, Any]] | None
    notes: list[str] = field(default_factory=list)
    faults: FaultCatalogue = field(default_factory=FaultCatalogue)
    txn: TxnRun | None = None  # a txn run's transactions (reports/run/txn_data.py); None for a queue run
    rebalances: list[Rebalance] = field(default_factory=list)
    copy: CopyRun | None = None  # a copy run's copy transactions and tallies (reports/run/copy_data.py)
    finalize: dict[str, Any] | None = None  # a rolling upgrade's finalize op, as _finalize shapes it


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: unreadable {what} ({e})") from None


def _read_history(history: Path) -> pa.Table:
    try:
        out = convert(history)
    except CheckInputError:
        out = convert(history, validate=False)  # malformed: still plot what can be read
    t = pq.read_table(out, columns=_COLUMNS)
    return t.filter(pc.or_(pc.equal(t["f"], "send"), pc.equal(t["process"], "nemesis")))


def _np(col: pa.ChunkedArray, fill: Any) -> np.ndarray:
    return col.fill_null(fill).to_numpy()


def _sends(t: pa.Table) -> tuple[plots.Sends, list[dict[str, Any]]]:
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


def _latency(latency_ms: np.ndarray, types: np.ndarray) -> dict[str, Any]:
    """Per completion type, the count, quantiles and max of `latency_ms` (NaN: no latency, left out)."""
    out = {}
    for k in plots.TYPES:
        lat = np.sort(latency_ms[(types == k) & np.isfinite(latency_ms)])
        if len(lat):
            # Like the checker's: a latency that occurred, the smallest with >= q of them at or below it.
            out[k] = {"count": len(lat), **{name: round(float(lat[max(0, int(np.ceil(q * len(lat))) - 1)]), 3)
                                            for name, q in QUANTILES}, "max": round(float(lat[-1]), 3)}
    return out


def load_run(run: Path) -> RunData:
    """Read everything the report shows from `run`; ReportError without history.jsonl or test.json.

    Windows, availability and latency come from results.json when it has
    them, else are computed from the history the way the checker does.
    """
    run = Path(run)
    history = run / "history.jsonl"
    if not run.is_dir():
        raise ReportError(f"{run}: not a directory")
    if not history.is_file():
        raise ReportError(f"{run}: no history.jsonl (not a run directory?)")
    if not (run / "test.json").is_file():
        raise ReportError(f"{run}: no test.json (not a run directory?)")
    test = _json(run / "test.json", "test.json")
    if not isinstance(test, dict):
        raise ReportError(f"{run / 'test.json'}: not a JSON object")
    notes: list[str] = []
    results = None
    if (run / "results.json").is_file():
        try:
            results = _json(run / "results.json", "results.json")
        except ReportError as e:
            notes.append(str(e))
        if not isinstance(results, dict):
            results = None
    txn, copy, moves = None, None, []
    per_epoch: list[dict[str, Any]]
    try:
        kind = workload_kind(test, history)
        if kind == COPY:  # never converted to Parquet either
            copy = read_copy_run(history, test, results)
            sends, per_epoch, events, moves = plots.Sends.empty(), [], list(copy.events), list(copy.rebalances)
        elif kind == "txn":  # never converted to Parquet: read as JSON lines
            txn = read_txn_run(history, results, str((test.get("workload") or {}).get("txn_isolation")
                                                     or "read_committed"))
            sends, per_epoch, events, moves = plots.Sends.empty(), [], txn.events, txn.rebalances
        else:
            t = _read_history(history)
            sends, per_epoch = _sends(t)
            events = _events(t)
            if (test.get("workload") or {}).get("consumer_mode") == "subscribe":
                moves = read_rebalances(history)
    except (CheckInputError, OSError, pa.ArrowException) as e:
        notes.append(f"history could not be read: {e}")
        sends, per_epoch, events = plots.Sends.empty(), [], []
    tl = (results or {}).get("timeline") or {}
    ops = [*events, *(tl.get("windows") or [])]
    try:
        faults = run_faults(run, ops)
    except FaultsError as e:
        notes.append(f"{e}; fault colours and roles were read from the history instead")
        faults = run_faults(None, ops)
    windows = tl.get("windows")
    if windows is None:
        windows = fault_windows(events, faults)
    avail = tl.get("availability") or (timeline_availability(windows, per_epoch, []) if per_epoch else None)
    x = txn if txn is not None else copy
    latency = ((results or {}).get("latency_ms") or {}).get("send") or (
        _latency(x.latency_ms, x.type) if x is not None else _latency(sends.latency_ms, sends.type))
    isr = read_isr(run / ISR_FILE) if (run / ISR_FILE).is_file() else None
    return RunData(run, test, results, sends, windows, avail, latency, isr, notes, faults, txn, moves, copy=copy,
                   finalize=_finalize(events))


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


def _settings(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The configuration table's rows (setting, value as text), from test.json."""
    t, p, c = test.get("topic") or {}, test.get("producer") or {}, test.get("cluster") or {}
    w, n, v = test.get("workload") or {}, test.get("nemesis") or {}, test.get("versions") or {}
    argv = test.get("argv")
    rows = [("acks", p.get("acks")), ("min.insync.replicas", t.get("min_insync")),
            ("replication factor", t.get("replication_factor")), ("partitions", t.get("partitions")),
            ("unclean leader election", yes(t.get("unclean"))), ("idempotence", yes(p.get("idempotence"))),
            ("retries", p.get("retries")), ("max in flight", p.get("max_in_flight")),
            ("nemeses", ", ".join(n.get("names") or []) or "none"),
            ("fault interval / restart delay (s)", f"{n.get('interval')} / {n.get('restart_delay')}"),
            ("time limit (s)", test.get("time_limit")), ("rate (sends/s)", w.get("rate")),
            ("producers / consumers", f"{w.get('producers')} / {w.get('consumers')}"),
            ("nodes / dedicated controllers", f"{c.get('nodes')} / {c.get('controllers')}"),
            ("storage", c.get("storage")), ("seed", test.get("seed")),
            ("kafka version", v.get("kafka") or c.get("kafka_version")),
            *([("rolling upgrade to, then", f"{n['upgrade_to']}, {n.get('upgrade_then')}")] if n.get("upgrade_to")
              else []),
            ("command line", shlex.join(map(str, argv)) if argv else None)]
    # Text, not numbers: one left-aligned column reads better than a ragged one.
    return [{"k": k, "v": None if val is None else str(val)} for k, val in rows]


def _effect(kind: str, j: Judgement) -> str:
    """What the count of `kind` did to the verdict: fails it, observed and allowed (with why), or makes it unknown."""
    parts = [f"fail: {j.failed[kind]} ({j.why.get('failed', {}).get(kind, '')})"] if kind in j.failed else []
    parts += [f"observed, allowed: {j.allowed[kind]} ({j.why.get('allowed', {}).get(kind, '')})"] \
        if kind in j.allowed else []
    if kind == "unseen":
        parts.append("makes the verdict unknown")
    return "; ".join(parts)


# Counts of results.json that are sizes, not anomalies: the queue's acknowledged writes, a copy run's input and output.
_NOT_ANOMALIES = ("acked", "input", "output", "unacked")


def _anomalies(d: RunData, j: Judgement) -> list[dict[str, Any]]:
    """A row per anomaly count of results.json (not _NOT_ANOMALIES): its effect on the verdict (when not zero)
    and up to 10 examples."""
    r = d.results or {}
    examples = r.get("examples") or {}
    return [{"kind": kind, "count": n, "effect": _effect(kind, j) if n else "",
             "examples": ", ".join(json.dumps(x) for x in list(examples.get(kind) or [])[:10])}
            for kind, n in (r.get("counts") or {}).items() if kind not in _NOT_ANOMALIES]


def _availability(avail: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Sends overall, inside applied fault windows (overall minus outside: overlaps count once) and outside them."""
    if not avail:
        return []
    overall, outside = avail.get("overall") or {}, avail.get("outside_faults") or {}
    inside = {k: (overall.get(k) or 0) - (outside.get(k) or 0) for k in ("invoked", "ok", "fail", "info")}
    inside["ok_ratio"] = round(inside["ok"] / inside["invoked"], 4) if inside["invoked"] else None
    return [{"when": w, **c} for w, c in (("overall", overall), ("in applied fault windows", inside),
                                          ("outside fault windows", outside))]


def _windows(d: RunData) -> list[dict[str, Any]]:
    """A row per fault window, with its nemesis's colour and how many sends invoked inside it completed ok."""
    per = (d.availability or {}).get("windows") or []
    rows = []
    for i, w in enumerate(d.windows or []):
        a = per[i] if i < len(per) else {}
        start, end, targets = w.get("start_s"), w.get("end_s"), w.get("targets")
        rows.append({"i": i + 1, "nemesis": w.get("nemesis"), "color": plots.nemesis_color(w.get("nemesis"), d.faults),
                     "f": w.get("f"), "start": start, "end": end,
                     "dur": round(end - start, 3) if end is not None and start is not None else None,
                     "targets": ", ".join(map(str, targets)) if isinstance(targets, list) else targets,
                     "applied": yes(w.get("applied")),
                     "sends": f"{a.get('ok')} / {a.get('invoked')}" if a.get("invoked") is not None else None})
    return rows


def _txn_why(run: Path, ops: dict[int, Any]) -> dict[str, Any] | None:
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


def _releases(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """test.json's `releases` (a rolling upgrade) as table rows: node, release, runs from, stopped."""
    rel = test.get("releases")
    if not isinstance(rel, dict):
        return []
    return [{"node": node, "release": e.get("release"), "from_s": e.get("from_s"), "down_s": e.get("down_s", "–")}
            for node, entries in rel.items() if isinstance(entries, list) for e in entries if isinstance(e, dict)]


def _finalize(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A rolling upgrade's last `finalize` op, for the Releases section: when it ran (seconds of the run), how it
    ended, and what Kafka answered (nemesis/upgrade.py: metadata, refused, restarted, features, features_tries,
    error). None in a run without one; an op the run ended before it completed has no `type`."""
    ops = [e for e in events if e["f"] == "finalize"]
    inv = next((e for e in reversed(ops) if e["type"] == "invoke"), None)
    if inv is None:
        return None
    done = next((e for e in ops if e["type"] != "invoke" and e["time"] >= inv["time"]), None)
    x = (done or {}).get("detail") or {}
    return {"start_s": inv["time"] / 1e9, "end_s": done["time"] / 1e9 if done else None,
            "type": done["type"] if done else None, "metadata": x.get("metadata"), "refused": x.get("refused"),
            "restarted": ", ".join(f"{n} in {s} s" for n, s in (x.get("restarted") or {}).items()),
            "features": x.get("features"), "tries": x.get("features_tries"), "error": x.get("error")}


def write_report(run: Path) -> Path:
    """Write `run/report.html` (self-contained: plots embedded, links relative) and return its path.

    Raises ReportError when `run` has no history.jsonl or no readable test.json.
    A run without results.json gets the verdict "not checked", with windows,
    availability and latency computed from the history.
    """
    d = load_run(Path(run))
    name = d.test.get("name") or d.run.parent.name
    counts = (d.results or {}).get("counts") or {}
    lost = counts.get("lost")
    j = judge(d.results, d.test)  # the same word results.json, the console and compare give
    severity = level(j.verdict, lost, counts.get("acked"), bool(j.allowed))
    w, c, rb = d.windows, d.faults, [b.time_s for b in d.rebalances]
    x = d.txn if d.txn is not None else d.copy
    if x is None:
        pngs: dict[str, Any] = {
            "latency": plots.latency_png(d.sends, w, catalogue=c, rebalances=rb),
            "throughput": plots.throughput_png(d.sends, w, catalogue=c, rebalances=rb),
            "offsets": plots.offsets_png(d.sends, w, anomaly_marks(d.results), catalogue=c, rebalances=rb)}
    else:
        marks = d.txn.marks if d.txn is not None else None
        pngs = {"txn": txn_plots.txn_png(x.done_s, x.type, w, marks=marks, counts=counts, rebalances=rb, catalogue=c),
                "txn_latency": txn_plots.txn_latency_png(x.done_s, x.type, x.latency_ms, w, rebalances=rb, catalogue=c)}
    if d.isr is not None:
        errors = sum(1 for s in d.isr if "error" in s)
        pngs.update(isr=plots.isr_png(d.isr, w, (d.test.get("topic") or {}).get("min_insync"), catalogue=c,
                                      rebalances=rb), isr_samples=len(d.isr) - errors, isr_errors=errors)
    ops = d.txn.ops if d.txn is not None else dict(d.copy.ops) if d.copy is not None else {}
    nodes = sorted(p for p in (d.run / "nodes").iterdir() if p.is_dir()) if (d.run / "nodes").is_dir() else []
    explanation = load_explanation(d.run)
    return write_page(
        d.run / REPORT_FILE, f"kchaos: {name} {d.run.name}", template="report.html.j2", d=d, name=name, rule=GUARANTEE,
        promise=Promise.of(d.test), lost=lost, judgement=j, severity=severity, page_cache=describe_page_cache(d.test),
        kafka_errors=(logged := (d.results or {}).get("kafka_errors")),
        kafka_errors_line=errors_line(logged) if logged else None,
        history_line=history_line((d.results or {}).get("history") or {}),
        rate=loss_rate(lost, counts.get("acked")), acked=counts.get("acked"),
        inside=None if lost is None else lost_in_promise(d.results or {}, d.test),
        settings=_settings(d.test), anomalies=_anomalies(d, j), availability=_availability(d.availability),
        cycles=cycle_tables(d.results, ops, {k: _effect(k, j) for k in counts}), op_lines=op_excerpts(ops),
        rebalances=d.rebalances[:MAX_REBALANCES], releases=_releases(d.test),
        txn_stats=(d.results or {}).get("stats") if d.txn else None,
        txn_why=_txn_why(d.run, ops) if d.txn is not None else None,
        latency=[{"type": k, **v} for k, v in d.latency.items()], windows=_windows(d), plots=pngs, isr_file=ISR_FILE,
        evidence=Markup("".join(evidence_section(d.run, explanation))), causes=len(groups_of(explanation or {})),
        files=[(quote(f), f) for f in ("history.jsonl", "results.json", "test.json", "schedule.json", FAULTS_FILE,
                                       ISR_FILE, "harness.log", "history.parquet") if (d.run / f).is_file()],
        nodes=[(n.name, [(quote(f"nodes/{n.name}/{f}"), f) for f in files]) for n in nodes
               if (files := sorted(f.name for f in n.iterdir() if f.is_file()))])
