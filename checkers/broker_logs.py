"""What each broker wrote about a partition's log in its own logs: truncations, loads, leader/follower starts.

Read from a node's `server.log` and `state-change.log` (nodes/<node>/ in the
run directory). Three kinds of line, in Kafka 3.7's and 4.1's wording:

- UnifiedLog `Truncating to offset N` (the log really lost its tail from N)
  and `Truncating to N has no effect as the largest offset in the log is M`;
  the ReplicaFetcher line before it says why (`due to leader epoch and
  offset EpochEndOffset(...)`, `due to local high watermark N`).
- LogManager `Completed load of Log(dir=.../<topic>-<p>, ... logEndOffset=N)`:
  where the log ended when the broker (re)started.
- state-change `Leader <topic>-<p> ... starts at leader epoch E from offset N`
  and `Follower <topic>-<p> starts at leader epoch E from offset N`: the
  log end when the broker took that role.

Log timestamps carry no zone; the node containers run in UTC, so they are
read as UTC. Nothing here guesses: a line that does not match is ignored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

__all__ = ["LogEvent", "read_node_logs", "parse_lines"]

_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_FETCH = re.compile(r"Truncating partition (\S+)-(\d+) with TruncationState\(offset=(\d+), completed=\w+\) "
                    r"due to (.*?)(?: \(kafka\.\S+\))?$")
_UNIFIED = re.compile(r"\[UnifiedLog partition=(\S+)-(\d+), dir=[^\]]*\] Truncating to (?:offset )?(\d+)"
                      r"(?: has no effect as the largest offset in the log is (-?\d+))?")
_LOADED = re.compile(r"Completed load of Log\(dir=\S*/([^/,]+)-(\d+), .*?logEndOffset=(\d+)\)")
_BECOME = re.compile(r"(Leader|Follower) (\S+)-(\d+) .*?starts at leader epoch (\d+) from offset (\d+)")


@dataclass(frozen=True)
class LogEvent:
    """One line of evidence from a broker's logs about one partition.

    kind: "truncated" (offset = the new log end; no_effect when the log was
    already shorter), "loaded" (offset = log end after a (re)start),
    "leader"/"follower" (offset = log end on taking the role, epoch = the
    leader epoch). time_ms is wall-clock (UTC) from the log line.
    """

    node: str
    time_ms: int
    kind: str
    topic: str
    partition: int
    offset: int
    epoch: int | None = None
    no_effect: bool = False
    reason: str | None = None
    source: str = "server.log"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"node": self.node, "time_ms": self.time_ms, "kind": self.kind, "topic": self.topic,
                "partition": self.partition, "offset": self.offset, "epoch": self.epoch,
                "no_effect": self.no_effect, "reason": self.reason, "source": self.source}


def _ms(line: str) -> int | None:
    m = _TIME.match(line)
    if not m:
        return None
    t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    return int(t.timestamp()) * 1000 + int(m.group(2))


def parse_lines(node: str, lines: Iterable[str], topic: str, source: str = "server.log") -> list[LogEvent]:
    """The LogEvents for `topic` in one log file's lines, in file order."""
    out: list[LogEvent] = []
    why: dict[int, tuple[int, str]] = {}  # partition -> (offset, reason) of the fetcher's last truncation line
    for line in lines:
        if topic not in line:
            continue
        t = _ms(line)
        if t is None:
            continue
        if m := _FETCH.search(line):
            if m.group(1) == topic:
                why[int(m.group(2))] = (int(m.group(3)), m.group(4))
        elif m := _UNIFIED.search(line):
            if m.group(1) == topic:
                p, off = int(m.group(2)), int(m.group(3))
                reason = why.pop(p, (None, None))
                out.append(LogEvent(node, t, "truncated", topic, p, off, no_effect=m.group(4) is not None,
                                    reason=reason[1] if reason[0] == off else None, source=source))
        elif m := _LOADED.search(line):
            if m.group(1) == topic:
                out.append(LogEvent(node, t, "loaded", topic, int(m.group(2)), int(m.group(3)), source=source))
        elif m := _BECOME.search(line):
            if m.group(2) == topic:
                out.append(LogEvent(node, t, m.group(1).lower(), topic, int(m.group(3)), int(m.group(5)),
                                    epoch=int(m.group(4)), source=source))
    return out


def read_node_logs(nodes_dir: Path, topic: str) -> list[LogEvent]:
    """Every node's LogEvents for `topic` from nodes/<node>/{server,state-change}.log, sorted by time."""
    out: list[LogEvent] = []
    if not Path(nodes_dir).is_dir():
        return out
    for d in sorted(p for p in Path(nodes_dir).iterdir() if p.is_dir()):
        for name in ("server.log", "state-change.log"):
            f = d / name
            if f.is_file():
                with open(f, encoding="utf-8", errors="replace") as fh:
                    out += parse_lines(d.name, fh, topic, name)
    return sorted(out, key=lambda e: e.time_ms)
