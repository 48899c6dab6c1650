"""Target specs: which nodes a fault hits, resolved against the live cluster when the fault fires.

A spec is a word, optionally with a partition: `one`, `minority`, `majority`,
`all`, `leader[:P]`, `follower[:P]`, `followers[:P]`, `controller`. The
schedule stores the spec, the partition and a `pick` number drawn from the
seed; resolution orders the candidates, then draws from `random.Random(pick)`,
so a replayed schedule makes the same choice among the same candidates
("the leader of partition 0", "a random minority"). An op may also name its
nodes (`"nodes": ["n1"]`).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from clusters import admin
from clusters.kraft import DATA_DIR
from harness.protocols import Cluster, FaultSkipped

KINDS = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller")
PARTITIONED = ("leader", "follower", "followers")


@dataclass(frozen=True)
class Target:
    """A parsed target spec: its kind and, for leader/follower(s), an optional partition."""

    kind: str
    partition: int | None = None

    @classmethod
    def parse(cls, spec: str) -> "Target":
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


def active_controller(cluster: Cluster) -> str:
    """The node that is the active KRaft controller, from the controllers' persisted quorum state.

    Every controller writes `quorum-state` (leader id and epoch) when its view
    of the election changes; the view with the highest epoch wins.
    """
    best: tuple[int, int] | None = None
    for node in cluster.controllers:
        code, out = cluster.exec(node, ["cat", f"{DATA_DIR}/__cluster_metadata-0/quorum-state"])
        if code != 0:
            continue
        try:
            state = json.loads(out)
        except json.JSONDecodeError:
            continue
        if state.get("leaderId", -1) >= 0 and (best is None or state["leaderEpoch"] > best[1]):
            best = (state["leaderId"], state["leaderEpoch"])
    node = cluster.node_of(best[0]) if best else None
    if node is None:
        raise FaultSkipped("no active controller is known")
    return node


def resolve(cluster: Cluster, topic: str, op: dict[str, Any]) -> list[str]:
    """The nodes `op`'s target names right now (sorted); FaultSkipped when there are none.

    An op may instead name its nodes outright (`"nodes": ["n2"]`), as a
    hand-written schedule might. A leader/follower target without a
    partition means partition 0.
    """
    kind, pick = op["target"], random.Random(op.get("pick", 0))
    everyone = sorted(set(cluster.nodes) | set(cluster.controllers))
    if "nodes" in op:
        unknown = sorted(set(op["nodes"]) - set(everyone))
        if unknown:
            raise FaultSkipped(f"no such nodes: {', '.join(unknown)}")
        return sorted(op["nodes"])
    if kind == "controller":
        return [active_controller(cluster)]
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
    brokers = sorted(cluster.nodes)
    size = {"one": 1, "minority": (len(brokers) - 1) // 2, "majority": len(brokers) // 2 + 1,
            "all": len(everyone)}[kind]
    if size == 0:
        raise FaultSkipped(f"a minority of {len(brokers)} brokers is empty")
    if kind == "all":
        return everyone
    return sorted(pick.sample(brokers, size))
