"""compare.html's heat map: one matrix of the compared cells, each square labelled with its loss rate and verdict.

The axes are what the compared cells vary: the faults (nemeses) across when they vary, and every other
varying setting (acks, min.insync.replicas, ...) combined down the side; without varying faults, the first
varying setting goes across; in a suite, a setting its cells do not set and that follows from theirs (storage,
derived from the faults) is no axis. A square's colour is its severity, so a cell that lost
most of its writes is red whatever its verdict; the words in it are its loss rate and its verdict.
"""
from __future__ import annotations

import io
import textwrap
from collections.abc import Collection, Sequence
from typing import Any

from kchaos.checkers.verdict.judge import FAIL, merge
from kchaos.core.workload_kind import known
from kchaos.reports.severity import LEVELS, level

# Severity colours of the squares, and the ink that reads on each (the pages' badges use the same hues).
FILL = {"clean": "#cfeccf", "unknown": "#e4e7eb", "noted": "#fbe7a1", "serious": "#f6b26b", "severe": "#c62828"}
INK = {"clean": "#14601a", "unknown": "#333333", "noted": "#5c4600", "serious": "#5a2d00", "severe": "#ffffff"}
EMPTY = "#f4f4f4"
LEGEND = {"severe": "severe: failed, or ≥10% lost", "serious": "serious: ≥1% lost", "noted": "noted: less, or allowed",
          "unknown": "unknown", "clean": "clean"}
NAMES = {"acks": "acks", "min_insync": "min.insync", "rf": "rf", "unclean": "unclean", "idempotence": "idempotence"}


def settings(row: dict[str, Any]) -> dict[str, str]:
    """A compare row's settings as `key: "key=value"` texts: its own columns, and each option of `other` apart
    (`other` is "kafka_version=4.1.0 writeback_age_s=30.0"), so that each can be an axis of its own."""
    out = {k: f"{name}={row.get(k)}" for k, name in NAMES.items()}
    for item in str(row.get("other") or "").split():
        out[item.split("=", 1)[0]] = item
    return out


def _nemesis(row: dict[str, Any]) -> str:
    return str(row.get("nemesis") or "none").replace(",", ",\n")


def axes(rows: Sequence[dict[str, Any]], chosen: Collection[str] | None = None) -> tuple[list[str], list[str]]:
    """(keys across, keys down) for `rows`: the settings whose value differs between rows, faults ("nemesis")
    across when they vary, else the first varying setting. With `chosen` (the options a suite's cells set), a
    setting the cells do not set and whose value follows from theirs is no axis: kchaos derived it (storage
    lazyfs for a fault that needs it), and it would only split the matrix into squares no run fills."""
    table = [{"nemesis": _nemesis(r), **settings(r)} for r in rows]
    keys = list(dict.fromkeys(k for t in table for k in t))
    if chosen is not None:
        own = [k for k in keys if k in chosen]
        keys = [k for k in keys if k in chosen or not _follows(table, k, own)]
    varying, seen = [], set()
    for k in keys:
        split = tuple(sorted({tuple(i for i, t in enumerate(table) if t.get(k, "") == v)
                              for v in {t.get(k, "") for t in table}}))
        if len(split) > 1 and split not in seen:  # a key that varies with one already taken adds no axis
            varying.append(k)
            seen.add(split)
    across = ["nemesis"] if "nemesis" in varying else varying[:1]
    return across, [k for k in varying if k not in across]


def _follows(table: list[dict[str, str]], key: str, given: list[str]) -> bool:
    """Whether `key`'s value is the same in every row that has the same values of `given`."""
    seen: dict[tuple[str, ...], str] = {}
    return all(seen.setdefault(tuple(t.get(g, "") for g in given), t.get(key, "")) == t.get(key, "") for t in table)


def _place(row: dict[str, Any], keys: list[str], none: str) -> str:
    own = {"nemesis": _nemesis(row), **settings(row)}
    return " ".join(own.get(k, f"{k}=–") for k in keys) or none


def _wrapped(label: str, width: int = 34) -> str:
    """A tick label folded between words so that a long combination of settings stays narrow."""
    return "\n".join(line for part in label.split("\n") for line in textwrap.wrap(part, width) or [""])


def _label(rate: float | None, verdict: str, prediction: str | None, failing: int | None = None,
           severity: str | None = None) -> str:
    """A square's text: its loss rate (a txn or copy square, `failing` given: its failing anomalies, as it acks no
    single writes), the verdict word with its `severity` in words where that is serious or severe, and how the
    prediction fared."""
    if failing is not None:
        text = "no failing anomaly" if not failing else f"{failing} failing anomal{'y' if failing == 1 else 'ies'}"
    else:
        text = "no writes acked" if rate is None else f"{_percent(rate)} lost"
    word = f"{verdict} · {severity}" if severity in ("serious", "severe") else verdict
    return "\n".join([text, word] + ([f"prediction {prediction}"] if prediction else []))


def _percent(rate: float) -> str:
    """A loss rate as a percentage with three significant digits: 97.6%, 1.23%, 0.0412%; 0% only for none."""
    return "0%" if rate == 0 else f"{rate * 100:.3g}%"


def heatmap(rows: Sequence[dict[str, Any]], chosen: Collection[str] | None = None) -> bytes | None:
    """PNG: the compare rows as one matrix (see the module docstring; `chosen` as `axes` takes it); None when there
    are no rows. Rows that fall in the same square (differing only in what neither axis shows) are summed, their
    verdicts merged."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    if not rows:
        return None
    across, down = axes(rows, chosen)
    xs = list(dict.fromkeys(_place(r, across, "all runs") for r in rows))
    ys = list(dict.fromkeys(_place(r, down, "all") for r in rows))
    squares: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        x, y = xs.index(_place(r, across, "all runs")), ys.index(_place(r, down, "all"))
        s = squares.setdefault((x, y), {"lost": 0, "acked": 0, "verdicts": [], "allowed": False, "predictions": [],
                                        "failing": 0, "writes": False})
        s["writes"] |= writes(r.get("workload"))  # its acked writes give a loss rate
        s["failing"] += r.get("failing_anomalies") or 0
        s["lost"] += r.get("lost") or 0
        s["acked"] += r.get("acked") or 0
        s["verdicts"].append(r.get("verdict") or "unknown")
        s["allowed"] |= bool(r.get("allowed"))
        s["predictions"].append(r.get("prediction"))
    width, height = 1.9, 0.95  # inches per square: room for "prediction misses" at 9 pt
    ylabels = [_wrapped(y) for y in ys]
    label_lines = max(y.count("\n") + 1 for y in ylabels)
    height = max(height, 0.17 * label_lines + 0.2)  # a square as tall as its wrapped label
    left = 0.075 * max(len(line) for y in ylabels for line in y.split("\n")) + 0.4
    fig = Figure(figsize=(left + width * len(xs) + 0.5, 2.1 + height * len(ys)), layout="constrained")
    ax = fig.subplots()
    shown = set()
    for (x, y), s in squares.items():
        verdict = merge(s["verdicts"])
        sev = level(verdict, s["lost"], s["acked"], s["allowed"])
        shown.add(sev)
        known = [p for p in s["predictions"] if p]
        prediction = None if not known else "misses" if "misses" in known else "matches"
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=FILL[sev], edgecolor="#222222" if verdict == FAIL else "white",
                               linewidth=2.5 if verdict == FAIL else 1))
        rate = s["lost"] / s["acked"] if s["acked"] else None
        lines = _label(rate, verdict, prediction, None if s["writes"] else s["failing"], sev).split("\n")
        for i, line in enumerate(lines):  # the verdict word in bold, between the loss rate and the prediction
            ax.text(x + 0.5, y + 0.5 + (i - (len(lines) - 1) / 2) * 0.24, line, ha="center", va="center",
                    fontsize=9 if i != 1 else 10, fontweight="bold" if i == 1 else "normal", color=INK[sev])
    for x in range(len(xs)):
        for y in range(len(ys)):
            if (x, y) not in squares:
                ax.add_patch(Rectangle((x, y), 1, 1, facecolor=EMPTY, edgecolor="white"))
                ax.text(x + 0.5, y + 0.5, "no run", ha="center", va="center", fontsize=8, color="#888888")
    ax.set_xlim(0, len(xs))
    ax.set_ylim(len(ys), 0)
    ax.set_xticks([i + 0.5 for i in range(len(xs))], [_wrapped(x, 24) for x in xs], fontsize=9)
    ax.set_yticks([i + 0.5 for i in range(len(ys))], ylabels, fontsize=9)
    ax.tick_params(length=0)
    ax.xaxis.tick_top()
    for side in ax.spines.values():
        side.set_visible(False)
    # the levels some square has, each saying when it applies: the legend names no level it does not show
    present = [lv for lv in reversed(LEVELS) if lv in shown]
    fig.legend(handles=[Patch(facecolor=FILL[lv], edgecolor="#999999", label=LEGEND[lv]) for lv in present],
               loc="outside lower center", ncols=len(present), fontsize=8, frameon=False,
               title="colour: severity", title_fontsize=8)
    what = ("Lost acknowledged writes" if any(q["writes"] for q in squares.values())
            else "Failing anomalies")  # txn and copy cells only: transactions, not single acknowledged writes
    fig.suptitle(f"{what} and verdict per cell" + (", faults across" if across == ["nemesis"] else ""),
                 fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", pad_inches=0.15)
    return buf.getvalue()


def writes(workload: str | None) -> bool:
    """Whether a row's workload has acknowledged writes as its headline (a loss rate means something for it)."""
    kind = known(workload)
    return kind is not None and kind.writes

