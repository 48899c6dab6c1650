"""The controllers' view on one timeline: the Raft quorum, the active controller, broker registration, fencing,
and the affected partitions' leader and ISR changes, with the run's fault windows for context.

`control_timeline(run, explanation)` reads the run's files, never Kafka's
tools: the nodes' server.log lines (as `ControlEvent`s),
the broker and partition records of evidence/metadata.jsonl (written by
`kchaos.evidence.decode`), node ids from nodes/<node>/server.properties, the
applied fault windows of results.json, and the clock and affected
partitions of evidence/explanation.json. It returns the
rows of report.html's control-plane table, which `write_control` also writes
to evidence/control.json.

A row is one thing a node said or the metadata log recorded, on the
history's clock. A node's repeated line (the same refusal, the same failed
heartbeat, a streak of candidacies for consecutive epochs) is one row with a
count and its first and last time, until the node's log says something else
(repeats of another kind do not interrupt; the metadata log's rows about the
node do not either). A Raft leadership and the controller activation that follows it on
the same node in the same epoch are one row; so are a resignation and the
renouncement after it. A registration the metadata log records is shown
only when the broker's own log does not already say it (same broker epoch).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kchaos.evidence.broker_logs import ControlEvent, read_control_logs
from kchaos.evidence.decode import Clock
from kchaos.evidence.explain.facts import node_names
from kchaos.evidence.files import EVIDENCE_DIR, METADATA_FILE

__all__ = ["CONTROL_FILE", "control_rows", "control_timeline", "write_control"]

CONTROL_FILE = "control.json"

# Kinds whose repeats (same node, same detail, nothing else from the node between) fold into one row.
_REPEATS = {"registration-refused", "registration-failed", "heartbeat-failed", "heartbeat-refused",
            "controller-refused", "controller-fencing", "raft-candidate"}
# (earlier kind, later kind) -> the kind of the one row they make, when adjacent on a node in one epoch.
_PAIRS = {("raft-leader", "controller-active"): "raft-leader+controller-active",
          ("raft-resigned", "controller-renounced"): "raft-resigned+controller-renounced",
          ("raft-unseated", "controller-renounced"): "raft-unseated+controller-renounced"}
_METADATA_KINDS = {"fenced": "fenced", "unfenced": "unfenced", "controlled-shutdown": "in controlled shutdown",
                   "unregistered": "unregistered", "registered": "registered"}


def _set(ids: Iterable[int] | None, names: Mapping[int, str]) -> str:
    return "–" if ids is None else "{" + ",".join(names.get(i, str(i)) for i in ids) + "}"


def _times(n: int) -> str:
    return f" ×{n}" if n > 1 else ""


def _what(r: dict[str, Any], names: Mapping[int, str]) -> str:
    """The row's text: what the node did or the metadata log recorded, in a few words."""
    k, n, d, e = r["kind"], r["count"], r.get("detail"), r.get("epoch")
    epochs = f"epoch {e}" if r.get("last_epoch") in (None, e) else f"epochs {e}–{r['last_epoch']}"
    broker = names.get(r["broker"], str(r["broker"])) if r.get("broker") is not None else None
    return {
        "raft-candidate": f"stood for Raft election{_times(n)}, {epochs}",
        "raft-leader": f"became Raft leader, {epochs}",
        "controller-active": f"became the active controller, {epochs}",
        "raft-leader+controller-active": f"became Raft leader and the active controller, {epochs}",
        "raft-resigned": f"resigned as Raft leader, {epochs}",
        "controller-renounced": f"renounced the controller role, {epochs}",
        "raft-resigned+controller-renounced": f"resigned as Raft leader and active controller, {epochs}",
        "raft-unseated": f"lost Raft leadership to a newer epoch, {epochs}",
        "raft-unseated+controller-renounced": f"lost Raft leadership to a newer epoch and the controller role, "
                                              f"{epochs}",
        "controller-fencing": f"decided to fence {broker}{_times(n)}: {d}",
        "controller-refused": f"refused a broker's registration{_times(n)} ({d})",
        "broker-starting": "started: a new incarnation, to be registered",
        "registration-refused": f"registration refused{_times(n)} ({d})",
        "registration-failed": f"registration not sent{_times(n)}: {d}",
        "registered": f"registered, broker epoch {e}",
        "heartbeat-failed": f"heartbeat not sent{_times(n)}: {d}",
        "heartbeat-refused": f"heartbeat refused{_times(n)} ({d})",
    }.get(k) or (f"{_METADATA_KINDS[k]} (broker epoch {e})" if k in _METADATA_KINDS else k)


def _partition_what(s: dict[str, Any], prev: dict[str, Any] | None, names: Mapping[int, str]) -> str:
    """A partition record as text: what it set, with the value before where it changed one."""
    name = lambda i: "none" if i is None or i < 0 else names.get(i, str(i))  # noqa: E731
    if prev is None or "created" in (s.get("changed") or []):
        return f"created: leader {name(s['leader'])}, epoch {s['leader_epoch']}, ISR {_set(s['isr'], names)}"
    parts = []
    changed = set(s.get("changed") or [])
    if "leader" in changed:
        parts.append(f"leader {name(prev['leader'])} → {name(s['leader'])}, epoch {s['leader_epoch']}")
    for field, key, label in (("isr", "isr", "ISR"), ("eligibleLeaderReplicas", "elr", "ELR"),
                              ("lastKnownElr", "last_known_elr", "last known ELR"),
                              ("replicas", "replicas", "replicas")):
        if field in changed:
            parts.append(f"{label} {_set(prev.get(key), names)} → {_set(s.get(key), names)}")
    return "; ".join(parts) or "changed " + ", ".join(sorted(changed))


def _items(events: list[ControlEvent], metadata: list[dict[str, Any]], partitions: set[int], clock: Clock,
           names: Mapping[int, str], windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fault windows, metadata records and log events as unfolded rows, in time order (that order among equal
    times)."""
    logged = {(e.node, e.epoch) for e in events if e.kind == "registered"}
    out: list[dict[str, Any]] = [
        {"time_s": w.get("start_s"), "last_s": w.get("end_s"), "node": ", ".join(map(str, w.get("targets") or [])),
         "kind": "fault", "what": f"fault window: {w.get('f')}" + (f" ({w['nemesis']})" if w.get("nemesis") not in
                                                                   (None, w.get("f")) else ""), "source": "history"}
        for w in windows if w.get("applied") and w.get("start_s") is not None]
    prev: dict[int, dict[str, Any]] = {}
    for m in metadata:
        if m.get("type") == "broker" and m.get("kind") in _METADATA_KINDS:
            node = names.get(m["broker"], str(m["broker"]))
            if m["kind"] == "registered" and (node, m.get("broker_epoch")) in logged:
                continue
            out.append({"time_s": m.get("time_s"), "node": node, "kind": m["kind"], "epoch": m.get("broker_epoch"),
                        "source": "metadata log", "offset": m.get("offset")})
        elif m.get("type") == "partition" and m.get("partition") in partitions:
            p = m["partition"]
            out.append({"time_s": m.get("time_s"), "node": f"p{p}", "kind": "partition",
                        "what": _partition_what(m, prev.get(p), names), "source": "metadata log",
                        "offset": m.get("offset"), "epoch": m.get("leader_epoch")})
            prev[p] = m
        elif m.get("type") == "partition":
            prev[m["partition"]] = m
    for e in events:
        out.append({"time_s": clock.to_s(e.time_ms), "node": e.node, "kind": e.kind, "epoch": e.epoch,
                    "broker": e.broker, "detail": e.detail, "source": "server.log"})
    # Unknown times (no clock) sort last, in the order they came.
    return sorted(out, key=lambda r: (r["time_s"] is None, r["time_s"] or 0.0))


def _continues(row: dict[str, Any], r: dict[str, Any]) -> bool:
    """Whether `r` repeats the open row `row` of its node (same kind, detail and broker already matched)."""
    if r["kind"] != "raft-candidate":
        return True
    # A streak of elections that kept timing out: each for the next epoch.
    before = row["epoch"] if row.get("last_epoch") is None else row["last_epoch"]
    return None not in (r["epoch"], before) and r["epoch"] == before + 1


def control_rows(events: list[ControlEvent], metadata: list[dict[str, Any]], partitions: Iterable[int],
                 clock: Clock, names: Mapping[int, str], windows: Iterable[dict[str, Any]] = ()
                 ) -> list[dict[str, Any]]:
    """The timeline's rows: time_s (first), last_s (last, when folded; a fault window's end), count, node, role,
    kind, what, source, epoch.

    `events` are the nodes' control-plane log lines, `metadata` the rows of
    evidence/metadata.jsonl, `partitions` those whose leader/ISR changes to
    show, `names` broker/controller id -> node name, `windows` the applied
    fault windows of results.json (timeline.windows), shown for context.
    """
    rows: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}  # node -> its latest row
    # node -> (kind, detail, broker) -> its open row of repeats; anything else the node says closes them all.
    open_: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    for r in _items(events, metadata, set(partitions), clock, names, list(windows)):
        node, kind = r["node"], r["kind"]
        key = (kind, r.get("detail"), r.get("broker"))
        if kind in _REPEATS and (row := open_.get(node, {}).get(key)) is not None and _continues(row, r):
            row.update(count=row["count"] + 1, last_s=r["time_s"], last_epoch=r.get("epoch"))
            continue
        if (prev := latest.get(node)) is not None and (pair := _PAIRS.get((prev["kind"], kind))) \
                and prev["epoch"] == r["epoch"] and r["source"] == "server.log":
            prev["kind"] = pair
            continue
        row = {"last_s": None, "count": 1, **r}
        rows.append(row)
        if r["source"] != "server.log":  # folds and pairs are about what the node itself said
            continue
        latest[node] = row
        if kind in _REPEATS:
            open_.setdefault(node, {})[key] = row
        else:
            open_.pop(node, None)
    for row in rows:
        if row["kind"] not in ("partition", "fault"):
            row["what"] = _what(row, names)
            if row["count"] == 1:
                row["last_s"] = None
    keys = ("time_s", "last_s", "count", "node", "role", "kind", "what", "source", "epoch", "last_epoch", "detail")
    return [{k: row.get(k) for k in keys} | {"role": _role(row["kind"])} for row in rows]


def _role(kind: str) -> str:
    """Whose row it is: "controller", "broker", "partition" or "fault" (a fault window of the history)."""
    if kind in ("partition", "fault"):
        return kind
    return "controller" if kind.startswith(("raft-", "controller-")) else "broker"


def _metadata(run: Path) -> list[dict[str, Any]] | None:
    try:
        with open(run / EVIDENCE_DIR / METADATA_FILE, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return None


def _windows(run: Path) -> list[dict[str, Any]]:
    try:
        res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return list(((res.get("timeline") or {}).get("windows") or []) if isinstance(res, dict) else [])


def control_timeline(run: Path, explanation: Mapping[str, Any]) -> dict[str, Any]:
    """What evidence/control.json holds: `rows` (control_rows), `partitions` shown, `clock`, `notes`.

    Reads nodes/*/server.log, evidence/metadata.jsonl, the fault windows of
    results.json and the clock and affected partitions of `explanation`
    (explanation.json); a missing file leaves its rows out (with a note for
    the logs and the metadata).
    """
    run = Path(run)
    c = explanation.get("clock") or {}
    clock = Clock(c.get("history_start_unix_ms"), c.get("source") or "unknown")
    partitions = sorted(int(p) for p in (explanation.get("timelines") or {}))
    notes = []
    metadata = _metadata(run)
    if metadata is None:
        notes.append(f"no readable {EVIDENCE_DIR}/{METADATA_FILE}: no fencing or partition rows")
    nodes = run / "nodes"
    missing = sorted(d.name for d in nodes.iterdir() if d.is_dir() and not (d / "server.log").is_file()) \
        if nodes.is_dir() else []
    if not nodes.is_dir():
        notes.append("no nodes/ directory: no server.log lines")
    elif missing:
        notes.append(f"no server.log for {', '.join(missing)}")
    rows = control_rows(read_control_logs(nodes), metadata or [], partitions, clock, node_names(run), _windows(run))
    return {"rows": rows, "partitions": partitions,
            "clock": {"history_start_unix_ms": clock.start_unix_ms, "source": clock.source}, "notes": notes}


def write_control(run: Path, explanation: Mapping[str, Any]) -> dict[str, Any]:
    """Build the control-plane timeline (control_timeline), write it to RUN/evidence/control.json, return it.

    A file that cannot be written becomes a note; the timeline is returned all the same.
    """
    out = control_timeline(run, explanation)
    try:
        (Path(run) / EVIDENCE_DIR / CONTROL_FILE).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    except OSError as e:
        out["notes"].append(f"{EVIDENCE_DIR}/{CONTROL_FILE} not written: {e}")
    return out
