"""The per-run report: one self-contained report.html in the run directory.

`write_report(run)` reads test.json, results.json (when the run was checked),
the history (through its workload's `Section`: the
queue's sends from the history's Parquet form, a txn or copy run's
transactions from its JSON lines), faults.json (each nemesis's colour) and
isr.jsonl (when recorded), and writes `run/report.html`: the verdict
(pass, fail or unknown, on a badge coloured by
severity) with what failed and what was observed and allowed, what the
configuration promises and how many lost writes were inside the promise; the
workload's plots embedded as PNG data URIs
and its own tables; the Evidence section when writes were lost (the lost
writes grouped by cause); then configuration,
anomaly counts with examples, availability, latency, fault windows, and
relative links to the run's files. Ops that examples name link to their
history lines quoted in the page. Rebalances are
drawn on every plot and listed. docs/reports.md says how to read it.
"""
from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
from markupsafe import Markup

from kchaos.checkers import workload_of_run
from kchaos.checkers.kafka_errors import errors_line
from kchaos.checkers.outages import outages_of, outages_text
from kchaos.checkers.parquet import CheckInputError
from kchaos.checkers.queue.timeline import availability as timeline_availability
from kchaos.checkers.queue.timeline import fault_windows
from kchaos.checkers.verdict.judge import Judgement, history_line, judge, lost_in_promise
from kchaos.checkers.verdict.promise import GUARANTEE
from kchaos.core.faults import FAULTS_FILE, FaultCatalogue, FaultsError, read_faults
from kchaos.core.page_cache import describe as describe_page_cache
from kchaos.core.promise import Promise
from kchaos.evidence.agreement import agreement_line
from kchaos.evidence.explain.lost import load_explanation
from kchaos.evidence.explain.text import groups_of
from kchaos.evidence.files import ISR_FILE, read_isr
from kchaos.reports import ReportsInputError
from kchaos.reports.html import write_page, yes
from kchaos.reports.run import plots
from kchaos.reports.run.evidence_html import evidence_section
from kchaos.reports.run.png_cache import keeping, reusing
from kchaos.reports.run.section import Section, sends_section
from kchaos.reports.run.txn_cycles import cycle_tables, op_excerpts
from kchaos.reports.run.txn_data import Rebalance
from kchaos.reports.severity import level, loss_rate

__all__ = ["ReportError", "REPORT_FILE", "RunData", "load_run", "predraw", "write_report"]

REPORT_FILE = "report.html"
MAX_REBALANCES = 40  # rows of the rebalance table; the plots draw every one
log = logging.getLogger(__name__)


class ReportError(ReportsInputError):
    """The run directory cannot be reported on (no history.jsonl or no readable test.json)."""


@dataclass
class RunData:
    """What the report is made of, read once from a run directory."""

    run: Path
    test: dict[str, Any]
    results: dict[str, Any] | None
    section: Section  # the workload's part of the page
    windows: list[dict[str, Any]]
    availability: dict[str, Any] | None
    latency: dict[str, Any]
    isr: list[dict[str, Any]] | None
    notes: list[str] = field(default_factory=list)
    faults: FaultCatalogue = field(default_factory=FaultCatalogue)
    rebalances: list[Rebalance] = field(default_factory=list)
    finalize: dict[str, Any] | None = None  # a rolling upgrade's finalize op, as _finalize shapes it


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: unreadable {what} ({e})") from None


def load_run(run: Path) -> RunData:
    """Read everything the report shows from `run`; ReportError without history.jsonl or test.json.

    Windows, availability and latency come from results.json when it has
    them, else are computed from the history the way the checker does.
    """
    run = Path(run).resolve()  # `latest` names the run it points to
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
        section = workload_of_run(test, history).report(history, test, results)
    except (CheckInputError, OSError, pa.ArrowException) as e:
        notes.append(f"history could not be read: {e}")
        section = sends_section(plots.Sends.empty(), results)
    tl = (results or {}).get("timeline") or {}
    try:
        faults = read_faults(run, [*section.events, *(tl.get("windows") or [])])
    except FaultsError as e:
        notes.append(f"{e}; each nemesis op is shown as a fault of its own, in a colour keyed by its nemesis's name")
        faults = FaultCatalogue()
    windows = tl.get("windows")
    if windows is None:
        windows = fault_windows(section.events, faults)
    avail = tl.get("availability") or (timeline_availability(windows, section.per_epoch, [])
                                       if section.per_epoch else None)
    latency = ((results or {}).get("latency_ms") or {}).get("send") or section.latency
    isr = read_isr(run / ISR_FILE) if (run / ISR_FILE).is_file() else None
    return RunData(run, test, results, section, windows, avail, latency, isr, notes, faults, section.rebalances,
                   finalize=_finalize(section.events))


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


def _outage_faults(outages: Mapping[str, Any], faults: FaultCatalogue) -> list[dict[str, Any]]:
    """A row per applied fault of the outages: its nemesis's colour, when it started and healed, and the seconds
    from each to the next acknowledged write ("none" when none came)."""
    def after(x: float | None) -> str:
        return "none came" if x is None else f"{x:g} s"

    return [{"nemesis": f.get("nemesis"), "color": plots.nemesis_color(f.get("nemesis"), faults), "f": f.get("f"),
             "start": f.get("start_s"), "end": "–" if f.get("end_s") is None else f["end_s"],
             "after_start": after(f.get("ack_after_start_s")),
             "after_end": "–" if f.get("end_s") is None else after(f.get("ack_after_end_s"))}
            for f in outages.get("faults") or []]


def _releases(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """test.json's `releases` (a rolling upgrade) as table rows: node, release, runs from, stopped."""
    rel = test.get("releases")
    if not isinstance(rel, dict):
        return []
    return [{"node": node, "release": e.get("release"), "from_s": e.get("from_s"), "down_s": e.get("down_s", "–")}
            for node, entries in rel.items() if isinstance(entries, list) for e in entries if isinstance(e, dict)]


def _finalize(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A rolling upgrade's last `finalize` op, for the Releases section: when it ran (seconds of the run), how it
    ended, and what Kafka answered (the op's fields: metadata, refused, restarted, features, features_tries,
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


def _draw(d: RunData, counts: Mapping[str, Any]) -> dict[str, Any]:
    """The page's plots (and the ISR samples' counts)."""
    w, c, rb = d.windows, d.faults, [b.time_s for b in d.rebalances]
    pngs = d.section.draw(w, c, rb, counts)
    if d.isr is not None:
        errors = sum(1 for s in d.isr if "error" in s)
        pngs.update(isr=plots.isr_png(d.isr, w, (d.test.get("topic") or {}).get("min_insync"), catalogue=c,
                                      rebalances=rb), isr_samples=len(d.isr) - errors, isr_errors=errors)
    return pngs


def predraw(run: Path) -> None:
    """Draw the plots of `run`'s report from what the run directory holds now, keeping them in this process:
    `write_report` of the run, here, later, takes every plot that still shows the same from them. A run's own
    process calls it beside the check, whose waiting on Spark leaves the CPU to it; a plot that the check's
    results change (the lost writes' marks) is drawn again. Never raises: the report itself meets any error."""
    try:
        d = load_run(Path(run))
        with keeping():
            _draw(d, (d.results or {}).get("counts") or {})
    except Exception:
        log.debug("plots of %s not drawn ahead", run, exc_info=True)


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
    with reusing(d.run / REPORT_FILE):  # a plot that shows what it showed there is not drawn again
        pngs = _draw(d, counts)
    ops = dict(d.section.ops)
    nodes = sorted(p for p in (d.run / "nodes").iterdir() if p.is_dir()) if (d.run / "nodes").is_dir() else []
    explanation = load_explanation(d.run)
    outages = outages_of(d.results)
    return write_page(
        d.run / REPORT_FILE, f"kchaos: {name} {d.run.name}", template="report.html.j2", d=d, name=name, rule=GUARANTEE,
        promise=Promise.of(d.test), lost=lost, judgement=j, severity=severity, page_cache=describe_page_cache(d.test),
        kafka_errors=(logged := (d.results or {}).get("kafka_errors")),
        kafka_errors_line=errors_line(logged) if logged else None,
        agreement_line=agreement_line(agreed) if (agreed := (d.results or {}).get("agreement")) else None,
        history_line=history_line((d.results or {}).get("history") or {}),
        rate=loss_rate(lost, counts.get("acked")), acked=counts.get("acked"),
        inside=None if lost is None else lost_in_promise(d.results or {}),
        settings=_settings(d.test), anomalies=_anomalies(d, j), availability=_availability(d.availability),
        outages=outages, outages_line=outages_text(outages), outage_faults=_outage_faults(outages, d.faults),
        cycles=cycle_tables(d.results, ops, {k: _effect(k, j) for k in counts}), op_lines=op_excerpts(ops),
        rebalances=d.rebalances[:MAX_REBALANCES], releases=_releases(d.test), **d.section.context,
        latency=[{"type": k, **v} for k, v in d.latency.items()], windows=_windows(d), plots=pngs, isr_file=ISR_FILE,
        evidence=Markup("".join(evidence_section(d.run, explanation))), causes=len(groups_of(explanation or {})),
        files=[(quote(f), f) for f in ("history.jsonl", "results.json", "test.json", "schedule.json", FAULTS_FILE,
                                       ISR_FILE, "phases.json", "harness.log", "history.parquet")
               if (d.run / f).is_file()],
        nodes=[(n.name, [(quote(f"nodes/{n.name}/{f}"), f) for f in files]) for n in nodes
               if (files := sorted(f.name for f in n.iterdir() if f.is_file()))])
