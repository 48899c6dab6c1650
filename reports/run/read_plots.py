"""The plots of what a queue run's consumers read (`reports.run.reads`): unseen writes over time and each
consumer's realtime lag, as Jepsen's Kafka workload draws them, faults shaded; and the sends that did not succeed,
per second and by error."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.lines import Line2D

from kchaos.checkers.send_errors import error_name
from kchaos.core.faults import FaultCatalogue
from kchaos.reports.run.plot_frame import PALETTE, fault_spans, figure, finish, mark_rebalances, note, shade
from kchaos.reports.run.png_cache import cached

__all__ = ["errors_png", "lag_png", "unseen_png"]

MOST_ERRORS = 6  # errors drawn a line each; the rest are one line, "other"


def _panel(ts: Sequence[float], windows: Sequence[Mapping[str, Any]], catalogue: FaultCatalogue | None,
           rebalances: Sequence[float]):
    """One panel over the times `ts`, its faults shaded and rebalances marked: (figure, axes, spans, handles)."""
    fig, (ax,) = figure(height=3.2)
    spans = fault_spans(windows, max(ts, default=None), catalogue)
    return fig, ax, spans, shade([ax], spans) + mark_rebalances([ax], rebalances)


def _finish(fig, ax, spans, ts: Sequence[float], lines: list, handles: list, empty: str, ylabel: str,
            xlabel: str) -> bytes:
    """The panel as PNG bytes: its lines' legend first, from zero up; `empty` written in it when it has none."""
    if lines:
        handles = lines + handles
        ax.set_ylim(bottom=0)
    else:
        note(ax, empty)
    ax.set_ylabel(ylabel)
    return finish(fig, [ax], spans, ts, xlabel, handles)


@cached
def unseen_png(times: np.ndarray, unseen: np.ndarray, windows: Sequence[Mapping[str, Any]] = (), *,
               catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = (),
               final_read_s: float | None = None) -> bytes:
    """Acknowledged writes that no consumer had read yet, over time; the final read's start marked."""
    ts = [float(times[0]), float(times[-1])] if len(times) else []
    fig, ax, spans, handles = _panel(ts, windows, catalogue, rebalances)
    lines: list = []
    if len(times):
        lines = ax.plot(times, unseen, drawstyle="steps-post", color="#1f77b4", linewidth=1.2,
                        label=f"acknowledged, not yet read (at the end: {int(unseen[-1]):,})")
        if final_read_s is not None:
            ax.axvline(final_read_s, color="#555", linestyle="--", linewidth=0.9)
            handles.append(Line2D([], [], color="#555", linestyle="--", label="final read starts"))
    return _finish(fig, ax, spans, ts, lines, handles, "nothing acknowledged", "unseen writes", "time (s)")


@cached
def lag_png(series: Mapping[Any, tuple[np.ndarray, np.ndarray]], windows: Sequence[Mapping[str, Any]] = (), *,
            catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = ()) -> bytes:
    """Each consumer's realtime lag at its polls (seconds behind the oldest acknowledged write it had not read)."""
    ts = [float(t) for times, _ in series.values() if len(times) for t in (times[0], times[-1])]
    fig, ax, spans, handles = _panel(ts, windows, catalogue, rebalances)
    lines = []
    for i, (proc, (times, lag)) in enumerate(sorted(series.items(), key=lambda kv: str(kv[0]))):
        if len(times):
            lines += ax.plot(times, lag, drawstyle="steps-post", color=PALETTE[i % len(PALETTE)], linewidth=1.1,
                             label=f"consumer {proc} (at most {float(lag.max()):.1f} s)")
    return _finish(fig, ax, spans, ts, lines, handles, "no polls", "realtime lag (s)", "poll time (s)")


@cached
def errors_png(done_s: np.ndarray, errors: np.ndarray, windows: Sequence[Mapping[str, Any]] = (), *,
               catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = (),
               span: Sequence[float] = ()) -> bytes:
    """Sends that failed or whose outcome is unknown, per second of completion, a line per error name (the client's
    error, as `send_errors` names it), the most frequent first."""
    ts = [float(x) for x in span]
    fig, ax, spans, handles = _panel(ts, windows, catalogue, rebalances)
    lines = []
    if len(done_s):
        names = np.array([error_name(e) for e in errors], dtype=object)
        kinds, counts = np.unique(names, return_counts=True)
        ranked = [str(k) for k in kinds[np.argsort(-counts, kind="stable")]]
        top = ranked[:MOST_ERRORS]
        if len(ranked) > MOST_ERRORS:
            names = np.where(np.isin(names, top), names, "other")
            top.append("other")
        lo, hi = np.floor(min(done_s.min(), *ts[:1])), np.floor(max(done_s.max(), *ts[1:])) + 1
        edges = np.arange(lo, hi + 1)
        for i, name in enumerate(top):
            sel = names == name
            per, _ = np.histogram(done_s[sel], bins=edges)
            lines += ax.plot(edges, np.append(per, per[-1]), drawstyle="steps-post", color=PALETTE[i % len(PALETTE)],
                             linewidth=1.1, label=f"{name} ({int(sel.sum()):,})")
    return _finish(fig, ax, spans, ts, lines, handles, "every send succeeded", "sends / s", "completion time (s)")
