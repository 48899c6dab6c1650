"""Availability as time: the stretches of a run in which no write was acknowledged, and how soon writes came back
after each fault.

`outages(acks_s, first_s, last_s, windows)` takes the times of the acknowledgements (seconds since the history
started, sorted), the first send's invocation and the last one's (the workload's writing), and the run's fault
windows (`checkers.queue.timeline.fault_windows`). The span it judges starts at the first acknowledgement, or at
the first applied fault's start when that came first (a client's first send waits on its bootstrap, which is no
outage; a fault before any acknowledgement is), or at the first send when nothing was acknowledged; it ends at the
last send's invocation (a send still in flight after it is no write the workload waited for). It returns

- `stretches`: every stretch of at least OUTAGE_GAP_S between two consecutive moments of the span's edges and its
  acknowledgements, longest first (at most MAX_STRETCHES of them; `total_s` and `count` count all);
- `longest_s`, `total_s`, `span_s`, and `acked_share`: the share of the span outside every stretch;
- `faults`: for each applied fault window, the seconds from its start and from its end (its heal) to the next
  acknowledgement, None when none came.

A stretch is a property of the whole cluster as a client sees it: with several partitions one leader's outage
is hidden while another partition still acknowledges. docs/checkers.md defines each field.
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_STRETCHES", "OUTAGE_GAP_S", "outages", "outages_of", "outages_text"]

OUTAGE_GAP_S = 1.0  # a stretch this long without an acknowledged write is an outage
MAX_STRETCHES = 100


def _r(x: float) -> float:
    return round(x, 2)


def outages(acks_s: Sequence[float], first_s: float | None, last_s: float | None,
            windows: Sequence[Mapping[str, Any]], gap_s: float = OUTAGE_GAP_S) -> dict[str, Any]:
    """The run's outages and its time to the next acknowledgement after each applied fault (see the module doc):
    `first_s` and `last_s` are the first and last sends' invocations. With no send at all (`first_s` None) the
    span is empty: no stretch, `acked_share` None."""
    faults = []
    for w in windows:
        if not w.get("applied"):
            continue
        start, end = w.get("start_s"), w.get("end_s")
        faults.append({"nemesis": w.get("nemesis"), "f": w.get("f"), "start_s": start, "end_s": end,
                       "ack_after_start_s": _next_ack(acks_s, start),
                       "ack_after_end_s": None if end is None else _next_ack(acks_s, end)})
    if first_s is None or last_s is None:
        return {"gap_s": gap_s, "span_s": 0.0, "acked_share": None, "count": 0, "longest_s": 0.0, "total_s": 0.0,
                "stretches": [], "faults": faults}
    if acks_s:
        first_s = min([acks_s[0], *(f["start_s"] for f in faults if f["start_s"] is not None
                                    and f["start_s"] >= first_s)])
    last_s = max(first_s, last_s)
    points = [first_s, *(a for a in acks_s if first_s <= a <= last_s), last_s]
    stretches = [(a, b) for a, b in zip(points, points[1:]) if b - a >= gap_s]
    total = sum(b - a for a, b in stretches)
    span = last_s - first_s
    longest = sorted(stretches, key=lambda s: (s[0] - s[1], s[0]))[:MAX_STRETCHES]
    return {"gap_s": gap_s, "span_s": _r(span), "acked_share": round(1 - total / span, 4) if span > 0 else None,
            "count": len(stretches), "longest_s": _r(max((b - a for a, b in stretches), default=0.0)),
            "total_s": _r(total),
            "stretches": [{"start_s": _r(a), "end_s": _r(b), "seconds": _r(b - a)} for a, b in longest],
            "faults": faults}


def _next_ack(acks_s: Sequence[float], at: float | None) -> float | None:
    """Seconds from `at` to the first acknowledgement at or after it; None when there is none."""
    if at is None:
        return None
    i = bisect_left(acks_s, at)
    return _r(acks_s[i] - at) if i < len(acks_s) else None


def outages_text(o: dict[str, Any]) -> str | None:
    """The outages in a line: `writes acknowledged 82.4% of the 60.1 s; 2 outages, the longest 48.1 s (35.0 s to
    83.1 s); after a heal the next acknowledgement came in 0.4 s to 12.3 s`. None when nothing was sent."""
    if o.get("acked_share") is None:
        return None
    if not o.get("count"):
        text = f"writes acknowledged throughout the {o['span_s']:g} s (never {o['gap_s']:g} s or more without one)"
    else:
        top = o["stretches"][0]
        text = (f"writes acknowledged {100 * o['acked_share']:.1f}% of the {o['span_s']:g} s; "
                f"{_n(o['count'], 'outage')}, the longest {top['seconds']:g} s ({top['start_s']:g} s to "
                f"{top['end_s']:g} s)")
    healed = [f for f in o.get("faults") or [] if f.get("end_s") is not None]
    after = [f["ack_after_end_s"] for f in healed if f["ack_after_end_s"] is not None]
    if after:
        span = f"{min(after):g} s" if min(after) == max(after) else f"{min(after):g} s to {max(after):g} s"
        text += f"; after a heal the next acknowledgement came in {span}"
    if never := len(healed) - len(after):
        text += f"; after {_n(never, 'heal')} none came"
    return text


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def outages_of(results: Mapping[str, Any] | None) -> dict[str, Any]:
    """A results.json's outages (its timeline's, which only the queue checker writes); {} when it has none."""
    timeline = (results or {}).get("timeline")
    found = timeline.get("outages") if isinstance(timeline, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}
