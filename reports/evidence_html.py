"""The "Evidence" section of report.html: why each lost range was lost, and each affected partition's
leader/epoch/ISR/ELR timeline from the KRaft metadata log.

Built from RUN/evidence/explanation.json only (reports/explain.py writes it);
a run without that file gets no section at all.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

from reports.html import esc, link, table

__all__ = ["evidence_section"]

_FILES = ("explanation.json", "segments.jsonl", "metadata.jsonl", "raw/collect.json")
_STATUS = {"holds": "still holds them", "truncated": "truncated past them", "lost-unsynced": "lost them unsynced",
           "missing": "had them; how they went is not recorded", "unknown": "unknown",
           "not collected": "its data was not collected", "did not hold": "did not hold them"}


def _nodes(v: Any) -> str | None:
    return None if v is None else "{" + ",".join(map(str, v)) + "}"


def _fates(r: Mapping[str, Any]) -> str:
    rows = [{"node": f.get("node"), "status": _STATUS.get(f.get("status"), f.get("status")),
             "offset": f.get("offset"), "time": f.get("time_s"), "source": f.get("source"),
             "detail": "; ".join(x for x in (f.get("had"), f.get("detail")) if x)} for f in r.get("replicas") or []]
    return table(rows, ["node", "status", "offset", "time", "source", "detail"],
                 ["replica", "what became of the range", "log end / truncated to", "time s", "read from",
                  "evidence"])


def _timeline(rows: list[Mapping[str, Any]]) -> str:
    shown = [{"time": r.get("time_s"), "offset": r.get("offset"), "event": r.get("event"), "leader": r.get("leader"),
              "epoch": r.get("leader_epoch"), "isr": _nodes(r.get("isr")), "elr": _nodes(r.get("elr")),
              "lkelr": _nodes(r.get("last_known_elr"))} for r in rows]
    return table(shown, ["time", "offset", "event", "leader", "epoch", "isr", "elr", "lkelr"],
                 ["time s", "metadata offset", "record", "leader", "leader epoch", "ISR", "ELR", "last known ELR"])


def evidence_section(run: Path, explanation: Mapping[str, Any] | None) -> list[str]:
    """HTML fragments for report.html: nothing when `explanation` is None."""
    if not explanation:
        return []
    ranges = explanation.get("ranges") or []
    clock = explanation.get("clock") or {}
    parts = ["<h2>Evidence</h2>",
             f"<p>What Kafka itself recorded about the {esc(explanation.get('lost'))} lost writes: the replicas' "
             "log segments and leader-epoch checkpoints (decoded with <code>kafka.tools.DumpLogSegments</code>), "
             "the KRaft metadata log (<code>--cluster-metadata-decoder</code>) and the brokers' own log lines, "
             f"against the history. Times are seconds since the history started (start from "
             f"{esc(clock.get('source'))}).</p>"]
    if not ranges:
        parts.append('<p class="muted">No acknowledged write was lost.</p>' if not explanation.get("lost") else
                     '<p class="muted">No lost range could be placed (see the notes).</p>')
    for i, r in enumerate(ranges, 1):
        parts.append(f"<p><strong>Range {i}.</strong> {esc(r.get('why'))}</p>")
        parts.append(_fates(r))
    for p, rows in sorted((explanation.get("timelines") or {}).items(), key=lambda kv: int(kv[0])):
        parts.append(f"<h3>Partition {esc(p)}: leader, epoch, ISR and ELR</h3>")
        parts.append(_timeline(rows))
    notes = explanation.get("notes") or []
    if notes:
        parts.append("<ul>" + "".join(f'<li class="muted">{esc(n)}</li>' for n in notes) + "</ul>")
    base = Path(run) / "evidence"
    files = [link(quote(f"evidence/{f}"), f) for f in _FILES if (base / f).is_file()]
    parts.append("<p>Files: " + ", ".join(files) + "</p>")
    return parts
