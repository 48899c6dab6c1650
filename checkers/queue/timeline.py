"""The pure-Python half of the checker's "timelines" section: fault windows, availability, anomaly context.

The Spark side collects small inputs (the run's nemesis lines, send counts per
epoch and per second, capped anomaly lists with their ack and exposure times)
and calls `timelines`. Promises:

- every time out is in seconds since the run started, rounded to 3 decimals;
  every ratio is ok / invoked rounded to 4 decimals, None when nothing was invoked;
- a window's client ops are exactly the sends whose invocation epoch e has
  first_epoch <= e <= last_epoch (last_epoch None: to the last epoch), so
  availability per window is exact, not a time-range estimate;
- windows are sorted by start; anomaly entries name nemesis events by history
  index only, and `events` describes each referenced event once;
- the output is plain dicts, lists, ints, floats, strings, bools and None.

Nemesis ops pair by (spec, f) in file order. The roles of ops come from the
run's fault catalogue (`FaultCatalogue`, read from the run's faults.json). A
nemesis's break op opens a window at its invoke line; the
completion of its mend op or of "heal" by the same spec closes every window
of that spec still open (faults stack). Any other op (one-shot faults such as rolling-restart's roll,
unknown nemeses or ops) is a window of its own span, invoke to completion.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kchaos.core.faults import FaultCatalogue

__all__ = ["fault_windows", "availability", "anomaly_timelines", "timelines"]

COUNTS = ("invoked", "ok", "fail", "info")
HEAL = "heal"


def _s(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e9, 3)


def _ratio(ok: int, invoked: int) -> float | None:
    return round(ok / invoked, 4) if invoked else None


def _start_stop(faults: FaultCatalogue, spec: str | None) -> tuple[str | None, str | None]:
    """The break and mend f of the spec's nemesis; (None, None) unless it has such a pair."""
    kind = faults.get(spec)
    if kind is None or kind.mends is None:
        return None, None
    return kind.breaks, kind.mends


@dataclass
class _Window:
    nemesis: str | None
    f: str
    start_ns: int
    start_index: int
    first_epoch: int
    stacked: bool  # closed by a stop/heal, not by its own completion
    end_ns: int | None = None
    last_epoch: int | None = None
    targets: Any = None
    applied: bool = False
    done: tuple[int, int] | None = None  # (time, index) of the start op's completion line

    def close(self, line: Mapping[str, Any]) -> None:
        self.end_ns, self.last_epoch = line["time"], line["epoch"]

    def to_dict(self) -> dict[str, Any]:
        return {"nemesis": self.nemesis, "f": self.f, "start_s": _s(self.start_ns), "end_s": _s(self.end_ns),
                "first_epoch": self.first_epoch, "last_epoch": self.last_epoch, "targets": self.targets,
                "applied": self.applied}


def _windows(events: Sequence[Mapping[str, Any]], faults: FaultCatalogue) -> list[_Window]:
    pending: dict[tuple[str | None, str], deque[_Window | None]] = {}
    open_: dict[str | None, list[_Window]] = {}
    out: list[_Window] = []
    for e in sorted(events, key=lambda e: e["index"]):
        spec, f = e.get("nemesis"), e["f"]
        start_f, stop_f = _start_stop(faults, spec)
        closer = f == HEAL or (stop_f is not None and f == stop_f)
        if e["type"] == "invoke":
            w = None
            if not closer:
                w = _Window(spec, f, e["time"], e["index"], e["epoch"] + 1, stacked=f == start_f)
                out.append(w)
                if w.stacked:
                    open_.setdefault(spec, []).append(w)
            pending.setdefault((spec, f), deque()).append(w)
            continue
        queue = pending.get((spec, f))
        w = queue.popleft() if queue else None
        if w is not None:
            w.targets = (e.get("detail") or {}).get("targets")
            w.applied = e["type"] == "ok"
            w.done = (e["time"], e["index"])
            if not w.stacked:
                w.close(e)
        if closer:
            for w in open_.pop(spec, []):
                w.close(e)
    out.sort(key=lambda w: (w.start_ns, w.start_index))
    return out


def fault_windows(events: Iterable[Mapping[str, Any]], faults: FaultCatalogue) -> list[dict[str, Any]]:
    """One window per fault op of the run's nemesis lines (`events`), sorted by start.

    `faults` is the run's catalogue: a nemesis it does not describe has no
    break or mend op, so each of its ops is a window of its own span.

    Each is `{"nemesis", "f", "start_s", "end_s", "first_epoch", "last_epoch",
    "targets", "applied"}`: end_s and last_epoch are None for a window never
    closed; targets are the start completion's "targets" (or None); applied is
    whether the start op completed ok (False when skipped, failed or never completed).
    """
    return [w.to_dict() for w in _windows(list(events), faults)]


def _sum(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: 0 for k in COUNTS}
    for r in rows:
        for k in COUNTS:
            out[k] += r.get(k) or 0
    out["ok_ratio"] = _ratio(out["ok"], out["invoked"])
    return out


def availability(windows: Sequence[Mapping[str, Any]], per_epoch: Sequence[Mapping[str, Any]],
                 per_second: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Send availability overall, per second, per fault window and outside every applied window.

    Returns `{"overall": counts, "per_second": [row + "ok_ratio"],
    "windows": [window + counts], "outside_faults": counts}`, where counts are
    `{"invoked", "ok", "fail", "info", "ok_ratio"}` summed over `per_epoch`
    rows (by their epoch for windows). Windows not applied get counts too but
    do not take sends out of outside_faults.
    """
    rows = sorted(per_epoch, key=lambda r: r["epoch"])
    epochs = [r["epoch"] for r in rows]
    prefix = {k: [0] for k in COUNTS}
    for r in rows:
        for k in COUNTS:
            prefix[k].append(prefix[k][-1] + (r.get(k) or 0))

    def between(first: int, last: int | None) -> dict[str, Any]:
        lo = bisect_left(epochs, first)
        hi = len(epochs) if last is None else max(lo, bisect_right(epochs, last))
        out: dict[str, Any] = {k: prefix[k][hi] - prefix[k][lo] for k in COUNTS}
        out["ok_ratio"] = _ratio(out["ok"], out["invoked"])
        return out

    # Applied windows' epoch ranges merged, so each row is tested with one bisect.
    spans: list[list[float]] = []
    for first, last in sorted((w["first_epoch"], float("inf") if w["last_epoch"] is None else w["last_epoch"])
                              for w in windows if w["applied"]):
        if spans and first <= spans[-1][1] + 1:
            spans[-1][1] = max(spans[-1][1], last)
        else:
            spans.append([first, last])
    starts = [s[0] for s in spans]

    def inside(e: int) -> bool:
        i = bisect_right(starts, e) - 1
        return i >= 0 and e <= spans[i][1]

    return {
        "overall": _sum(rows),
        "per_second": [{**r, "ok_ratio": _ratio(r.get("ok") or 0, r.get("invoked") or 0)} for r in per_second],
        "windows": [{**w, **between(w["first_epoch"], w["last_epoch"])} for w in windows],
        "outside_faults": _sum(r for r in rows if not inside(r["epoch"])),
    }


def _open_at(windows: Sequence[_Window], times: Iterable[int], keep: int) -> dict[int, tuple[tuple[int, int], ...]]:
    """For each of `times`: the `keep` largest (time, index) start completions of the windows open then, sorted.

    Windows are closed intervals [start_ns, end_ns] of integer ns, i.e. half-open
    [start_ns, end_ns + 1). One sweep over boundaries and query times together,
    holding the open set as a sorted list: a run has tens of thousands of windows,
    and a corpus may keep thousands open at once, so the open set is never copied.
    """
    bounds: list[tuple[int, int, tuple[int, int]]] = []
    for w in windows:
        if w.done is None or (w.end_ns is not None and w.end_ns < w.start_ns):
            continue
        bounds.append((w.start_ns, 1, w.done))
        if w.end_ns is not None:
            bounds.append((w.end_ns + 1, -1, w.done))
    bounds.sort()
    open_: list[tuple[int, int]] = []
    out: dict[int, tuple[tuple[int, int], ...]] = {}
    i = 0
    for t in sorted(set(times)):
        while i < len(bounds) and bounds[i][0] <= t:
            _, delta, done = bounds[i]
            if delta > 0:
                insort(open_, done)
            else:
                del open_[bisect_left(open_, done)]
            i += 1
        out[t] = tuple(open_[-keep:]) if keep > 0 else ()
    return out


def _describe(e: Mapping[str, Any]) -> dict[str, Any]:
    return {"index": e["index"], "time_s": _s(e["time"]), "type": e["type"], "f": e["f"],
            "nemesis": e.get("nemesis"), "targets": (e.get("detail") or {}).get("targets")}


def anomaly_timelines(anomalies: Mapping[str, Sequence[Mapping[str, Any]]], events: Sequence[Mapping[str, Any]],
                      limit_events: int = 5, *, faults: FaultCatalogue) -> dict[str, list[dict[str, Any]]]:
    """For each anomaly kind, its anomalies with the nemesis events that came before each.

    Returns `{kind: [{"key", "acked_s", "exposed_s", "nemesis": [index, ...]}],
    "events": [{"index", "time_s", "type", "f", "nemesis", "targets"}]}`.
    An anomaly's "nemesis" holds the history indices of the completion lines of
    the fault-start ops whose window was open at acked_ns (exposed_ns when never
    acked), plus every nemesis line with time in (acked_ns, exposed_ns] (none when
    either is None): the `limit_events` most recent, sorted. "events" describes
    each referenced line once, by index. A kind named "events" is a ValueError.
    Windows are as `fault_windows` makes them with `faults`.
    """
    if "events" in anomalies:
        raise ValueError('an anomaly kind cannot be named "events"')
    at_times = (a.get("acked_ns") if a.get("acked_ns") is not None else a.get("exposed_ns")
                for items in anomalies.values() for a in items)
    open_at = _open_at(_windows(events, faults), (t for t in at_times if t is not None), limit_events)
    keys = sorted((e["time"], e["index"]) for e in events)
    times = [t for t, _ in keys]
    by_index = {e["index"]: e for e in events}
    used: set[int] = set()
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, items in anomalies.items():
        rows = out[kind] = []
        for a in items:
            acked, exposed = a.get("acked_ns"), a.get("exposed_ns")
            at = acked if acked is not None else exposed
            refs: list[int] = []
            if at is not None and limit_events > 0:
                near = list(open_at[at])
                if acked is not None and exposed is not None:
                    hi = bisect_right(times, exposed)
                    near += keys[max(bisect_right(times, acked), hi - limit_events):hi]
                refs = sorted(i for _, i in sorted(set(near))[-limit_events:])
                used.update(refs)
            rows.append({"key": a.get("key"), "acked_s": _s(acked), "exposed_s": _s(exposed), "nemesis": refs})
    out["events"] = [_describe(by_index[i]) for i in sorted(used)]
    return out


def timelines(events: Sequence[Mapping[str, Any]], per_epoch: Sequence[Mapping[str, Any]],
              per_second: Sequence[Mapping[str, Any]],
              anomalies: Mapping[str, Sequence[Mapping[str, Any]]],
              faults: FaultCatalogue) -> dict[str, Any]:
    """The whole "timelines" section: `{"windows", "availability", "anomalies", "events"}`.

    windows as `fault_windows`, availability as `availability`, anomalies the
    per-kind lists of `anomaly_timelines` and events its referenced nemesis
    lines; `faults` is the run's catalogue.
    """
    windows = fault_windows(events, faults)
    anoms = anomaly_timelines(anomalies, events, faults=faults)
    referenced = anoms.pop("events")
    return {"windows": windows, "availability": availability(windows, per_epoch, per_second),
            "anomalies": anoms, "events": referenced}
