"""Sends counted by how they did not succeed: Kafka's error name, as the client reported it.

A send that failed (`fail`: certainly not written) or whose outcome is unknown (`info`) carries its error in the
history: librdkafka's or the Java client's name for it (`NOT_ENOUGH_REPLICAS`, `NOT_LEADER_OR_FOLLOWER`,
`REQUEST_TIMED_OUT`, `_MSG_TIMED_OUT`, ...) or the harness's own reason (`no delivery report`, `produce: ...`).
A min.insync=2 run under a partition then says how many sends Kafka refused because the ISR was too small, which
neither the verdict nor the loss counts show. Read from the history's Parquet form, so it costs a column scan.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

KEY = "send_errors"
OUTCOMES = ("fail", "info")
MOST = 20  # distinct errors kept; the rest are summed as "other"
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def error_name(error: str | None) -> str:
    """The name a send's error is counted under: Kafka's error name as the client gave it, else the text before
    its first colon (the harness's reason), else "unknown"."""
    text = (error or "").strip()
    if not text:
        return "unknown"
    if _NAME.fullmatch(text):
        return text
    return text.split(":", 1)[0].strip() or "unknown"


def send_errors(parquet: Path) -> dict[str, dict[str, int]] | None:
    """Per error name, how many sends ended `fail` and `info` with it, most frequent first (at most MOST names, the
    rest summed as "other"); {} when every send succeeded, None without the history's Parquet form."""
    if not Path(parquet).is_file():
        return None
    t = pq.read_table(parquet, columns=["f", "type", "error"])
    t = t.filter(pc.and_(pc.equal(t["f"], "send"), pc.is_in(t["type"], value_set=pa.array(OUTCOMES))))
    rows = t.group_by(["error", "type"]).aggregate([([], "count_all")]).to_pylist()
    counted = list(summed((error_name(r["error"]), {r["type"]: r["count_all"]}) for r in rows).items())
    out = dict(counted[:MOST])
    for _, by in counted[MOST:]:
        other = out.setdefault("other", dict.fromkeys(OUTCOMES, 0))
        for k in OUTCOMES:
            other[k] += by[k]
    return out


def summed(counts: Iterable[tuple[str, Mapping[str, int]]]) -> dict[str, dict[str, int]]:
    """(error name, {outcome: n}) pairs summed per name, most frequent first (ties by name): a run's rows, or
    several runs' `send_errors` items."""
    total: dict[str, dict[str, int]] = {}
    for name, by in counts:
        into = total.setdefault(name, dict.fromkeys(OUTCOMES, 0))
        for k in OUTCOMES:
            into[k] += int(by.get(k) or 0)
    return dict(sorted(total.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])))


def errors_text(errors: dict[str, dict[str, int]], most: int = 5) -> str:
    """`NOT_ENOUGH_REPLICAS 412 failed; _MSG_TIMED_OUT 1 failed, 3 unknown; 2 more`: the `most` frequent errors in
    a line."""
    def said(by: dict[str, int]) -> str:
        return ", ".join(f"{n:,} {'failed' if k == 'fail' else 'unknown'}" for k, n in by.items() if n)
    parts = [f"{name} {said(by)}" for name, by in list(errors.items())[:most]]
    return "; ".join(parts) + (f"; {len(errors) - most} more" if len(errors) > most else "")
