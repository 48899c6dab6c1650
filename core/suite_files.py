"""The files of a suite run's directory that more than the suite runner reads: suite.json (what was run) and
progress.jsonl (one line per finished repetition, appended and flushed). The suite runner writes them;
`kchaos serve` shows a suite's progress from them."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_FILE, PROGRESS_FILE = "suite.json", "progress.jsonl"


@dataclass(frozen=True)
class Entry:
    """One finished repetition: `status` "done" (checked; `verdict` is its verdict, pass, fail or unknown, and
    `valid` the matching results.json value) or "error" (no verdict)."""

    cell: str
    rep: int
    seed: int
    run: str | None  # run directory relative to the suite directory
    status: str
    valid: bool | str | None
    seconds: float
    error: str | None = None
    verdict: str | None = None


def read_progress(sdir: Path) -> list[Entry]:
    """The finished repetitions recorded in progress.jsonl (a torn last line is ignored)."""
    path = sdir / PROGRESS_FILE
    out = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(Entry(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue
    return out


def latest(entries: list[Entry]) -> dict[tuple[str, int], Entry]:
    """The last entry of each (cell, rep): a repetition retried by --resume supersedes its error."""
    return {(e.cell, e.rep): e for e in entries}


def record_progress(sdir: Path, entry: Entry) -> None:
    """Append `entry` to progress.jsonl and flush it to disk: a crash after this loses no finished repetition."""
    with open(sdir / PROGRESS_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(asdict(entry)) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
