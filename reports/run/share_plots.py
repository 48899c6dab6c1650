"""The plot of a share run: what the group's members were delivered and how they acknowledged it, second by second,
and why records came back, with the checker's anomalies marked, faults shaded and rebalances drawn as on every run
plot. It returns PNG bytes and never raises on empty input.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from kchaos.core.faults import FaultCatalogue
from kchaos.reports.run.plot_frame import fault_spans, figure, finish, mark_rebalances, note, shade
from kchaos.reports.run.plots import RowMarkStyle, mark_rows
from kchaos.reports.run.png_cache import cached

__all__ = ["ACK_COLORS", "CAUSE_COLORS", "MARK_STYLES", "share_png"]

ACK_COLORS = {"delivered": "#1f77b4", "accept": "#2ca02c", "release": "#ff7f0e", "reject": "#7f7f7f"}
CAUSE_COLORS = {"release": "#ff7f0e", "failed_accept": "#9467bd", "crash": "#8c564b", "lock_timeout": "#e377c2"}
CAUSE_LABELS = {"release": "after a release", "failed_accept": "after an accept not known to commit",
                "crash": "after the holder left or crashed", "lock_timeout": "after a lock expired"}


# Ticks along the top of the upper panel at the time of each anomalous delivery, one row per kind.
MARK_STYLES = {"redelivered_after_accept": RowMarkStyle(marker="v", color="#d62728", markersize=8, y=0.96),
               "redelivered_after_reject": RowMarkStyle(marker="v", color="#8b0000", markersize=8, y=0.90),
               "over_delivery_limit": RowMarkStyle(marker="X", color="#d62728", markersize=8, y=0.84),
               "concurrent_acquisition": RowMarkStyle(marker="D", color="#8b0000", markersize=6, y=0.78),
               "delivery_count_regressed": RowMarkStyle(marker="|", color="#a50f15", markersize=10, mew=2.0, y=0.72)}


def _steps(ax, edges: np.ndarray, counts: np.ndarray, **kw: Any) -> list[Line2D]:
    return ax.plot(edges, np.append(counts, counts[-1]), drawstyle="steps-post", linewidth=1.2, **kw)


@cached
def share_png(per_second: Sequence[Mapping[str, Any]], windows: Sequence[Mapping[str, Any]] = (), *,
              marks: Mapping[str, Sequence[float]] | None = None, counts: Mapping[str, int] | None = None,
              rebalances: Sequence[float] = (), catalogue: FaultCatalogue | None = None,
              span: Sequence[float] = ()) -> bytes:
    """Two panels over history time: records delivered and acknowledgements told by kind per second, then
    redeliveries per second by cause (those after a lock expired are the lock expiries), faults shaded; each
    kind of `marks` (MARK_STYLES: times) a row of markers along the top, its legend entry giving the checker's
    count (`counts`) and how many were marked. The x axis covers `span` too (the run's other plots' times), so
    a wait before the first delivery shows."""
    fig, (top, bottom) = figure(rows=2, height=6.0)
    seconds = np.array([int(r["second"]) for r in per_second], dtype=np.int64)
    ts = [float(x) for x in span] + ([float(seconds.min()), float(seconds.max()) + 1] if len(seconds) else []) + \
        [float(x) for m in (marks or {}).values() for x in m] + [float(x) for x in rebalances]
    spans = fault_spans(windows, max(ts, default=None), catalogue)
    handles = shade([top, bottom], spans) + mark_rebalances([top, bottom], rebalances)
    lines: list[Line2D] = []
    if len(seconds):
        edges = np.arange(seconds.min(), seconds.max() + 2)
        at = seconds - seconds.min()

        def series(get) -> np.ndarray:
            out = np.zeros(len(edges) - 1, dtype=np.int64)
            out[at] = [get(r) for r in per_second]
            return out
        tops = []
        for name, color in ACK_COLORS.items():
            c = series(lambda r, name=name: int(r.get(name, 0)))
            tops.append(c.max())
            label = "delivered" if name == "delivered" else f"{name} told"
            lines += _steps(top, edges, c, color=color, label=f"{label} ({int(c.sum())})")
        top.set_ylim(0, max(tops, default=1) * 1.35 + 0.5)
        redelivered = False
        for cause, color in CAUSE_COLORS.items():
            c = series(lambda r, cause=cause: int((r.get("redelivered") or {}).get(cause, 0)))
            if c.any():
                redelivered = True
                lines += _steps(bottom, edges, c, color=color,
                                label=f"redelivered {CAUSE_LABELS[cause]} ({int(c.sum())})")
        bottom.set_ylim(bottom=0)
        if not redelivered:
            note(bottom, "nothing was redelivered")
    else:
        note(top, "nothing was delivered")
    lines += mark_rows(top, MARK_STYLES, marks, counts)
    top.set_ylabel("records / s")
    bottom.set_ylabel("redeliveries / s")
    # The legend goes under the plot: the marks run along the top panel's top and the steps fill both.
    fig.subplots_adjust(bottom=1.5 / 6.0, hspace=0.12)
    bottom.legend(handles=lines + handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, fontsize=8,
                  frameon=False)
    return finish(fig, [top, bottom], spans, ts, "completion time (s)", [])
