"""The "Evidence" section of report.html (templates/evidence.html.j2): why each lost range was lost, each
affected partition's leader/epoch/ISR/ELR timeline from the KRaft metadata log, and after them the control
plane's timeline (reports/control_plane.py: the quorum, the controllers, broker registration and fencing).

Built from RUN/evidence/explanation.json (reports/explain.py writes it), and
for the control plane from the nodes' server.log and evidence/metadata.jsonl;
the control plane's rows are written to evidence/control.json on the way. A
run without explanation.json gets no section at all.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from reports.control_plane import CONTROL_FILE, write_control
from reports.html import render

__all__ = ["evidence_section"]

_FILES = ("explanation.json", CONTROL_FILE, "segments.jsonl", "metadata.jsonl", "raw/collect.json")


def evidence_section(run: Path, explanation: Mapping[str, Any] | None) -> list[str]:
    """HTML fragments for report.html (nothing when `explanation` is None); writes evidence/control.json."""
    if not explanation:
        return []
    timelines = sorted((explanation.get("timelines") or {}).items(), key=lambda kv: int(kv[0]))
    control = write_control(Path(run), explanation)
    files = [f for f in _FILES if (Path(run) / "evidence" / f).is_file()]
    return [render("evidence.html.j2", explanation=explanation, timelines=timelines, control=control, files=files)]
