"""The frame every run plot shares: a figure of stacked panels, fault windows shaded as labelled
spans in their nemesis colours, a common x range, grid and legend, rendered to PNG bytes.

Figures are plain `matplotlib.figure.Figure`s on the Agg canvas: nothing is
registered with pyplot, so nothing needs closing and no backend is switched.
"""
from __future__ import annotations

import io
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from kchaos.core.faults import FaultCatalogue

DPI = 100
WIDTH = 11.0
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
            "#9c755f", "#bab0ac")

@dataclass(frozen=True)
class Span:
    """A fault window as drawn: [start, end] in seconds, its label (the nemesis) and colour.

    `open` is true when the window never closed (drawn to the plot's end);
    `applied` false when the fault was skipped or failed (drawn hatched).
    """

    start: float
    end: float
    label: str
    color: str
    applied: bool = True
    open: bool = False


def nemesis_color(spec: str | None, catalogue: FaultCatalogue | None = None) -> str:
    """The colour of a nemesis: the colour of its break op in `catalogue` (the run's faults.json), else (no
    catalogue, or a nemesis it does not describe) a fixed one keyed by its package name (the spec before any ":")."""
    kind = catalogue.get(spec) if catalogue is not None else None
    if kind is not None and kind.color:
        return kind.color
    name = (spec or "?").partition(":")[0]
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


def fault_spans(windows: Iterable[Mapping[str, Any]], end_s: float | None = None,
                catalogue: FaultCatalogue | None = None) -> list[Span]:
    """One Span per window of `results.json`'s timeline (same order); windows without a start are left out.

    A window that never closed (end_s None) ends at `end_s`, or at its own start
    when that is None too. Colours as `nemesis_color` with `catalogue`.
    """
    out = []
    for w in windows:
        start = w.get("start_s")
        if start is None:
            continue
        end = w.get("end_s")
        is_open = end is None
        if end is None:
            end = max(start, end_s) if end_s is not None else start
        label = w.get("nemesis") or w.get("f") or "?"
        out.append(Span(float(start), float(end), str(label), nemesis_color(label, catalogue),
                        bool(w.get("applied", True)), is_open))
    return out


def figure(rows: int = 1, height: float = 4.0, sharey: bool = False):
    """A WIDTH-wide figure of `rows` panels stacked on one x axis: (figure, list of axes)."""
    fig = Figure(figsize=(WIDTH, height), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 1, sharex=True, sharey=sharey, squeeze=False)[:, 0]
    # Fixed margins in inches: tight_layout measured every tick label and cost a second a report.
    fig.subplots_adjust(left=0.8 / WIDTH, right=1 - 0.25 / WIDTH, bottom=0.6 / height, top=1 - 0.45 / height,
                        hspace=0.12 * rows)
    return fig, list(axes)


def finish(fig: Figure, axes: Sequence, spans: Sequence[Span], ts: Iterable[float], xlabel: str, handles: list,
           loc: str = "upper left") -> bytes:
    """Common x range, labels, grid and legend; the figure as PNG bytes."""
    xlim(axes, spans, ts)
    label_spans(axes[0], spans)
    axes[-1].set_xlabel(xlabel)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if handles:
        axes[0].legend(handles=handles, loc=loc, fontsize=8, framealpha=0.85)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    fig.clf()
    return buf.getvalue()


def note(ax, text: str) -> None:
    """Write `text` in grey in the middle of `ax` (an empty plot says why it is empty)."""
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#777", fontsize=11)


def shade(axes: Sequence, spans: Sequence[Span]) -> list[Patch]:
    """Shade every span on every axes (`finish` labels them); legend patches, one per nemesis."""
    groups: dict[tuple[str, bool], list[list[float]]] = {}
    for s in sorted(spans, key=lambda s: s.start):
        merged = groups.setdefault((s.color, s.applied), [])
        if merged and s.start <= merged[-1][1]:  # overlapping windows of one colour shade as one
            merged[-1][1] = max(merged[-1][1], s.end)
        else:
            merged.append([s.start, s.end])
    # One collection per colour: a long run has thousands of windows, and an artist each cost seconds.
    for ax in axes:
        for (color, applied), ranges in groups.items():
            ax.broken_barh([(a, b - a) for a, b in ranges], (0, 1), transform=ax.get_xaxis_transform(),
                           facecolor=color, alpha=0.18 if applied else 0.08,
                           hatch=None if applied or len(ranges) > 200 else "//", linewidth=0, zorder=0)
    seen: dict[str, Patch] = {}
    for s in spans:
        seen.setdefault(s.label, Patch(facecolor=s.color, alpha=0.3, label=s.label))
    return list(seen.values())


LABEL_PT = 7  # the size of a fault's label above the plot
LABELLED = 12  # more spans than this are left to the legend: their labels would be a wall of text


def label_spans(ax, spans: Sequence[Span]) -> None:
    """Label each span above `ax` at its start, in rows so that no two labels overlap: a label goes in the lowest
    row where the one before it ends left of its start (widths estimated from the font size and the x range)."""
    if not spans or len(spans) > LABELLED:
        return
    lo, hi = ax.get_xlim()
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    per_char = 0.6 * LABEL_PT / 72 / width_in * (hi - lo)  # a character's width in data units
    ends: list[float] = []  # per row, where its last label ends
    for s in sorted(spans, key=lambda s: s.start):
        text = s.label + ("" if s.applied else " (not applied)")
        row = next((i for i, end in enumerate(ends) if end < s.start), len(ends))
        end = s.start + (len(text) + 1) * per_char
        if row < len(ends):
            ends[row] = end
        else:
            ends.append(end)
        ax.annotate(text, (s.start, 1.0), xycoords=ax.get_xaxis_transform(), xytext=(0, 2 + row * (LABEL_PT + 2)),
                    textcoords="offset points", fontsize=LABEL_PT, color=s.color, ha="left", va="bottom",
                    annotation_clip=False)


def xlim(axes: Sequence, spans: Sequence[Span], ts: Iterable[float]) -> None:
    """One x range for `axes` covering the times `ts` and every span, with a little padding."""
    ts = [float(x) for x in ts] + [s.end for s in spans] + [s.start for s in spans]
    if ts:
        lo, hi = min(ts), max(ts)
        pad = max(0.5, (hi - lo) * 0.01)
        axes[0].set_xlim(lo - pad, hi + pad)


REBALANCE_COLOR = "#6b6b6b"


def mark_rebalances(axes: Sequence, times: Sequence[float]) -> list[Line2D]:
    """Draw each rebalance time as a thin dashed vertical line on every axes; the legend entry (none without any).

    Drawn like a fault window's edge, not its span: a rebalance is an instant, and a crash-client run has many.
    """
    if not len(times):
        return []
    for ax in axes:
        ax.vlines(list(times), 0, 1, transform=ax.get_xaxis_transform(), colors=REBALANCE_COLOR, linestyles="--",
                  linewidth=0.8, alpha=0.6, zorder=1)
    return [Line2D([], [], color=REBALANCE_COLOR, linestyle="--", linewidth=0.8, label=f"rebalance ({len(times)})")]
