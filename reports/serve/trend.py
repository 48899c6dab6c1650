"""The page of a suite across nights in `kchaos serve` (`/suites/<suite>/`): its regressions first, then per cell
the verdict, loss rate and p99 send latency of each night, then the nights, each linking to its runs.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from kchaos.reports.suite.regressions import regressions
from kchaos.reports.suite.run_index import RunIndex
from kchaos.reports.suite.sparkline import sparkline
from kchaos.reports.suite.trends import CellNight, Night, trend, when

__all__ = ["trend_page"]

COLOUR = {"clean": "#2e7d32", "unknown": "#9e9e9e", "noted": "#c9a000", "serious": "#ef8a17", "severe": "#c62828"}
LETTER = {"pass": "P", "fail": "F", "unknown": "?", "error": "E"}


def _href(rel: str, is_dir: bool = True) -> str:
    return "/" + "/".join(quote(p, safe="") for p in rel.split("/")) + ("/" if is_dir else "")


def runs_href(night: Night, cell: CellNight) -> str:
    """Where a cell's runs of a night are: their common directory below the night, the one run, or the night."""
    parents = {str(PurePosixPath(r).parent) for r in cell.runs}
    if len(parents) == 1 and parents != {night.rel}:
        return _href(parents.pop())
    return _href(cell.runs[0]) if len(cell.runs) == 1 else _href(night.rel)


def _percent(v: float) -> str:
    return f"{v:.1%}" if v < 0.1 else f"{v:.0%}"


def trend_page(index: RunIndex, suite: str, kind: str, root: Path) -> dict[str, Any]:
    """The context of serve.html.j2's trend page for `suite` (below `<store>/<kind>/`): regressions of the newest
    night, a row per cell (a square per night, linking to its runs, and two small line plots), the nights."""
    tr = trend(index, suite, kind)
    nights = tr.nights
    rows = []
    regs = regressions(tr)
    regressed = {r.cell for r in regs}
    for name in tr.cells:
        squares: list[dict[str, str] | None] = []
        loss: list[float | None] = []
        p99: list[float | None] = []
        colours: list[str] = []
        for n in nights:
            c = n.cells.get(name)
            if c is None:
                squares.append(None)
                loss.append(None)
                p99.append(None)
                colours.append("#ccc")
                continue
            grounds = "; ".join([f"fails: {k} {v}" for k, v in c.failed.items()]
                                + [f"allowed: {k} {v}" for k, v in c.allowed.items()])
            squares.append({"word": c.word, "letter": LETTER.get(c.word, "?"), "severity": c.severity,
                            "href": runs_href(n, c), "title": f"{when(n.stamp)}: {c.word}"
                            + (f", lost {c.lost} of {c.acked}" if c.acked else "")
                            + (f" ({grounds})" if grounds else "")})
            loss.append(c.loss_rate)
            p99.append(c.p99)
            colours.append(COLOUR[c.severity])
        newest = next((n.cells[name] for n in reversed(nights) if name in n.cells), None)
        rows.append({"cell": name, "label": tr.labels.get(name, name), "squares": squares,
                     "regressed": name in regressed,
                     "loss": sparkline(loss, _percent, f"{name}: loss rate per night", colours),
                     "p99": sparkline(p99, lambda v: f"{v:.0f} ms", f"{name}: p99 send latency per night"),
                     "newest": newest})
    night_rows = []
    for n in reversed(nights):
        t = n.tally()
        night_rows.append({"href": _href(n.rel), "started": when(n.stamp), "cells": len(n.cells),
                           **{w: t.get(w, 0) for w in ("pass", "fail", "unknown", "error")},
                           "regressions": len(regressions(tr, n.rel)),
                           "compare": _href(n.rel + "/compare.html", False)
                           if (root / n.rel / "compare.html").is_file() else None})
    return {"name": suite, "kind": kind, "nights": [{"href": _href(n.rel), "started": when(n.stamp)} for n in nights],
            "regressions": regs, "rows": rows, "night_rows": night_rows,
            "newest": when(nights[-1].stamp) if nights else None,
            "before": when(nights[-2].stamp) if len(nights) > 1 else None,
            "cell_hrefs": {r.cell: runs_href(nights[-1], nights[-1].cells[r.cell]) for r in regs}}
