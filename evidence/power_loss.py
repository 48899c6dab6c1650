"""What a power failure dropped, read off the nemesis line's report (lazyfs's per-file report of unsynced data)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dropped_since"]


def dropped_since(loss: Mapping[str, Any], topic: str, line_ns: int,
                  start_unix_ms: float | None) -> dict[int, int] | None:
    """Per partition of `topic`, the history time (ns) of the oldest write a power failure dropped from that
    partition's log, from one node's `lost` entry (lazyfs's per-file report); None when the entry has no
    per-file report (then everything unsynced was lost).

    A file's time is its `oldest_unix_ms` on the run's clock (`start_unix_ms`, test.json); without the clock,
    the nemesis line's time minus the file's `oldest_age_ms`, which is at or after the true time (the line is
    written after the report), so the error, if any, credits the replica with a write it may not have kept.
    """
    files = loss.get("files")
    if not isinstance(files, list) or loss.get("unsynced_bytes") is None:  # no report: assume the worst
        return None
    out: dict[int, int] = {}
    for f in files:
        m = re.search(rf"(?:^|/){re.escape(topic)}-(\d+)/[^/]+\.log$", str(f.get("path") or ""))
        if not m:
            continue
        if start_unix_ms is not None and f.get("oldest_unix_ms") is not None:
            t = round((float(f["oldest_unix_ms"]) - start_unix_ms) * 1e6)
        elif f.get("oldest_age_ms") is not None:
            t = line_ns - round(float(f["oldest_age_ms"]) * 1e6)
        else:
            t = -1  # no time: count the whole file as dropped
        p = int(m.group(1))
        out[p] = min(out.get(p, t), t)
    return out
