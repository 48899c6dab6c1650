"""PNG plots of one run, in the manner of Jepsen's: fault windows drawn as shaded, labelled spans.

Every plot function returns PNG bytes and never raises on empty input: no
sends, no windows or no samples give an empty plot with a note. Times are
seconds on the history's clock (`time` / 1e9), the clock of
`results.json`'s timeline and of isr.jsonl. The figure, the shaded fault
windows and the legend come from `plot_frame`, and so do the
rebalances every plot draws when given their times (`rebalances`). Fault colours come
from the run's fault catalogue (a `FaultCatalogue`), passed as `catalogue`;
without one, each nemesis is drawn in a colour keyed by its package name.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from kchaos.core.faults import FaultCatalogue
from kchaos.reports.run.plot_frame import (
    PALETTE,
    WIDTH,
    Span,
    fault_spans,
    figure,
    finish,
    mark_rebalances,
    nemesis_color,
    note,
    shade,
)
from kchaos.reports.run.png_cache import cached

__all__ = ["Sends", "Span", "Marks", "nemesis_color", "fault_spans", "latency_png", "latency_quantiles_png",
           "quantiles_over_time", "throughput_png", "time_span",
           "offsets_png", "offset_marks", "IsrSeries", "isr_series", "isr_png", "MAX_POINTS", "TYPE_COLORS",
           "WIDTH"]

MAX_POINTS = 100_000  # per completion type in the latency plot, per series elsewhere
MAX_PANELS = 6  # partitions drawn one panel each; more share one panel
TYPES = ("ok", "info", "fail")
TYPE_COLORS = {"ok": "#1f77b4", "info": "#ff9f00", "fail": "#e0218a"}
OUTAGE_COLOR = "#d62728"
NULL = np.iinfo(np.int64).min  # a missing partition, value or offset


@dataclass
class Sends:
    """Completed sends of a run, one entry per completion, in history order.

    Times in seconds, latency in ms; `type` holds "ok", "fail" or "info";
    `partition`, `value` and `offset` are NULL where the history has none.
    """

    invoke_s: np.ndarray
    done_s: np.ndarray
    latency_ms: np.ndarray
    type: np.ndarray
    partition: np.ndarray
    value: np.ndarray
    offset: np.ndarray

    @classmethod
    def empty(cls) -> Sends:
        """No sends at all."""
        f, i = np.zeros(0, float), np.zeros(0, np.int64)
        return cls(f, f, f, np.zeros(0, object), i, i, i)

    def __len__(self) -> int:
        return len(self.done_s)


@dataclass
class Marks:
    """Anomalies to mark on the offsets plot: values (lost, offset mismatch) and [partition, offset] pairs.

    `counts` are the checker's exact counts, shown in the legend next to how
    many could be placed (a value is placed where its ok send was acknowledged).
    `exposed_s` gives a time for an inconsistent offset no ok send names.
    """

    lost: Sequence[int] = ()
    mismatch: Sequence[int] = ()
    inconsistent: Sequence[tuple[int, int]] = ()
    exposed_s: Mapping[tuple[int, int], float] | None = None
    counts: Mapping[str, int] | None = None


def _subsample(n: int, limit: int, keep: np.ndarray | None = None) -> np.ndarray:
    """Indices of at most about `limit` of n items, evenly spread; `keep` (indices) always kept."""
    if n <= limit:
        return np.arange(n)
    idx = np.linspace(0, n - 1, limit).astype(np.int64)
    if keep is not None and len(keep):
        idx = np.union1d(idx, keep)
    return idx


def time_span(sends: Sends) -> list[float]:
    """The sends' first invocation and last completion, in seconds; [] without sends."""
    return [float(sends.invoke_s.min()), float(sends.done_s.max())] if len(sends) else []


def _end(ts: Iterable[float]) -> float | None:
    return max(ts, default=None)


@cached
def latency_png(sends: Sends, windows: Sequence[Mapping[str, Any]] = (), *,
                catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = ()) -> bytes:
    """Send latency (ms, log scale) against invocation time, one colour per completion type, faults shaded.

    At most MAX_POINTS points per type are drawn (evenly spread, plus the
    slowest 1%, so outliers survive subsampling).
    """
    fig, (ax,) = figure(height=4.5)
    spans = fault_spans(windows, _end(time_span(sends)), catalogue)
    faults = shade([ax], spans) + mark_rebalances([ax], rebalances)
    handles: list = []
    for t in TYPES:
        sel = np.flatnonzero(sends.type == t)
        if not len(sel):
            continue
        lat = np.maximum(sends.latency_ms[sel], 1e-3)  # zero does not fit a log axis
        slow = np.argsort(lat)[-max(1, MAX_POINTS // 100):] if len(sel) > MAX_POINTS else None
        idx = _subsample(len(sel), MAX_POINTS, slow)
        ax.plot(sends.invoke_s[sel][idx], lat[idx], ".", markersize=2.5 if t == "ok" else 4.5, alpha=0.6,
                color=TYPE_COLORS[t], rasterized=True)
        handles.append(Line2D([], [], marker="o", linestyle="none", color=TYPE_COLORS[t],
                              label=f"{t} ({len(sel)}{'' if len(idx) == len(sel) else f', {len(idx)} drawn'})"))
    if handles:
        ax.set_yscale("log")
    else:
        note(ax, "no completed sends")
    ax.set_ylabel("send latency (ms)")
    return finish(fig, [ax], spans, time_span(sends), "invocation time (s)", handles + faults)


QUANTILES = ((0.5, "p50", "#1f77b4"), (0.95, "p95", "#2ca02c"), (0.99, "p99", "#ff7f0e"), (1.0, "max", "#d62728"))
BUCKETS = 240  # time buckets of the quantile plot at most: 1 s each, wider for a long run


def quantiles_over_time(invoke_s: np.ndarray, latency_ms: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Latency quantiles per time bucket (1 s, or the run's length over BUCKETS when that is longer): the
    buckets' starts and, per name of QUANTILES, each bucket's quantile (NaN where no send was invoked)."""
    if not len(invoke_s):
        return np.zeros(0), {name: np.zeros(0) for _, name, _ in QUANTILES}
    lo = np.floor(invoke_s.min())
    width = max(1.0, float(np.ceil((invoke_s.max() - lo + 1) / BUCKETS)))
    bucket = ((invoke_s - lo) // width).astype(np.int64)
    n = int(bucket.max()) + 1
    order = np.lexsort((latency_ms, bucket))
    starts = np.searchsorted(bucket[order], np.arange(n + 1))
    out = {name: np.full(n, np.nan) for _, name, _ in QUANTILES}
    for b in range(n):
        lat = latency_ms[order[starts[b]:starts[b + 1]]]  # sorted within its bucket
        for q, name, _ in QUANTILES:
            if len(lat):
                out[name][b] = lat[max(0, int(np.ceil(q * len(lat))) - 1)]  # the nearest rank
    return lo + width * np.arange(n), out


@cached
def latency_quantiles_png(sends: Sends, windows: Sequence[Mapping[str, Any]] = (), *,
                          catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = ()) -> bytes:
    """Acknowledged sends' latency quantiles over time (p50, p95, p99 and max per bucket of invocation time, log
    scale), as Jepsen's perf checker draws them, faults shaded; the sends that failed or whose outcome is unknown
    are counted in the legend (the scatter above shows them)."""
    fig, (ax,) = figure(height=3.6)
    spans = fault_spans(windows, _end(time_span(sends)), catalogue)
    handles = shade([ax], spans) + mark_rebalances([ax], rebalances)
    ok = sends.type == "ok"
    starts, qs = quantiles_over_time(sends.invoke_s[ok], np.maximum(sends.latency_ms[ok], 1e-3))
    if len(starts):
        step = float(starts[1] - starts[0]) if len(starts) > 1 else 1.0
        for _, name, color in QUANTILES:
            ax.plot(np.append(starts, starts[-1] + step), np.append(qs[name], qs[name][-1]), drawstyle="steps-post",
                    color=color, linewidth=1.1, label=name)
        lines: list[Line2D | Patch] = [Line2D([], [], color=c, label=f"{n} (ok sends, per {step:g} s)" if n == "p50"
                                              else n) for _, n, c in QUANTILES]
        lines += [Line2D([], [], linestyle="none", label=f"{t}: {int((sends.type == t).sum())} sends")
                  for t in TYPES if t != "ok" and (sends.type == t).any()]
        handles = lines + handles
        ax.set_yscale("log")
    else:
        note(ax, "no acknowledged sends")
    ax.set_ylabel("send latency (ms)")
    return finish(fig, [ax], spans, time_span(sends), "invocation time (s)", handles)


@cached
def throughput_png(sends: Sends, windows: Sequence[Mapping[str, Any]] = (), *,
                   catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = (),
                   outages: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """Completed sends per second (by completion time), one line per completion type, faults shaded, and the
    outages (results.json's timeline `outages` stretches: no write acknowledged for a second or more) as a red
    band along the bottom."""
    fig, (ax,) = figure(height=3.6)
    spans = fault_spans(windows, _end(time_span(sends)), catalogue)
    handles = shade([ax], spans) + mark_rebalances([ax], rebalances)
    if outages:
        ax.broken_barh([(o["start_s"], o["seconds"]) for o in outages], (0, 0.05), transform=ax.get_xaxis_transform(),
                       facecolor=OUTAGE_COLOR, linewidth=0, zorder=3)
        n, longest = len(outages), max(o["seconds"] for o in outages)
        handles.append(Patch(facecolor=OUTAGE_COLOR,
                             label=f"no write acknowledged ({n} outage{'' if n == 1 else 's'}, longest {longest:g} s)"))
    if len(sends):
        lo, hi = np.floor(sends.done_s.min()), np.floor(sends.done_s.max()) + 1
        edges = np.arange(lo, hi + 1)
        lines = []
        for t in TYPES:
            sel = sends.type == t
            if sel.any():
                counts, _ = np.histogram(sends.done_s[sel], bins=edges)
                lines += ax.plot(edges, np.append(counts, counts[-1]), drawstyle="steps-post", color=TYPE_COLORS[t],
                                 label=f"{t} ({int(sel.sum())})", linewidth=1.2)
        handles = lines + handles
        ax.set_ylim(bottom=0)
    else:
        note(ax, "no completed sends")
    ax.set_ylabel("sends / s")
    return finish(fig, [ax], spans, time_span(sends), "completion time (s)", handles)


def _partition_axes(parts: Sequence[int], per_panel_height: float, sharey: bool = False):
    """A figure with one panel per partition (or one shared panel when there are many) and panel-of-partition."""
    n = len(parts) if 0 < len(parts) <= MAX_PANELS else 1
    fig, axes = figure(n, height=min(11.0, 1.0 + per_panel_height * n) if n > 1 else 4.0, sharey=sharey)
    where = {p: (axes[i] if n > 1 else axes[0]) for i, p in enumerate(parts)}
    return fig, axes, where, n > 1


class MarkStyle(TypedDict):
    """The Line2D keywords of an anomaly kind's markers."""

    marker: str
    color: str
    markersize: float
    markerfacecolor: NotRequired[str]
    mew: NotRequired[float]


class RowMarkStyle(MarkStyle):
    """A kind's marker style and its row along the top of a plot (`y`, in axes fraction)."""

    y: float


def mark_rows(ax: Any, styles: Mapping[str, RowMarkStyle], marks: Mapping[str, Sequence[float]] | None,
              counts: Mapping[str, int] | None) -> list[Line2D]:
    """Each kind of `styles` with `marks` (times) or a count a row of markers along `ax`'s top; its legend entries,
    each giving the checker's count (`counts`) and how many were marked."""
    out = []
    for kind, style in styles.items():
        at = list((marks or {}).get(kind) or [])
        n = (counts or {}).get(kind) or 0
        if not at and not n:
            continue
        y, s = style["y"], cast(MarkStyle, {k: v for k, v in style.items() if k != "y"})  # cast: the style less y
        ax.plot(at, [y] * len(at), linestyle="none", transform=ax.get_xaxis_transform(), clip_on=False, **s)
        out.append(Line2D([], [], linestyle="none", label=f"{kind} ({n}; {len(at)} marked)", **s))
    return out


MARK_STYLES = {  # drawn in this order, so crosses (lost) stay visible on top of circles and diamonds
    "inconsistent_offset": MarkStyle(marker="D", markerfacecolor="none", color="#9467bd", markersize=7, mew=1.0),
    "acked_offset_mismatch": MarkStyle(marker="o", markerfacecolor="none", color="#ff7f0e", markersize=8, mew=1.0),
    "lost": MarkStyle(marker="x", color="#d62728", markersize=6, mew=1.4),
}


def offset_marks(sends: Sends, marks: Marks) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Where the offsets plot marks each anomaly kind: `{kind: (time_s, partition, offset)}` arrays.

    lost and acked_offset_mismatch values sit at their ok send's ack; an
    inconsistent offset at every ok send acknowledged there, or, when none
    was, at its `exposed_s`. Values with no ok send in `sends` are not placed.
    """
    ok = np.flatnonzero((sends.type == "ok") & (sends.offset != NULL) & (sends.partition != NULL))
    part, off, t, val = sends.partition[ok], sends.offset[ok], sends.done_s[ok], sends.value[ok]
    incon = {(int(p), int(o)) for p, o in marks.inconsistent}
    key = part * (1 << 32) + off
    masks = {"inconsistent_offset": np.isin(key, np.asarray([p * (1 << 32) + o for p, o in incon], dtype=np.int64)),
             "acked_offset_mismatch": np.isin(val, np.asarray(list(marks.mismatch), dtype=np.int64)),
             "lost": np.isin(val, np.asarray(list(marks.lost), dtype=np.int64))}
    out = {k: (t[m], part[m], off[m]) for k, m in masks.items()}
    placed = set(zip(out["inconsistent_offset"][1].tolist(), out["inconsistent_offset"][2].tolist()))
    exposed = marks.exposed_s or {}
    late = [(exposed[k], k[0], k[1]) for k in sorted(incon - placed) if exposed.get(k) is not None]
    if late:
        t_, p_, o_ = (np.asarray(c) for c in zip(*late))
        i = out["inconsistent_offset"]
        out["inconsistent_offset"] = (np.append(i[0], t_), np.append(i[1], p_), np.append(i[2], o_))
    return out


@cached
def offsets_png(sends: Sends, windows: Sequence[Mapping[str, Any]] = (), marks: Marks | None = None, *,
                catalogue: FaultCatalogue | None = None, rebalances: Sequence[float] = ()) -> bytes:
    """Acknowledged offset against acknowledgement time, per partition, faults shaded.

    Anomalies are marked where `offset_marks` places them: lost values as red
    crosses, acked_offset_mismatch as open orange circles, inconsistent
    offsets as open purple diamonds; the legend gives the checker's count and
    how many were marked.
    """
    marks = marks or Marks()
    ok = np.flatnonzero((sends.type == "ok") & (sends.offset != NULL) & (sends.partition != NULL))
    part, off, t = sends.partition[ok], sends.offset[ok], sends.done_s[ok]
    placed = offset_marks(sends, marks)
    parts = sorted(set(np.unique(part).tolist()) | set(placed["inconsistent_offset"][1].tolist()))
    fig, axes, where, panels = _partition_axes(parts, 1.7)
    ts = time_span(sends) + placed["inconsistent_offset"][0].tolist()
    spans = fault_spans(windows, _end(ts), catalogue)
    faults = shade(axes, spans) + mark_rebalances(axes, rebalances)
    scale = 1.0 if sum(len(v[0]) for v in placed.values()) < 300 else 0.6
    for i, p in enumerate(parts):
        ax = where[p]
        sel = np.flatnonzero(part == p)
        idx = sel[_subsample(len(sel), MAX_POINTS)]
        ax.plot(t[idx], off[idx], ".", markersize=2, color="#1f77b4" if panels else PALETTE[i % len(PALETTE)],
                rasterized=True)
        for kind, style in MARK_STYLES.items():
            mt, mp, mo = placed[kind]
            m = mp == p
            if m.any():
                scaled: MarkStyle = {**style, "markersize": style["markersize"] * scale}
                ax.plot(mt[m], mo[m], linestyle="none", **scaled)
        if panels:
            ax.set_ylabel(f"p{p} offset", fontsize=9)
    if panels or not parts:
        handles = [Line2D([], [], marker="o", linestyle="none", markersize=3, color="#1f77b4",
                          label=f"acknowledged ({len(ok)})")]
    else:
        axes[0].set_ylabel("offset")
        handles = [Line2D([], [], marker="o", linestyle="none", color=PALETTE[i % len(PALETTE)],
                          label=f"partition {p}") for i, p in enumerate(parts[:10])]
    counts = marks.counts or {}
    for kind in reversed(MARK_STYLES):
        n = len(placed[kind][0])
        if n or counts.get(kind):
            handles.append(Line2D([], [], linestyle="none", label=f"{kind} ({counts.get(kind, n)}; {n} marked)",
                                  **MARK_STYLES[kind]))
    if not parts:
        note(axes[0], "no acknowledged sends with offsets")
    for ax in axes:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    return finish(fig, axes, spans, ts, "acknowledgement time (s)", handles + faults)


@dataclass
class IsrSeries:
    """One partition's isr.jsonl samples as plotted: times (s), ISR and replica counts (NaN at failed
    samples, so each is a gap) and leader changes as (time, ISR size, new leader) (leader -1: none)."""

    time_s: np.ndarray
    isr: np.ndarray
    replicas: np.ndarray
    leader_changes: list[tuple[float, int, int | None]]


def isr_series(samples: Sequence[Mapping[str, Any]]) -> tuple[dict[int, IsrSeries], list[float]]:
    """Per partition, its IsrSeries (every failed sample is a NaN in each); and the failed samples' times."""
    rows = sorted((s for s in samples if isinstance(s.get("time"), (int, float))), key=lambda s: s["time"])
    errors = [s["time"] / 1e9 for s in rows if "error" in s]
    parts = sorted({s["partition"] for s in rows if "error" not in s and isinstance(s.get("partition"), int)})
    out = {}
    for p in parts:
        pts = [s for s in rows if "error" in s or s.get("partition") == p]
        ok = [s for s in pts if "error" not in s]
        changes = [(b["time"] / 1e9, len(b.get("isr") or []), b.get("leader"))
                   for a, b in zip(ok, ok[1:]) if a.get("leader") != b.get("leader")]
        out[p] = IsrSeries(np.array([s["time"] / 1e9 for s in pts]),
                           np.array([np.nan if "error" in s else len(s.get("isr") or []) for s in pts], float),
                           np.array([np.nan if "error" in s else len(s.get("replicas") or []) for s in pts], float),
                           changes)
    return out, errors


@cached
def isr_png(samples: Sequence[Mapping[str, Any]], windows: Sequence[Mapping[str, Any]] = (),
            min_insync: int | None = None, *, catalogue: FaultCatalogue | None = None,
            rebalances: Sequence[float] = ()) -> bytes:
    """ISR size per partition over time from isr.jsonl samples (`isr_series`), as steps, faults shaded.

    Failed samples (`error` lines) are gaps in every line, and thin red
    vertical lines; a leader change is a triangle labelled with the new leader
    ("none" for -1); the replica count is a dashed grey line and min.insync a
    dotted red one.
    """
    series, errors = isr_series(samples)
    parts = sorted(series)
    fig, axes, where, panels = _partition_axes(parts, 1.5, sharey=True)
    times = [float(x) for s in series.values() for x in s.time_s[[0, -1]]] + errors
    spans = fault_spans(windows, _end(times), catalogue)
    faults = shade(axes, spans) + mark_rebalances(axes, rebalances)
    handles, top = [], 0
    for i, p in enumerate(parts):
        ax, s = where[p], series[p]
        color = "#1f77b4" if panels else PALETTE[i % len(PALETTE)]
        ax.plot(s.time_s, s.isr, drawstyle="steps-post", color=color, linewidth=1.6)
        if panels or i == 0:
            ax.plot(s.time_s, s.replicas, drawstyle="steps-post", color="#999", linestyle="--", linewidth=0.9)
        top = max([top] + [int(np.nanmax(a)) for a in (s.isr, s.replicas) if np.isfinite(a).any()])
        for tx, size, leader in s.leader_changes:
            ax.plot([tx], [size], marker="v", color="#d62728" if leader == -1 else "#333", markersize=6)
            if len(s.leader_changes) <= 30:
                ax.annotate("none" if leader == -1 else f"L{leader}", (tx, size), xytext=(2, 4),
                            textcoords="offset points", fontsize=7)
        if min_insync is not None:
            ax.axhline(min_insync, color="#d62728", linestyle=":", linewidth=1)
        if panels:
            ax.set_ylabel(f"p{p} ISR", fontsize=9)
        else:
            ax.set_ylabel("ISR size")
            handles += [Line2D([], [], color=color, label=f"partition {p}")] if i < 10 else []
    for ax in axes:
        for e in errors:
            ax.axvline(e, color="#d62728", alpha=0.25, linewidth=0.8)
    if not parts:
        note(axes[0], "no ISR samples" + (f" ({len(errors)} failed samples)" if errors else ""))
    else:
        handles += [Line2D([], [], color="#999", linestyle="--", label="replicas"),
                    Line2D([], [], marker="v", linestyle="none", color="#333", label="leader change (new leader)")]
        if min_insync is not None:
            handles.append(Line2D([], [], color="#d62728", linestyle=":", label=f"min.insync = {min_insync}"))
        if errors:
            handles.append(Line2D([], [], color="#d62728", alpha=0.4, label=f"failed sample ({len(errors)})"))
        axes[0].set_ylim(-0.2, max(top, min_insync or 0) + 0.6)
    for ax in axes:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return finish(fig, axes, spans, times, "time (s)", handles + faults, loc="best")
