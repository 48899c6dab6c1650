"""The per-run report: one self-contained report.html in the run directory.

`write_report(run)` reads test.json, results.json (when the run was checked),
the history (through its Parquet form, `checkers.parquet.convert`),
faults.json (each nemesis's colour) and isr.jsonl (when recorded), and
writes `run/report.html`: verdict, whether the configuration promised no
loss and whether that held, configuration,
anomaly counts with examples, availability, latency, fault windows, four
plots (reports/plots.py) embedded as PNG data URIs, and relative links to
the run's files. docs/reports.md says how to read it.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.parquet import CheckInputError, convert
from checkers.timeline import availability as timeline_availability
from checkers.timeline import fault_windows
from harness.faults import FAULTS_FILE, FaultCatalogue, FaultsError, run_faults
from harness.monitor import ISR_FILE, read_isr
from reports import plots
from reports import ReportsInputError
from reports.html import Raw, esc, link, png, table, verdict, write_page
from reports.evidence_html import evidence_section
from reports.explain import load_explanation
from reports.promise import RULE, lost_in_promise, promise_of

__all__ = ["ReportError", "REPORT_FILE", "RunData", "anomaly_marks", "load_run", "write_report"]

REPORT_FILE = "report.html"
# What each count does to the verdict (docs/checkers.md, "Verdict").
EFFECT = {"lost": "invalid", "acked_offset_mismatch": "invalid", "inconsistent_offset": "invalid",
          "unexpected": "invalid", "poll_skip": "invalid", "nonmonotonic_poll": "invalid",
          "duplicate": "idempotence", "nonmonotonic_send": "idempotence", "unseen": "unknown",
          "failed_visible": "reported"}
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
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
    per_epoch: dict[int, dict[str, int]] = {}
    for k in ("invoke", "ok", "fail", "info"):
        es, ns = np.unique(epoch[kind == k], return_counts=True)
        for e, n in zip(es.tolist(), ns.tolist()):
            per_epoch.setdefault(e, {"epoch": e})["invoked" if k == "invoke" else k] = n
    done = (kind != "invoke") & s["latency_ns"].is_valid().to_numpy(zero_copy_only=False)
    time, lat = _np(s["time"], 0)[done], _np(s["latency_ns"], 0)[done]
    sends = plots.Sends(invoke_s=(time - lat) / 1e9, done_s=time / 1e9, latency_ms=lat / 1e6, type=kind[done],
                        partition=_np(s["partition"], plots.NULL)[done], value=_np(s["value"], plots.NULL)[done],
                        offset=_np(s["offset"], plots.NULL)[done])
    return sends, sorted(per_epoch.values(), key=lambda r: r["epoch"])


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


def _latency(sends: plots.Sends) -> dict[str, Any]:
    out = {}
    for k in plots.TYPES:
        lat = np.sort(sends.latency_ms[sends.type == k])
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
    try:
        t = _read_history(history)
        sends, per_epoch = _sends(t)
        events = _events(t)
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
    latency = ((results or {}).get("latency_ms") or {}).get("send") or _latency(sends)
    isr = read_isr(run / ISR_FILE) if (run / ISR_FILE).is_file() else None
    return RunData(run, test, results, sends, windows, avail, latency, isr, notes, faults)


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


def _yes(b: Any) -> str:
    return {True: "yes", False: "no"}.get(b, "–" if b is None else str(b))


def _header(d: RunData) -> str:
    name = d.test.get("name") or d.run.parent.name
    r = d.results
    if r is None:
        badge = '<span class="verdict valid-unknown">not checked</span>'
    else:
        badge = verdict(r.get("valid"))
    counts = (r or {}).get("counts") or {}
    loss = (r or {}).get("loss") or {}
    promise = promise_of(d.test)
    promised = promise.no_loss
    lost = counts.get("lost")
    inside = lost_in_promise(r or {}, d.test) if lost is not None else None
    outside = [o for o in loss.get("outside") or [] if promised]
    if r is None:
        held = "not checked (no results.json: run <code>kchaos check</code> on this directory)"
    elif lost is None:
        held = "unknown (results.json has no loss count)"
    elif not lost:
        held = "yes: no acknowledged write was lost" if promised else "nothing was lost (nothing was promised)"
    elif promised and inside:
        held = (f'<strong class="valid-false">NO: {inside} acknowledged writes lost while an in-sync replica '
                f'held them</strong>' + (f" ({lost - inside} more outside the guarantee)" if lost > inside else ""))
    elif promised:
        held = f"yes: the {lost} acknowledged writes lost were outside the guarantee"
    else:
        held = f"{lost} acknowledged writes lost, as the configuration allows"
    errors = [f"{esc(k)}: {esc(c.get('error'))}" for k, c in ((r or {}).get("checkers") or {}).items()
              if isinstance(c, dict) and c.get("error")]
    p = d.test.get("producer") or {}
    t = d.test.get("topic") or {}
    stamp = f' <span class="muted">{esc(d.run.name)}</span>' if d.run.name != name else ""
    lines = [f"<h1>{esc(name)}{stamp}</h1>",
             f"<p>Verdict: {badge}</p>",
             f"<p>Configuration promises no loss: <strong>{_yes(promised)}</strong> "
             f"<span class=\"muted\">(acks={esc(p.get('acks', 'all'))}, min.insync={esc(t.get('min_insync'))}, "
             f"unclean={esc(_yes(t.get('unclean')))}{'; ' + esc(promise.void) if promise.void else ''}; "
             f"Kafka's guarantee: {esc(RULE)})</span>. Promise held: {held}.</p>"]
    if outside:
        lines.append("<p>Lost outside the guarantee:</p><ul>" + "".join(
            f"<li>{o['count']} writes acknowledged {o['first_acked_s']}–{o['last_acked_s']} s: {esc(o['reason'])}</li>"
            for o in outside) + "</ul>")
    lines += [f'<p class="valid-false">checker error: {e}</p>' for e in errors]
    lines += [f'<p class="valid-unknown">{esc(n)}</p>' for n in d.notes]
    return "\n".join(lines)


def _config(test: Mapping[str, Any]) -> str:
    t, p, c = test.get("topic") or {}, test.get("producer") or {}, test.get("cluster") or {}
    w, n, v = test.get("workload") or {}, test.get("nemesis") or {}, test.get("versions") or {}
    argv = test.get("argv")
    rows = [("acks", p.get("acks")), ("min.insync.replicas", t.get("min_insync")),
            ("replication factor", t.get("replication_factor")), ("partitions", t.get("partitions")),
            ("unclean leader election", _yes(t.get("unclean"))), ("idempotence", _yes(p.get("idempotence"))),
            ("retries", p.get("retries")), ("max in flight", p.get("max_in_flight")),
            ("nemeses", ", ".join(n.get("names") or []) or "none"),
            ("fault interval / restart delay (s)", f"{n.get('interval')} / {n.get('restart_delay')}"),
            ("time limit (s)", test.get("time_limit")), ("rate (sends/s)", w.get("rate")),
            ("producers / consumers", f"{w.get('producers')} / {w.get('consumers')}"),
            ("nodes / dedicated controllers", f"{c.get('nodes')} / {c.get('controllers')}"),
            ("storage", c.get("storage")), ("seed", test.get("seed")),
            ("kafka version", v.get("kafka") or c.get("kafka_version")),
            ("command line", Raw(f"<code>{esc(shlex.join(map(str, argv)))}</code>") if argv else None)]
    # Text, not numbers: one left-aligned column reads better than a ragged one.
    return table([{"k": k, "v": val if isinstance(val, Raw) or val is None else str(val)} for k, val in rows],
                 ["k", "v"], ["setting", "value"])


def _effect(kind: str, idempotence: bool) -> str:
    e = EFFECT.get(kind, "")
    if e == "idempotence":
        return "invalid" if idempotence else "reported (idempotence off)"
    return {"unknown": "makes the verdict unknown"}.get(e, e)


def _anomalies(d: RunData) -> str:
    r = d.results
    if r is None:
        return '<p class="muted">Not checked: no results.json.</p>'
    counts, examples = r.get("counts") or {}, r.get("examples") or {}
    idem = bool((d.test.get("producer") or {}).get("idempotence"))
    rows = []
    for kind, n in counts.items():
        if kind == "acked":
            continue
        ex = ", ".join(json.dumps(x) for x in list(examples.get(kind) or [])[:10])
        rows.append({"kind": kind, "count": Raw(f"<strong>{esc(n)}</strong>") if n else n,
                     "effect": _effect(kind, idem) if n else "", "examples": ex})
    stats = r.get("stats") or {}
    head = (f"<p>{esc(counts.get('acked'))} values acknowledged; sends: {esc(stats.get('send_invoke'))} invoked, "
            f"{esc(stats.get('send_ok'))} ok, {esc(stats.get('send_fail'))} fail, {esc(stats.get('send_info'))} "
            f"info. Partitions whose final read completed: {esc(stats.get('partitions_complete'))}, "
            f"did not: {esc(stats.get('partitions_incomplete'))}.</p>")
    return head + table(rows, ["kind", "count", "effect", "examples"],
                        ["anomaly", "count", "effect on verdict", "examples (up to 10)"])


def _availability(avail: Mapping[str, Any] | None) -> str:
    if not avail:
        return '<p class="muted">No sends.</p>'
    overall, outside = avail.get("overall") or {}, avail.get("outside_faults") or {}
    inside = {k: (overall.get(k) or 0) - (outside.get(k) or 0) for k in ("invoked", "ok", "fail", "info")}
    inside["ok_ratio"] = round(inside["ok"] / inside["invoked"], 4) if inside["invoked"] else None
    rows = [{"when": w, **c} for w, c in (("overall", overall), ("in applied fault windows", inside),
                                          ("outside fault windows", outside))]
    return ("<p>Sends by invocation time: how many were invoked and how they completed "
            "(ok ratio = ok / invoked; invocations cut off by the end of the run have no completion).</p>" +
            table(rows, ["when", "invoked", "ok", "fail", "info", "ok_ratio"],
                  ["sends invoked", "invoked", "ok", "fail", "info", "ok ratio"]))


def _latency_table(latency: Mapping[str, Any]) -> str:
    if not latency:
        return '<p class="muted">No completed sends.</p>'
    rows = [{"type": k, **v} for k, v in latency.items()]
    return table(rows, ["type", "count", "p50", "p90", "p99", "max"],
                 ["completion", "count", "p50 ms", "p90 ms", "p99 ms", "max ms"])


def _windows(d: RunData) -> str:
    if not d.windows:
        return '<p class="muted">No faults were injected.</p>'
    per = (d.availability or {}).get("windows") or []
    rows = []
    for i, w in enumerate(d.windows):
        a = per[i] if i < len(per) else {}
        targets = w.get("targets")
        color = plots.nemesis_color(w.get("nemesis"), d.faults)
        rows.append({"i": i + 1, "nemesis": Raw(f'<span style="color:{color}">&#9632;</span> {esc(w.get("nemesis"))}'),
                     "f": w.get("f"), "start": w.get("start_s"), "end": w.get("end_s"),
                     "dur": round(w["end_s"] - w["start_s"], 3) if w.get("end_s") is not None and
                     w.get("start_s") is not None else None,
                     "targets": ", ".join(map(str, targets)) if isinstance(targets, list) else targets,
                     "applied": _yes(w.get("applied")),
                     "sends": f"{a.get('ok')} / {a.get('invoked')}" if a.get("invoked") is not None else None})
    return table(rows, ["i", "nemesis", "f", "start", "end", "dur", "targets", "applied", "sends"],
                 ["#", "nemesis", "op", "start s", "end s", "duration s", "targets", "applied", "ok / invoked"])


def _files(run: Path) -> str:
    names = [n for n in ("history.jsonl", "results.json", "test.json", "schedule.json", FAULTS_FILE, ISR_FILE,
                         "harness.log", "history.parquet") if (run / n).is_file()]
    items = [link(quote(n), n) for n in names]
    nodes = run / "nodes"
    if nodes.is_dir():
        for node in sorted(p for p in nodes.iterdir() if p.is_dir()):
            files = sorted(f for f in node.iterdir() if f.is_file())
            if files:
                rel = [f"nodes/{node.name}/{f.name}" for f in files]
                items.append(f"{esc(node.name)}: " + ", ".join(link(quote(r), Path(r).name) for r in rel))
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _plots(d: RunData) -> str:
    w, c = d.windows, d.faults
    parts = ["<h2>Send latency</h2>", png(plots.latency_png(d.sends, w, catalogue=c), "send latency over time"),
             "<h2>Throughput</h2>", png(plots.throughput_png(d.sends, w, catalogue=c),
                                        "sends per second by completion type"),
             "<h2>Acknowledged offsets</h2>", png(plots.offsets_png(d.sends, w, anomaly_marks(d.results), catalogue=c),
                                                  "acknowledged offsets per partition"),
             "<h2>In-sync replicas</h2>"]
    if d.isr is None:
        parts.append(f'<p class="muted">No {ISR_FILE} in this run (runs record it from the ISR monitor on): '
                     "no ISR plot.</p>")
    else:
        errors = sum(1 for s in d.isr if "error" in s)
        parts.append(f"<p>{len(d.isr) - errors} partition samples, {errors} failed samples.</p>")
        parts.append(png(plots.isr_png(d.isr, w, (d.test.get("topic") or {}).get("min_insync"), catalogue=c),
                         "ISR size per partition over time"))
    return "\n".join(parts)


def write_report(run: Path) -> Path:
    """Write `run/report.html` (self-contained: plots embedded, links relative) and return its path.

    Raises ReportError when `run` has no history.jsonl or no readable test.json.
    A run without results.json gets the verdict "not checked", with windows,
    availability and latency computed from the history.
    """
    d = load_run(Path(run))
    name = d.test.get("name") or d.run.parent.name
    body = "\n".join([
        _header(d),
        "<h2>Configuration</h2>", _config(d.test),
        "<h2>Anomalies</h2>", _anomalies(d),
        *evidence_section(d.run, load_explanation(d.run)),
        "<h2>Availability</h2>", _availability(d.availability),
        "<h2>Send latency quantiles</h2>", _latency_table(d.latency),
        "<h2>Fault windows</h2>", _windows(d),
        _plots(d),
        "<h2>Files</h2>", _files(d.run),
    ])
    return write_page(d.run / REPORT_FILE, f"kchaos: {name} {d.run.name}", body)
