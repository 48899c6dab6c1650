"""The KRaft metadata log replayed: each partition's leader, leader epoch, ISR and ELR over time.

Input: the decoded records of `__cluster_metadata` (`kafka_logs.metadata_records`). Replay follows Kafka's own rules
(`PartitionRegistration.merge`, the same in 3.7 and 4.1): a PartitionRecord
sets the whole state; a PartitionChangeRecord changes only the fields it
carries, and one that carries `leader` (even the same leader, or -1) bumps
the leader epoch by one; every change bumps the partition epoch. ISR, ELR
and last-known ELR are replaced whole when present. Broker registrations,
fencing and unfencing become `BrokerEvent`s. Times are the records'
CreateTime, the controller's wall clock in ms.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BrokerEvent", "MetadataLog", "PartitionState", "replay"]

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """A partition's state right after one metadata record changed it."""

    offset: int
    time_ms: int
    topic: str | None  # None where the record carried no topicId
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None
    last_known_elr: tuple[int, ...] | None
    changed: tuple[str, ...]  # which fields the record carried ("created" for a PartitionRecord)
    recovering: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"offset": self.offset, "time_ms": self.time_ms, "topic": self.topic, "partition": self.partition,
                "leader": self.leader, "leader_epoch": self.leader_epoch, "partition_epoch": self.partition_epoch,
                "replicas": list(self.replicas), "isr": list(self.isr),
                "elr": None if self.elr is None else list(self.elr),
                "last_known_elr": None if self.last_known_elr is None else list(self.last_known_elr),
                "changed": list(self.changed), "recovering": self.recovering}


@dataclass(frozen=True)
class BrokerEvent:
    """A broker registered, fenced, unfenced, entered controlled shutdown or unregistered."""

    offset: int
    time_ms: int
    broker: int
    kind: str  # "registered" (fenced until unfenced), "fenced", "unfenced", "controlled-shutdown", "unregistered"
    broker_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"offset": self.offset, "time_ms": self.time_ms, "broker": self.broker, "kind": self.kind,
                "broker_epoch": self.broker_epoch}


@dataclass(frozen=True)
class MetadataLog:
    """The replayed metadata log: partition states per (topic, partition), broker events, features."""

    states: dict[tuple[str | None, int], list[PartitionState]]
    brokers: list[BrokerEvent]
    features: dict[str, int] = field(default_factory=dict)
    last_offset: int = -1

    def timeline(self, topic: str, partition: int) -> list[PartitionState]:
        """The partition's states in log order (empty if the log never created it)."""
        return self.states.get((topic, partition), [])

    def state_at(self, topic: str, partition: int, time_ms: float) -> PartitionState | None:
        """The partition's state in effect at wall-clock `time_ms` (None before it was created)."""
        out = None
        for s in self.timeline(topic, partition):
            if s.time_ms > time_ms:
                break
            out = s
        return out


def _get(data: dict[str, Any], *names: str) -> Any:
    """A field by any of its spellings (the JSON converter's camelCase varies: lastKnownELR / lastKnownElr)."""
    lower = {k.lower(): v for k, v in data.items()}
    for n in names:
        if n.lower() in lower:
            return lower[n.lower()]
    return None


def _ids(v: Any) -> tuple[int, ...] | None:
    return None if v is None else _int_tuple(v)


def _int_tuple(v: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


def replay(records: Iterable[dict[str, Any]]) -> MetadataLog:
    """Replay decoded metadata records (in log order) into a MetadataLog."""
    topics: dict[str | None, str | None] = {}  # topicId to name, as the records carry them
    current: dict[tuple[str | None, int], PartitionState] = {}
    states: dict[tuple[str | None, int], list[PartitionState]] = {}
    brokers: list[BrokerEvent] = []
    features: dict[str, int] = {}
    last = -1
    for rec in records:
        off, t, kind, d = rec["offset"], rec["time_ms"], rec["type"], rec.get("data") or {}
        last = max(last, off)
        if kind == "TOPIC_RECORD":
            topics[d.get("topicId")] = d.get("name")
        elif kind == "REMOVE_TOPIC_RECORD":
            name = topics.pop(d.get("topicId"), None)
            for key in [k for k in current if k[0] == name]:
                del current[key]
        elif kind == "FEATURE_LEVEL_RECORD" and d.get("name") is not None:
            features[d["name"]] = int(d.get("featureLevel") or 0)
        elif kind in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
            topic = topics.get(d.get("topicId"), d.get("topicId"))
            key = (topic, int(d.get("partitionId", 0)))
            prev = current.get(key)
            if kind == "PARTITION_RECORD" or prev is None:
                s = PartitionState(
                    off, t, topic, key[1], int(d.get("leader", NO_LEADER)), int(d.get("leaderEpoch", 0)),
                    int(d.get("partitionEpoch", 0)), _ids(d.get("replicas")) or (), _ids(d.get("isr")) or (),
                    _ids(_get(d, "eligibleLeaderReplicas")), _ids(_get(d, "lastKnownElr")), ("created",),
                    int(d.get("leaderRecoveryState", 0) or 0) == 1)
            else:
                changed = tuple(k for k in ("leader", "isr", "replicas", "eligibleLeaderReplicas", "lastKnownElr",
                                            "leaderRecoveryState") if _get(d, k) is not None)
                leader = _get(d, "leader")
                elr, lkelr = _get(d, "eligibleLeaderReplicas"), _get(d, "lastKnownElr")
                lrs = _get(d, "leaderRecoveryState")
                s = PartitionState(
                    off, t, topic, key[1], prev.leader if leader is None else int(leader),
                    prev.leader_epoch if leader is None else prev.leader_epoch + 1, prev.partition_epoch + 1,
                    prev.replicas if d.get("replicas") is None else _int_tuple(d["replicas"]),
                    prev.isr if d.get("isr") is None else _int_tuple(d["isr"]),
                    prev.elr if elr is None else _ids(elr), prev.last_known_elr if lkelr is None else _ids(lkelr),
                    changed, prev.recovering if lrs is None or int(lrs) < 0 else int(lrs) == 1)
            current[key] = s
            states.setdefault(key, []).append(s)
        elif kind == "REGISTER_BROKER_RECORD":
            brokers.append(BrokerEvent(off, t, int(d.get("brokerId", -1)), "registered", d.get("brokerEpoch")))
            if d.get("fenced") is False:
                brokers.append(BrokerEvent(off, t, int(d.get("brokerId", -1)), "unfenced", d.get("brokerEpoch")))
        elif kind == "BROKER_REGISTRATION_CHANGE_RECORD":
            b, e = int(d.get("brokerId", -1)), d.get("brokerEpoch")
            fenced = int(d.get("fenced", 0) or 0)
            if fenced == 1:
                brokers.append(BrokerEvent(off, t, b, "fenced", e))
            elif fenced == -1:
                brokers.append(BrokerEvent(off, t, b, "unfenced", e))
            if int(d.get("inControlledShutdown", 0) or 0) == 1:
                brokers.append(BrokerEvent(off, t, b, "controlled-shutdown", e))
        elif kind in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD"):
            brokers.append(BrokerEvent(off, t, int(d.get("id", -1)),
                                       "fenced" if kind.startswith("FENCE") else "unfenced", d.get("epoch")))
        elif kind == "UNREGISTER_BROKER_RECORD":
            brokers.append(BrokerEvent(off, t, int(d.get("brokerId", -1)), "unregistered", d.get("brokerEpoch")))
    return MetadataLog(states, brokers, features, last)
