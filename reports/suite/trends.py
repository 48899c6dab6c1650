"""A suite across nights: for each cell and each night, the verdict, loss rate, p99 send latency and anomaly kinds,
read from the results index.

A night is one run of a suite (`<store>/suites/<suite>/<stamp>/`). A cell's verdict on a night is its repetitions'
verdicts merged (checkers.verdict.merge), or "error" when a repetition could not be run; its loss rate is the
lost writes of its repetitions over their acknowledged writes, and its p99 the largest of theirs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kchaos.checkers.verdict.judge import merge
from kchaos.reports.severity import level
from kchaos.reports.suite.junit import ERROR
from kchaos.reports.suite.run_index import RunIndex

__all__ = ["CellNight", "Night", "Trend", "trend", "when"]


@dataclass(frozen=True)
class CellNight:
    """One cell on one night: its word (pass, fail, unknown, or error), severity, numbers and anomaly kinds
    (`failed` and `allowed`: kind → count, summed over its runs), and its run directories below the store."""

    word: str
    severity: str
    acked: int
    lost: int
    loss_rate: float | None
    p99: float | None
    failed: dict[str, int]
    allowed: dict[str, int]
    runs: tuple[str, ...]

    @property
    def kinds(self) -> set[str]:
        """Every anomaly kind observed: those that failed and those observed, allowed."""
        return set(self.failed) | set(self.allowed)


@dataclass(frozen=True)
class Night:
    """One night of a suite: its directory below the store, its stamp, and its cells by name."""

    rel: str
    stamp: str
    cells: dict[str, CellNight]

    def tally(self) -> dict[str, int]:
        """How many cells passed, failed, are unknown or errored that night."""
        words = [c.word for c in self.cells.values()]
        return {w: words.count(w) for w in ("pass", "fail", "unknown", ERROR) if w in words}


@dataclass(frozen=True)
class Trend:
    """A suite's nights, oldest first, and its cells in the order the newest night lists them, with labels."""

    suite: str
    kind: str
    nights: list[Night]
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def cells(self) -> list[str]:
        """Every cell of any night: the newest night's first, in its order, then cells only older nights had."""
        return list(self.labels)


def when(stamp: str) -> str:
    """A night's stamp as `2026-11-24 03:55Z` (a stamp not of that form, as it is)."""
    return f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}Z" if len(stamp) >= 13 else stamp


def _cell_night(rows: list[dict[str, Any]], errors: int) -> CellNight:
    verdicts = [r["verdict"] for r in rows if r["checked"]]
    word = ERROR if errors else merge(verdicts)
    acked = sum(r["acked"] or 0 for r in rows)
    lost = sum(r["lost"] or 0 for r in rows)
    failed: dict[str, int] = {}
    allowed: dict[str, int] = {}
    for r in rows:
        for k, n in r["failed"].items():
            failed[k] = failed.get(k, 0) + n
        for k, n in r["allowed"].items():
            allowed[k] = allowed.get(k, 0) + n
    p99s = [r["p99"] for r in rows if r["p99"] is not None]
    checked = [r for r in rows if r["checked"]]
    return CellNight(word, "severe" if errors else level(word, lost, acked, bool(allowed)), acked, lost,
                     round(lost / acked, 6) if acked and checked else None, max(p99s) if p99s else None,
                     failed, allowed, tuple(r["run"] for r in rows))


def night_of(index: RunIndex, night: dict[str, Any]) -> Night:
    """The cells of one night row: its runs grouped by cell, with progress.jsonl's errors."""
    rows = index.runs(night=night["night"])
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_cell.setdefault(r["cell"] or r["name"], []).append(r)
    errors: dict[str, int] = {}
    for e in night["progress"]:
        if e.get("status") == "error":
            errors[str(e.get("cell"))] = errors.get(str(e.get("cell")), 0) + 1
    names = [c["name"] for c in night["cells"] if c.get("name")]
    cells = {}
    for name in dict.fromkeys([*names, *by_cell, *errors]):
        if by_cell.get(name) or errors.get(name):
            cells[name] = _cell_night(by_cell.get(name, []), errors.get(name, 0))
    return Night(night["night"], night["stamp"], cells)


def trend(index: RunIndex, suite: str, kind: str = "suites", last: int = 30) -> Trend:
    """The last `last` nights of `suite` (below `<store>/<kind>/`), oldest first, with at least one cell."""
    rows = index.nights(suite, kind)
    nights = [n for n in (night_of(index, r) for r in rows) if n.cells][-last:]
    labels: dict[str, str] = {}
    for row in reversed(rows):
        for c in row["cells"]:
            if c.get("name"):
                labels.setdefault(c["name"], c.get("label") or c["name"])
    for n in reversed(nights):
        for name in n.cells:
            labels.setdefault(name, name)
    seen = {name for n in nights for name in n.cells}
    return Trend(suite, kind, nights, {k: v for k, v in labels.items() if k in seen})
