"""The "Evidence" section of report.html (templates/evidence.html.j2): why each lost range was lost, and each
affected partition's leader/epoch/ISR/ELR timeline from the KRaft metadata log.

Built from RUN/evidence/explanation.json only (reports/explain.py writes it);
a run without that file gets no section at all.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from reports.html import render

__all__ = ["evidence_section"]

_FILES = ("explanation.json", "segments.jsonl", "metadata.jsonl", "raw/collect.json")


def evidence_section(run: Path, explanation: Mapping[str, Any] | None) -> list[str]:
    """HTML fragments for report.html: nothing when `explanation` is None."""
    if not explanation:
        return []
    timelines = sorted((explanation.get("timelines") or {}).items(), key=lambda kv: int(kv[0]))
    files = [f for f in _FILES if (Path(run) / "evidence" / f).is_file()]
    return [render("evidence.html.j2", explanation=explanation, timelines=timelines, files=files)]
