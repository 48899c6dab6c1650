"""What each node wrote in its own logs: about a partition's log (truncations, loads, leader/follower starts),
and about the control plane (the Raft quorum, the active controller, broker registration and heartbeats).

Read from a node's `server.log` and `state-change.log` (nodes/<node>/ in the
run directory). Partition lines (`LogEvent`), in Kafka 3.7's and 4.1's wording:

- UnifiedLog `Truncating to offset N` (the log really lost its tail from N)
  and `Truncating to N has no effect as the largest offset in the log is M`;
  the ReplicaFetcher line before it says why (`due to leader epoch and
  offset EpochEndOffset(...)`, `due to local high watermark N`).
- LogManager `Completed load of Log(dir=.../<topic>-<p>, ... logEndOffset=N)`:
  where the log ended when the broker (re)started.
- state-change `Leader <topic>-<p> ... starts at leader epoch E from offset N`
  and `Follower <topic>-<p> starts at leader epoch E from offset N`: the
  log end when the broker took that role.

Control-plane lines (`ControlEvent`, server.log only; matched on Kafka 3.7.2's
real lines, 4.1's variants taken from its classes' format strings):

- QuorumState `Completed transition to CandidateState(... epoch=E` /
  `Leader(... epoch=E, epochStartOffset=N` / `ResignedState(... epoch=E`:
  the node stood for election, won it, stepped down as Raft leader; and
  `Completed transition to X(...) from Leader(... epoch=E`: it stopped
  leading epoch E on seeing a newer one.
- QuorumController `Becoming the active controller at epoch E`, `Renouncing
  the leadership ... at epoch E` and `... at epoch E in N microseconds.
  Renouncing leadership`, `Fencing broker B [at epoch E] because its session
  has timed out`, `registerBroker: event failed with XException` (a refused
  registration, seen from the controller).
- BrokerLifecycleManager `Incarnation X of broker B ... is now STARTING`,
  `Unable to register broker B because the controller returned error E`,
  `Unable to register the broker because <reason>`, `Successfully registered
  broker B with broker epoch E`, `Unable to send a heartbeat because
  <reason>`, `Broker B sent a heartbeat request but received error E`.

Log timestamps carry no zone; the node containers run in UTC, so they are
read as UTC. Nothing here guesses: a line that does not match is ignored.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["ControlEvent", "LogEvent", "parse_control_lines", "parse_lines", "read_control_logs", "read_node_logs"]

_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_FETCH = re.compile(r"Truncating partition (\S+)-(\d+) with TruncationState\(offset=(\d+), completed=\w+\) "
                    r"due to (.*?)(?: \(kafka\.\S+\))?$")
_UNIFIED = re.compile(r"\[UnifiedLog partition=(\S+)-(\d+), dir=[^\]]*\] Truncating to (?:offset )?(\d+)"
                      r"(?: has no effect as the largest offset in the log is (-?\d+))?")
_LOADED = re.compile(r"Completed load of Log\(dir=\S*/([^/,]+)-(\d+), .*?logEndOffset=(\d+)\)")
_BECOME = re.compile(r"(Leader|Follower) (\S+)-(\d+) .*?starts at leader epoch (\d+) from offset (\d+)")

# Control plane. The lazy `.*?` skips 4.1's longer state prefixes (localDirectoryId, localVoterNode=VoterNode(...)).
_RAFT = re.compile(r"Completed transition to (CandidateState|Leader|ResignedState)\(.*?\bepoch=(\d+)"
                   r"(?:, epochStartOffset=(\d+))?")
_UNSEATED = re.compile(r"Completed transition to (\w+)\(.*? from Leader\(.*?\bepoch=(\d+)")
_ACTIVE = re.compile(r"Becoming the active controller at epoch (\d+), next write offset (\d+)")
_RENOUNCE = re.compile(r"Renouncing the leadership due to a metadata log event\. We were the leader at epoch (\d+)"
                       r"|at epoch (\d+) in \d+ microseconds\. Renouncing leadership")
_FENCING = re.compile(r"Fencing broker (\d+) (?:at epoch (\d+) )?because (.+?)\.? \((?:org|kafka)\.")
_REFUSED = re.compile(r"registerBroker: event failed with (\w+)")
_STARTING = re.compile(r"Incarnation (\S+) of broker (\d+) in cluster \S+ is now STARTING")
_REGISTER_ERR = re.compile(r"Unable to register broker \d+ because the controller returned error (\w+)")
_REGISTER_FAIL = re.compile(r"Unable to register the broker because (.+?)\.? \(kafka\.")
_REGISTERED = re.compile(r"Successfully registered broker \d+ with broker epoch (\d+)")
_BEAT_FAIL = re.compile(r"Unable to send a heartbeat because (.+?)\.? \(kafka\.")
_BEAT_ERR = re.compile(r"Broker \d+ sent a heartbeat request but received error (\w+)")
_RAFT_KIND = {"CandidateState": "raft-candidate", "Leader": "raft-leader", "ResignedState": "raft-resigned"}
# "not the controller" is how every standby controller answers a forwarded request: not a refusal.
_NOT_REFUSALS = ("NotControllerException",)


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


@dataclass(frozen=True)
class ControlEvent:
    """One control-plane line of a node's server.log.

    kind and what its fields hold:
    "raft-candidate" (epoch: the Raft epoch it stood for), "raft-leader"
    (epoch; offset: the epoch's start offset), "raft-resigned" (epoch),
    "raft-unseated" (epoch it led; detail: the state it went to, e.g.
    Unattached, on seeing a newer epoch),
    "controller-active" (epoch; offset: the next write offset),
    "controller-renounced" (epoch it was leader at), "controller-fencing"
    (broker it fences; detail: why; epoch: the broker epoch when logged),
    "controller-refused" (detail: the exception a broker's registration
    failed with), "broker-starting" (detail: the new incarnation id),
    "registration-refused" (detail: the controller's error code),
    "registration-failed" and "heartbeat-failed" (detail: Kafka's reason,
    e.g. the RPC timed out before it was sent), "heartbeat-refused" (detail:
    the error code), "registered" (epoch: the broker epoch granted).
    time_ms is wall-clock (UTC) from the log line.
    """

    node: str
    time_ms: int
    kind: str
    epoch: int | None = None
    offset: int | None = None
    broker: int | None = None
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"node": self.node, "time_ms": self.time_ms, "kind": self.kind, "epoch": self.epoch,
                "offset": self.offset, "broker": self.broker, "detail": self.detail}


def _ms(line: str) -> int | None:
    m = _TIME.match(line)
    if not m:
        return None
    t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
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


def _control(line: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, fields) of one control-plane line, or None."""
    if "QuorumState" in line and (m := _RAFT.search(line)):
        return _RAFT_KIND[m.group(1)], {"epoch": int(m.group(2)),
                                        "offset": None if m.group(3) is None else int(m.group(3))}
    if "QuorumState" in line and (m := _UNSEATED.search(line)):
        return "raft-unseated", {"epoch": int(m.group(2)), "detail": m.group(1)}
    if "QuorumController" in line:
        if m := _ACTIVE.search(line):
            return "controller-active", {"epoch": int(m.group(1)), "offset": int(m.group(2))}
        if m := _RENOUNCE.search(line):
            return "controller-renounced", {"epoch": int(m.group(1) or m.group(2))}
        if m := _FENCING.search(line):
            return "controller-fencing", {"broker": int(m.group(1)), "detail": m.group(3),
                                          "epoch": None if m.group(2) is None else int(m.group(2))}
        if (m := _REFUSED.search(line)) and m.group(1) not in _NOT_REFUSALS:
            return "controller-refused", {"detail": m.group(1)}
        return None
    if "BrokerLifecycleManager" in line:
        if m := _STARTING.search(line):
            return "broker-starting", {"detail": m.group(1)}
        if m := _REGISTER_ERR.search(line):
            return "registration-refused", {"detail": m.group(1)}
        if m := _REGISTER_FAIL.search(line):
            return "registration-failed", {"detail": m.group(1)}
        if m := _REGISTERED.search(line):
            return "registered", {"epoch": int(m.group(1))}
        if m := _BEAT_FAIL.search(line):
            return "heartbeat-failed", {"detail": m.group(1)}
        if m := _BEAT_ERR.search(line):
            return "heartbeat-refused", {"detail": m.group(1)}
    return None


def parse_control_lines(node: str, lines: Iterable[str]) -> list[ControlEvent]:
    """The ControlEvents in one server.log's lines, in file order; lines that match nothing are ignored."""
    out: list[ControlEvent] = []
    for line in lines:
        if (t := _ms(line)) is not None and (c := _control(line.rstrip("\n"))) is not None:
            out.append(ControlEvent(node, t, c[0], **c[1]))
    return out


def read_control_logs(nodes_dir: Path) -> list[ControlEvent]:
    """Every node's ControlEvents from nodes/<node>/server.log, sorted by time (file order among equal times)."""
    out: list[ControlEvent] = []
    if not Path(nodes_dir).is_dir():
        return out
    for d in sorted(p for p in Path(nodes_dir).iterdir() if p.is_dir()):
        if (d / "server.log").is_file():
            with open(d / "server.log", encoding="utf-8", errors="replace") as fh:
                out += parse_control_lines(d.name, fh)
    return sorted(out, key=lambda e: e.time_ms)


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
