"""Target specs: which nodes a fault hits, resolved against the live cluster when the fault fires.

A spec is a word, optionally with a partition: `one`, `minority`, `majority`,
`all`, `leader[:P]`, `follower[:P]`, `followers[:P]`, `controller`,
`txn-coordinator`, `group-coordinator`, `share-coordinator`, `adding`, `removing`
(the replicas a reassignment in progress adds or removes). The
schedule stores the spec, the partition and a `pick` number drawn from the
seed; resolution orders the candidates, then draws from `random.Random(pick)`,
so a replayed schedule makes the same choice among the same candidates
("the leader of partition 0", "a random minority"). An op may also name its
nodes (`"nodes": ["n1"]`).

A coordinator target is the broker that leads the internal topic partition
holding one of the run's keys (`coordinator_keys`): a transactional id's in
`__transaction_state`, a consumer group's in `__consumer_offsets`, a share
group's state for one partition of the test topic in `__share_group_state`
(keyed `group:topic-id:partition`). Kafka places a key in partition abs(Java's
String.hashCode of the key) mod the topic's partition count, and
FindCoordinator answers with that partition's leader.
"""
from __future__ import annotations

import random
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from kchaos.clusters import admin, quorum, reassign
from kchaos.core.config import TestConfig
from kchaos.core.protocols import FaultSkipped, NodeControl
from kchaos.core.workload_kind import kind_of

# The coordinator targets: the internal topic that holds their keys, and the kind of key.
COORDINATORS = {"txn-coordinator": ("__transaction_state", "txn"), "group-coordinator": ("__consumer_offsets", "group"),
                "share-coordinator": ("__share_group_state", "share")}
COORDINATOR_TARGETS = tuple(COORDINATORS)
# The replicas a partition reassignment in progress is adding, or removing (`clusters.reassign.moving`).
MOVING_TARGETS = ("adding", "removing")
# Targets that name a node by the role it has in the run right now, which only some runs give a node.
NODE_ROLES = (*COORDINATOR_TARGETS, *MOVING_TARGETS)
KINDS = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller", *NODE_ROLES)
PARTITIONED = ("leader", "follower", "followers")
AWAIT_S = 30.0  # how long an op's `await_isr` waits by default (`await_s` overrides)


@dataclass(frozen=True)
class Target:
    """A parsed target spec: its kind and, for leader/follower(s), an optional partition."""

    kind: str
    partition: int | None = None

    @classmethod
    def parse(cls, spec: str) -> Target:
        """Parse `kind[:partition]`; raises ValueError with a readable message."""
        kind, _, part = spec.partition(":")
        if kind not in KINDS:
            raise ValueError(f"unknown target {spec!r}; targets: {', '.join(KINDS)}")
        if part and kind not in PARTITIONED:
            raise ValueError(f"target {kind!r} takes no partition (got {spec!r})")
        if part and not part.isdigit():
            raise ValueError(f"partition in target {spec!r} must be a number")
        return cls(kind, int(part) if part else None)

    def __str__(self) -> str:
        return self.kind if self.partition is None else f"{self.kind}:{self.partition}"


def fault_op(f: str, target: Target, rng: random.Random, partitions: int) -> dict[str, Any]:
    """A schedule op applying `f` to `target`: a partition is drawn for leader/follower specs without one."""
    op: dict[str, Any] = {"f": f, "target": target.kind, "pick": rng.randrange(2**31)}
    if target.kind in PARTITIONED:
        op["partition"] = target.partition if target.partition is not None else rng.randrange(partitions)
    return op


def active_controller(cluster: NodeControl) -> str:
    """The node that is the active KRaft controller, from the controllers' persisted views of the election
    (`clusters.quorum.elections`): the leader of the view with the highest epoch."""
    views = [v for v in quorum.elections(cluster).values() if v is not None and v[0] >= 0]
    best = max(views, key=lambda v: v[1], default=None)
    active = cluster.node_of(best[0]) if best else None
    if active is None:
        raise FaultSkipped("no active controller is known")
    return active


def java_hash(text: str) -> int:
    """Java's `String.hashCode()` of `text`: a 32-bit signed sum over its UTF-16 code units."""
    raw = text.encode("utf-16-be")
    h = 0
    for unit in struct.unpack(f">{len(raw) // 2}H", raw):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def key_partition(key: str, partitions: int) -> int:
    """The partition of an internal topic of `partitions` partitions that holds `key` (Kafka's
    `Utils.abs(key.hashCode()) % partitions`, where abs of the smallest int is 0)."""
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def coordinator(cluster: NodeControl, kind: str, keys: Mapping[str, tuple[str, ...]],
                pick: random.Random) -> tuple[str, dict[str, Any]]:
    """The broker coordinating one of the run's keys of coordinator target `kind`, drawn with `pick`, and what
    to record: the key and the internal topic partition. FaultSkipped when there is none."""
    internal, of = COORDINATORS[kind]
    candidates = sorted(keys.get(of, ()))
    if not candidates:
        raise FaultSkipped(f"this run has no {of} key for {kind}")
    key = pick.choice(candidates)
    try:
        if of == "share":
            key = share_key(key, admin.topic_id(cluster.bootstrap(), key.rsplit(":", 2)[1]))
        states = admin.partitions(cluster.bootstrap(), internal)
    except KafkaException as e:
        raise FaultSkipped(f"{internal} cannot be read (not made yet?): {e}") from None
    if not states:
        raise FaultSkipped(f"{internal} does not exist yet")
    p = key_partition(key, len(states))
    leader = cluster.node_of(states[p].leader) if p in states else None
    if leader is None:
        raise FaultSkipped(f"{internal}-{p}, which holds {key}, has no leader")
    return leader, {"coordinator": {"key": key, "partition": f"{internal}-{p}"}}


def moving_replicas(cluster: NodeControl, topic: str, kind: str) -> list[str]:
    """The brokers a reassignment of `topic` in progress is adding (`kind` "adding") or removing ("removing"),
    sorted; FaultSkipped when none is."""
    ids = {i for m in reassign.moving(cluster, topic).values() for i in (m.adding if kind == "adding" else m.removing)}
    names = sorted(n for i in ids if (n := cluster.node_of(i)))
    if not names:
        raise FaultSkipped(f"no reassignment of {topic} is {kind} a replica now")
    return names


def share_key(named: str, topic_id: str) -> str:
    """The share coordinator's key for `group:topic:partition` (as a workload names it) once the topic's id is
    known: `group:topic-id:partition`, as Kafka's SharePartitionKey.asCoordinatorKey writes it (the id in
    Kafka's URL-safe base64, without padding)."""
    group, _, partition = named.rsplit(":", 2)
    return f"{group}:{topic_id}:{partition}"


def coordinator_keys(cfg: TestConfig) -> Mapping[str, tuple[str, ...]]:
    """The run's coordinator keys by kind ("txn", "group", "share"), as its workload names them."""
    return kind_of(cfg.workload.kind).coordinators(cfg)


def resolve_recorded(cluster: NodeControl, topic: str, op: dict[str, Any],
                     keys: Mapping[str, tuple[str, ...]] | None = None) -> tuple[list[str], dict[str, Any]]:
    """The nodes `op`'s target names right now (sorted), and what to record of the resolution beyond them (a
    coordinator's key and partition); FaultSkipped when there are none.

    An op may instead name its nodes outright (`"nodes": ["n2"]`), as a
    hand-written schedule might. A leader/follower target without a
    partition means partition 0. A coordinator target draws among `keys`, the
    run's coordinator keys by kind ("txn", "group", "share").
    """
    kind, pick = op["target"], random.Random(op.get("pick", 0))
    if kind in COORDINATORS and "nodes" not in op:
        node, record = coordinator(cluster, kind, keys or {}, pick)
        return [node], record
    return _resolve(cluster, topic, op, kind, pick), {}


def _resolve(cluster: NodeControl, topic: str, op: dict[str, Any], kind: str, pick: random.Random) -> list[str]:
    everyone = sorted((set(cluster.nodes) | set(cluster.controllers)) & cluster.members)
    if "nodes" in op:
        unknown = sorted(set(op["nodes"]) - set(everyone))
        if unknown:
            raise FaultSkipped(f"no such nodes: {', '.join(unknown)}")
        return sorted(op["nodes"])
    if kind == "controller":
        return [active_controller(cluster)]
    if kind in MOVING_TARGETS:
        return [pick.choice(moving_replicas(cluster, topic, kind))]
    if kind in PARTITIONED:
        p = op.get("partition", 0)
        state = admin.partitions(cluster.bootstrap(), topic).get(p)
        if state is None:
            raise FaultSkipped(f"topic {topic} has no partition {p}")
        leader = cluster.node_of(state.leader)
        if kind == "leader":
            if leader is None:
                raise FaultSkipped(f"partition {p} has no leader")
            return [leader]
        followers = sorted(n for r in state.replicas if (n := cluster.node_of(r)) and n != leader)
        if not followers:
            raise FaultSkipped(f"partition {p} has no followers")
        return followers if kind == "followers" else [pick.choice(followers)]
    brokers = sorted(n for n in cluster.nodes if n in cluster.members)  # not a spare yet to add, nor a retired one
    size = {"one": 1, "minority": (len(brokers) - 1) // 2, "majority": len(brokers) // 2 + 1,
            "all": len(everyone)}[kind]
    if size == 0:
        raise FaultSkipped(f"a minority of {len(brokers)} brokers is empty")
    if kind == "all":
        return everyone
    return sorted(pick.sample(brokers, size))


def await_isr(read_isr: Callable[[], tuple[int, ...]], size: int, timeout: float, poll: float = 0.2,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> tuple[float, tuple[int, ...]]:
    """Wait until `read_isr()` has at most `size` members: (seconds waited, that ISR).

    FaultSkipped when `timeout` seconds pass first. A metadata request that
    fails counts as "not yet": a fault waiting on the ISR fires against a
    cluster that answers, or not at all.
    """
    start, last = clock(), None
    while True:
        try:
            last = read_isr()
        except FaultSkipped:
            raise
        except Exception:
            pass
        if last is not None and len(last) <= size:
            return clock() - start, last
        if clock() - start >= timeout:
            seen = "unknown" if last is None else "[" + ", ".join(map(str, last)) + "]"
            raise FaultSkipped(f"the ISR did not shrink to {size} within {timeout:g} s (last seen {seen})")
        sleep(poll)


def awaited(cluster: NodeControl, topic: str, op: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
    """Honour an op's precondition `await_isr: N` (and `await_s`): hold the fault until partition
    `op["partition"]` (default 0) has at most N in-sync replicas. Returns what to record: {} for an
    op without one, else `{"awaited_s": ..., "awaited_isr": [node names]}`. FaultSkipped as soon as
    `stop` is set: a run that is ending heals now instead of after the wait.

    A scheduled time says "not before"; this says "not before the ISR has shrunk", so a fault
    meant for the last in-sync replica finds it, whatever the machine's speed.
    """
    if "await_isr" not in op:
        return {}
    p = op.get("partition", 0)

    def read() -> tuple[int, ...]:
        state = admin.partitions(cluster.bootstrap(), topic, timeout=2.0).get(p)
        if state is None:
            raise FaultSkipped(f"topic {topic} has no partition {p}")
        return state.isr

    def sleep(s: float) -> None:
        if stop.wait(s):
            raise FaultSkipped(f"the run stopped while the fault waited for the ISR of partition {p}")

    waited, isr = await_isr(read, int(op["await_isr"]), float(op.get("await_s", AWAIT_S)), sleep=sleep)
    return {"awaited_s": round(waited, 3), "awaited_isr": [cluster.node_of(r) or str(r) for r in isr]}
