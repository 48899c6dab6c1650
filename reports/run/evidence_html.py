"""The "Evidence" section of report.html (templates/evidence.html.j2): the lost writes grouped by cause, each
group a collapsible block with its sentence, its replicas' fates and its offset ranges; each affected
partition's leader/epoch/ISR/ELR timeline from the KRaft metadata log; and after them the control plane's
timeline (the quorum, the controllers, broker registration and fencing).

Built from RUN/evidence/explanation.json (the lost writes explained), and
for the control plane from the nodes' server.log and evidence/metadata.jsonl;
the control plane's rows are written to evidence/control.json on the way. A
run without explanation.json gets no section at all. However many writes were
lost, the section shows at most MAX_GROUPS groups and MAX_RANGES ranges in
each (the rest are counted and left to explanation.json), so report.html
stays small.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kchaos.evidence.control_plane import CONTROL_FILE, write_control
from kchaos.evidence.explain.text import groups_of
from kchaos.evidence.explain.why import spans_phrase
from kchaos.reports.html import render

__all__ = ["MAX_GROUPS", "MAX_RANGES", "evidence_section"]

MAX_GROUPS = 20
MAX_RANGES = 10
_FILES = ("explanation.json", CONTROL_FILE, "segments.jsonl", "metadata.jsonl", "raw/collect.json")


def _shown(explanation: Mapping[str, Any], groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The groups the section shows, each with its summary line and its first MAX_RANGES ranges."""
    ranges = explanation.get("ranges") or []
    out = []
    for g in groups[:MAX_GROUPS]:
        rows = []
        for i in (g.get("ranges") or [])[:MAX_RANGES]:
            r = ranges[i] if isinstance(i, int) and 0 <= i < len(ranges) else {}
            rows.append({"offsets": spans_phrase([(r.get("first_offset"), r.get("last_offset"))]),
                         "values": len(r.get("values") or []), "from_s": r.get("acked_from_s"),
                         "to_s": r.get("acked_to_s"), "leader": r.get("leader") or " or ".join(
                             r.get("candidates") or []) or None, "epoch": r.get("leader_epoch")})
        spans = [tuple(s) for s in g.get("spans") or []]
        out.append({**g, "summary": f"{g.get('values', 0):,} value{'s' if g.get('values') != 1 else ''} of "
                                    f"p{g.get('partition')}, {spans_phrase(spans)}",
                    "range_rows": rows, "more_ranges": max(0, len(g.get("ranges") or []) - MAX_RANGES)})
    return out


def evidence_section(run: Path, explanation: Mapping[str, Any] | None) -> list[str]:
    """HTML fragments for report.html (nothing when `explanation` is None); writes evidence/control.json."""
    if not explanation:
        return []
    timelines = sorted((explanation.get("timelines") or {}).items(), key=lambda kv: int(kv[0]))
    control = write_control(Path(run), explanation)
    files = [f for f in _FILES if (Path(run) / "evidence" / f).is_file()]
    groups = groups_of(explanation)
    return [render("evidence.html.j2", explanation=explanation, groups=_shown(explanation, groups), total=len(groups),
                   values=sum(g.get("values") or 0 for g in groups), timelines=timelines, control=control,
                   files=files)]
