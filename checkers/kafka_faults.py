"""The faults Kafka reported about itself during a run: every `Encountered ... fault` line of the nodes' server logs.

Kafka's fault handlers (`org.apache.kafka.server.fault`) log an internal error they chose not to crash on as
`ERROR Encountered metadata publishing fault: ...` (or `metadata loading`, `fatal`, ...). Such a broker may go on
with a stale view of the cluster: in one exactly-once-copy run on 3.7.2, a publishing fault left a partition the
controller said the broker led without a leader for five minutes (docs/scenarios.md). These faults are not an
anomaly of the history, so they do not change the verdict; results.json, the console and report.html name them so
that a reader of a run sees them next to it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# `[2026-11-26 16:57:32,983] ERROR Encountered metadata publishing fault: Error applying ... (org.apache...)`
LINE = re.compile(rb"^\[(?P<time>[0-9-]+ [0-9:,]+)\] (?:ERROR|FATAL) Encountered (?P<kind>[\w ]+?) fault: "
                  rb"(?P<what>.*?)(?: \([\w.$]+\))?\s*$")
CAUSE = re.compile(rb"^(?:Caused by: )?(?P<cause>[\w.$]+(?:Exception|Error)(?::.*)?)$")
MAX_LISTED = 20
MAX_CAUSE = 300


def kafka_faults(run: Path) -> dict[str, Any] | None:
    """Every node's `Encountered ... fault` lines in `run/nodes/*/server.log`, oldest first: `{"count": N,
    "faults": [{"node", "time", "kind", "what", "cause"}, ...]}` with at most MAX_LISTED listed (`cause`: the
    exception on the next line, cut to MAX_CAUSE characters, or None). None when no node logged one (or the run
    directory has no node logs)."""
    found: list[dict[str, Any]] = []
    count = 0
    for log in sorted(Path(run).glob("nodes/*/server.log")):
        pending: dict[str, Any] | None = None
        with open(log, "rb") as fh:
            for raw in fh:
                if pending is not None:
                    m = CAUSE.match(raw.rstrip())
                    pending["cause"] = m["cause"].decode(errors="replace")[:MAX_CAUSE] if m else None
                    pending = None
                if b"Encountered" not in raw:
                    continue
                m = LINE.match(raw)
                if m is None:
                    continue
                count += 1
                pending = {"node": log.parent.name, "time": m["time"].decode(), "kind": m["kind"].decode(),
                           "what": m["what"].decode(errors="replace"), "cause": None}
                found.append(pending)
    if not count:
        return None
    found.sort(key=lambda f: (f["time"], f["node"]))
    return {"count": count, "faults": found[:MAX_LISTED]}


def fault_line(faults: dict[str, Any]) -> str:
    """One line saying how many faults Kafka reported and what the first was."""
    first = faults["faults"][0]
    c = first.get("cause") or ""
    cause = f" ({c[:160]}{'…' * (len(c) > 160)})" if c else ""
    more = f"; {faults['count'] - 1} more in results.json" if faults["count"] > 1 else ""
    return (f"Kafka reported {faults['count']} internal fault{'s' * (faults['count'] != 1)} in its logs (not an "
            f"anomaly; the verdict does not weigh it): {first['node']} at {first['time']}, {first['kind']}: "
            f"{first['what']}{cause}{more}")
