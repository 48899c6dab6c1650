"""Regressions of a suite night against the nights before it (docs/suites.md).

A regression is a cell that passed on the night before and fails now, or an anomaly kind (failed, or observed
and allowed) that this cell never showed on an earlier night. A first night has nothing to regress from.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kchaos.checkers.verdict.judge import FAIL, PASS
from kchaos.reports.suite.junit import ERROR
from kchaos.reports.suite.run_index import open_store_index
from kchaos.reports.suite.trends import Night, Trend, trend, when

__all__ = ["Regression", "night_regressions", "of_night", "regressions"]

FAILS_NOW, NEW_KIND = "fails now", "new anomaly"


@dataclass(frozen=True)
class Regression:
    """One regression: the cell (name and label), what regressed (FAILS_NOW or NEW_KIND), the night it appeared,
    the night it is measured against, and a sentence saying so."""

    cell: str
    label: str
    what: str
    night: str
    before: str
    text: str


def regressions(tr: Trend, night: str | None = None) -> list[Regression]:
    """The regressions of night `night` (a path below the store; default the newest) of trend `tr`, against the
    nights before it: cells that failed first, then new anomaly kinds, in the suite's cell order."""
    rels = [n.rel for n in tr.nights]
    i = rels.index(night) if night in rels else len(rels) - 1
    if i <= 0:
        return []
    now, earlier = tr.nights[i], tr.nights[:i]
    out: list[Regression] = []
    for name in tr.cells:
        cell = now.cells.get(name)
        history = [n for n in earlier if name in n.cells]
        if cell is None or not history:
            continue
        label, prev = tr.labels.get(name, name), history[-1]
        judged = [n for n in history if n.cells[name].word != ERROR]  # a night it could not run says nothing
        seen = set().union(*(n.cells[name].kinds for n in history))
        if cell.word == FAIL and judged and judged[-1].cells[name].word == PASS:
            was = judged[-1]
            grounds = "; ".join(f"{n} {k}" + (" (new)" if k not in seen else "") for k, n in cell.failed.items())
            out.append(Regression(name, label, FAILS_NOW, now.rel, was.rel,
                                  f"{label}: passed on {when(was.stamp)}, fails on {when(now.stamp)}"
                                  + (f": {grounds}" if grounds else "")))
            seen |= set(cell.failed)  # said above: not again as new kinds
        for kind in sorted(cell.kinds - seen):
            how = "fails" if kind in cell.failed else "observed, allowed"
            n = cell.failed.get(kind) or cell.allowed.get(kind)
            out.append(Regression(name, label, NEW_KIND, now.rel, prev.rel,
                                  f"{label}: new anomaly kind {kind} ({n}, {how}); not seen in "
                                  f"{len(history)} earlier night(s)"))
    return sorted(out, key=lambda r: r.what != FAILS_NOW)


def night_regressions(store: Path, night_dir: Path) -> tuple[list[Regression], str | None]:
    """The regressions of the suite night in `night_dir` against the earlier nights of its suite, from the index
    of the store at `store` (refreshed for that suite first), and the night compared with (None on a suite's
    first night, or a night outside the store)."""
    night_dir = Path(night_dir).resolve()
    with open_store_index(Path(store)) as index:
        if index.root not in night_dir.parents:
            return [], None
        index.refresh(night_dir.parent)
        rel = night_dir.relative_to(index.root).as_posix()
        row = next((n for n in index.nights() if n["night"] == rel), None)
        if row is None:
            return [], None
        tr = trend(index, row["suite"], row["kind"], last=10_000)
    regs, before = of_night(tr, rel)
    return regs, before.rel if before else None


def of_night(tr: Trend, night: str) -> tuple[list[Regression], Night | None]:
    """The regressions of night `night` (a path below the store) of trend `tr`, and the night before it; ([], None)
    on the suite's first night, or a night in which no cell ran (it is not in the trend)."""
    rels = [n.rel for n in tr.nights]
    i = rels.index(night) if night in rels else 0
    return (regressions(tr, night), tr.nights[i - 1]) if i > 0 else ([], None)
