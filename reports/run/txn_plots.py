"""The plots of a txn run: transactions per second by outcome, and transaction latency, with the checker's
aborted reads and torn transactions marked, faults shaded and rebalances drawn as on every run plot.
Like every run plot, each returns PNG bytes and never raises on empty input.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from kchaos.core.faults import FaultCatalogue
from kchaos.reports.run.plot_frame import fault_spans, figure, finish, mark_rebalances, note, shade
from kchaos.reports.run.plots import TYPE_COLORS, RowMarkStyle, mark_rows
from kchaos.reports.run.png_cache import cached

__all__ = ["OUTCOMES", "MARK_STYLES", "per_second", "txn_latency_png", "txn_png"]


OUTCOMES = {"ok": "committed (ok)", "fail": "aborted (fail)", "info": "indefinite (info)"}
# Ticks along the top of the plot at the time of the op that shows the anomaly, one row per kind.
MARK_STYLES = {"G1a": RowMarkStyle(marker="v", color="#d62728", markersize=8, y=0.96),
               "torn_transaction": RowMarkStyle(marker="X", color="#8b0000", markersize=8, y=0.90),
               "aborted_read": RowMarkStyle(marker="|", color="#9467bd", markersize=9, mew=1.2, y=0.84)}


def per_second(done_s: np.ndarray, types: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Transactions per whole second of completion time: (bin edges in s, {outcome: count per bin}) for the
    outcomes of OUTCOMES that occur; no edges without transactions."""
    if not len(done_s):
        return np.zeros(0), {}
    edges = np.arange(np.floor(done_s.min()), np.floor(done_s.max()) + 2)
    return edges, {t: np.histogram(done_s[types == t], bins=edges)[0] for t in OUTCOMES if (types == t).any()}


def _times(done_s: np.ndarray) -> list[float]:
    return [float(done_s.min()), float(done_s.max())] if len(done_s) else []


@cached
def txn_png(done_s: np.ndarray, types: np.ndarray, windows: Sequence[Mapping[str, Any]] = (), *,
            marks: Mapping[str, Sequence[float]] | None = None, counts: Mapping[str, int] | None = None,
            rebalances: Sequence[float] = (), catalogue: FaultCatalogue | None = None) -> bytes:
    """Committed, aborted and indefinite transactions per second (by completion time) as steps, faults shaded,
    rebalances drawn; each kind of `marks` (MARK_STYLES: times) a row of markers along the top, its legend entry
    giving the checker's count (`counts`) and how many were marked."""
    fig, (ax,) = figure(height=4.2)
    ts = _times(done_s) + [float(x) for m in (marks or {}).values() for x in m] + [float(x) for x in rebalances]
    spans = fault_spans(windows, max(ts, default=None), catalogue)
    handles = shade([ax], spans) + mark_rebalances([ax], rebalances)
    edges, series = per_second(done_s, types)
    lines = []
    for t, label in OUTCOMES.items():
        if t in series:
            c = series[t]
            lines += ax.plot(edges, np.append(c, c[-1]), drawstyle="steps-post", color=TYPE_COLORS[t], linewidth=1.2,
                             label=f"{label} ({int((types == t).sum())})")
    lines += mark_rows(ax, MARK_STYLES, marks, counts)
    if len(done_s):
        ax.set_ylim(0, max((int(c.max()) for c in series.values()), default=1) * 1.25 + 0.5)
    else:
        note(ax, "no transactions")
    ax.set_ylabel("transactions / s")
    # The legend goes under the plot: the marks run along its top and the steps fill it.
    fig.subplots_adjust(bottom=1.15 / 4.2)
    ax.legend(handles=lines + handles, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=4, fontsize=8,
              frameon=False)
    return finish(fig, [ax], spans, ts, "completion time (s)", [])


@cached
def txn_latency_png(done_s: np.ndarray, types: np.ndarray, latency_ms: np.ndarray,
                    windows: Sequence[Mapping[str, Any]] = (), *, rebalances: Sequence[float] = (),
                    catalogue: FaultCatalogue | None = None) -> bytes:
    """Transaction latency (invocation to completion, ms, log scale) against completion time, one colour per
    outcome, faults shaded, rebalances drawn; transactions cut off by the end of the run have none."""
    fig, (ax,) = figure(height=3.8)
    ts = _times(done_s) + [float(x) for x in rebalances]
    spans = fault_spans(windows, max(ts, default=None), catalogue)
    handles = shade([ax], spans) + mark_rebalances([ax], rebalances)
    points = []
    for t, label in OUTCOMES.items():
        sel = (types == t) & np.isfinite(latency_ms)
        if sel.any():
            ax.plot(done_s[sel], np.maximum(latency_ms[sel], 1e-3), ".", markersize=4, alpha=0.6,
                    color=TYPE_COLORS[t], rasterized=True)
            points.append(Line2D([], [], marker="o", linestyle="none", color=TYPE_COLORS[t],
                                 label=f"{label} ({int(sel.sum())})"))
    if points:
        ax.set_yscale("log")
    else:
        note(ax, "no completed transactions")
    ax.set_ylabel("transaction latency (ms)")
    return finish(fig, [ax], spans, ts, "completion time (s)", points + handles)
