"""Brokers joining and leaving the cluster, as operators grow and shrink it (`--spares N` gives it brokers to add).

- `add-broker`: a spare broker starts, registers, and receives a replica of each of the run's partitions (one of
  its followers' moves there), as an operator rebalances onto a new broker.
- `decommission`: the target broker is drained, as the operator's procedure has it: every replica it holds, of the
  run's topic and of Kafka's internal topics, moves to a broker that holds none of that partition (a spare is
  added first when no running broker can take them); once the moves complete it is shut down and unregistered
  (`kafka-cluster unregister`), and it stays out of the cluster. A drain that does not complete within DRAIN_S is
  cancelled and the broker left running.
Both follow their reassignments as `reassign` does: a `verify` op records how they went, the heal settles them.
"""
from __future__ import annotations

import random
from typing import Any, cast

from kchaos.clusters import admin
from kchaos.core.config import TestConfig
from kchaos.core.protocols import FaultSkipped, Membership
from kchaos.nemesis.base import Package, ScheduledOp, periodic, targeted
from kchaos.nemesis.process import ANY
from kchaos.nemesis.reassign import SETTLE_S, Reassignments, names

DRAIN_S = 90.0  # how long a decommission waits for its broker's replicas to move before it gives up
COLORS = {"add-broker": "#8cd17d", "decommission": "#b6992d", "verify": "#9edae5"}


def _spare(cluster: Membership) -> str:
    spares = [n for n in cluster.spares if n not in cluster.members]
    if not spares:
        raise FaultSkipped("no spare broker is left to add (--spares N)")
    return spares[0]


class AddBroker:
    """`{"f": "add-broker"}`: start a spare and move a follower replica of each of the run's partitions onto it;
    `{"f": "verify"}`: how the moves went."""

    name = "add-broker"

    def __init__(self, cluster: Membership, cfg: TestConfig):
        self.cluster, self.topic = cluster, cfg.topic.name
        self.moves = Reassignments(cluster, cfg.nemesis.reassign_throttle or None)

    def setup(self, cluster: Any, history: Any) -> None:
        """Nothing to prepare."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """Add a spare (FaultSkipped when none is left), or verify the moves onto it."""
        if op["f"] == "verify":
            verified = self.moves.verify()
            return {"reassignments": verified} if verified else {}
        if op["f"] != "add-broker":
            raise ValueError(f"add-broker cannot {op['f']!r}")
        node = _spare(self.cluster)
        self.cluster.join(node)
        new = self.cluster.id_of(node)
        pick = random.Random(op.get("pick", 0))
        moves: dict[tuple[str, int], list[int]] = {}
        for p, state in sorted(admin.partitions(self.cluster.bootstrap(), self.topic).items()):
            followers = [r for r in state.replicas if r != state.leader]
            if new not in state.replicas and followers:
                out = pick.choice(followers)
                moves[(self.topic, p)] = [new if r == out else r for r in state.replicas]
        answer = self.moves.start(moves) if moves else "no partition to move"
        return {"nodes": [node], "moved": {f"{t}-{p}": names(self.cluster, r) for (t, p), r in sorted(moves.items())},
                "answer": answer}

    def teardown(self) -> None:
        """Settle the moves (cancel those that do not complete); the added broker stays."""
        if not self.moves.settle(SETTLE_S):
            self.moves.cancel()


class Decommission:
    """Drain the target broker's replicas to others, then shut it down and unregister it (a NodeFault whose mend only
    records: a decommissioned broker stays out)."""

    def __init__(self, cluster: Membership, cfg: TestConfig):
        self.cluster = cluster
        self.moves = Reassignments(cluster, cfg.nemesis.reassign_throttle or None)

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Decommission `nodes[0]`: FaultSkipped when it is no running member, or when no broker can take one of its
        replicas and no spare is left; a drain that does not complete in DRAIN_S is cancelled and recorded."""
        node = nodes[0]
        if node not in self.cluster.members or not self.cluster.is_running(node):
            raise FaultSkipped(f"{node} is no running broker of the cluster")
        pick = random.Random(op.get("pick", 0))
        victim = self.cluster.id_of(node)
        holding = _holding(self.cluster, victim)
        live = admin.registered_brokers(self.cluster.bootstrap()) - {victim}
        added = []
        if any(not (live - set(r)) for r in holding.values()):
            added.append(_spare(self.cluster))
            self.cluster.join(added[0])
            live.add(self.cluster.id_of(added[0]))
        moves = {key: [pick.choice(sorted(live - set(r))) if b == victim else b for b in r]
                 for key, r in sorted(holding.items())}
        if moves:
            self.moves.start(moves)
        drained = self.moves.settle(DRAIN_S)
        out = {"nodes": [node], "added": added, "drained": drained,
               "moved": {f"{t}-{p}": names(self.cluster, r) for (t, p), r in sorted(moves.items())}}
        if not drained:
            self.moves.cancel()
            return {**out, "nodes": []}
        return {**out, "unregistered": self.cluster.retire(node)}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """A decommissioned broker stays out of the cluster: nothing to mend."""
        return {}

    def heal(self) -> None:
        """Cancel a drain cut short; decommissioned brokers stay out."""
        self.moves.cancel()


def _holding(cluster: Membership, broker: int) -> dict[tuple[str, int], list[int]]:
    """Every partition, of any topic, with a replica on `broker`: its replicas."""
    md = admin.admin_client(cluster.bootstrap()).list_topics(timeout=10)
    return {(name, p.id): list(p.replicas) for name, t in md.topics.items() if t.error is None
            for p in t.partitions.values() if broker in p.replicas}


def _add_schedule(rng: random.Random, cfg: TestConfig, spec: str, target: str | None) -> list[ScheduledOp]:
    return periodic(rng, cfg, spec, lambda r: {"f": "add-broker", "pick": r.randrange(2**31)}, {"f": "verify"})


# cast: the runner hands every nemesis its whole Cluster, whose brokers join and leave.
PACKAGES = (
    Package("add-broker", lambda c, cfg: AddBroker(cast(Membership, c), cfg), _add_schedule,
            {k: COLORS[k] for k in ("add-broker", "verify")}, (), ("add-broker", "verify")),
    targeted("decommission", lambda c, cfg: Decommission(cast(Membership, c), cfg), start_f="decommission",
             stop_f="verify", targets=tuple(t for t in ANY if t not in ("all", "majority", "controller")),
             colors={k: COLORS[k] for k in ("decommission", "verify")}),
)
