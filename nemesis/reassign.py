"""Partition reassignment while writes flow, as operators and Cruise Control run it every day: kafka-reassign-partitions
moves a replica of one of the run's partitions to a broker that holds none (the leader's, or a follower's), or changes
the replication factor (3 → 4, then back to 3 at the next op).

Each `reassign` op starts one reassignment and returns; Kafka copies the partition to the new replica in the
background, throttled by `--reassign-throttle` when it is given. The `verify` op after it asks the tool whether
the reassignments have completed (and, once they all have, the tool clears the throttles). The heal waits for
every reassignment to complete and cancels those that do not. Other faults can aim at the moving replicas
(`kill:adding`, `partition-one:removing`: `nemesis/targets.py`).
"""
from __future__ import annotations

import random
import time
from typing import Any

from kchaos.clusters import admin, reassign
from kchaos.core.config import TestConfig
from kchaos.core.protocols import FaultSkipped, NodeControl
from kchaos.nemesis.base import targeted

TARGETS = ("leader", "follower")
COLORS = {"reassign": "#17becf", "verify": "#9edae5"}
GROW = 1 / 3  # how often a reassignment adds a replica rather than moving one
SETTLE_S = 60.0  # how long the heal waits for reassignments to complete before it cancels them
POLL_S = 2.0


class Reassign:
    """Start reassignments of the topic's partitions (`begin`), ask how they went (`end`), settle them (`heal`)."""

    def __init__(self, cluster: NodeControl, cfg: TestConfig):
        self.cluster, self.topic, self.rf = cluster, cfg.topic.name, cfg.topic.replication_factor
        self.throttle = cfg.nemesis.reassign_throttle or None
        self.pending: dict[int, list[int]] = {}  # partition -> the replicas it is being moved to

    def _names(self, ids: list[int] | tuple[int, ...]) -> list[str]:
        return [self.cluster.node_of(i) or str(i) for i in ids]

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Reassign the op's partition away from the target replica `nodes[0]`: to a broker outside its replicas
        (a move; a third of the time an added replica instead), or, while it has more replicas than the topic's
        replication factor, without that replica. FaultSkipped when every broker holds a replica already."""
        p = int(op.get("partition", 0))
        pick = random.Random(op.get("pick", 0))
        state = admin.partitions(self.cluster.bootstrap(), self.topic).get(p)
        if state is None:
            raise FaultSkipped(f"topic {self.topic} has no partition {p}")
        replicas = list(state.replicas)
        victim = self.cluster.id_of(nodes[0])
        outside = sorted(set(map(self.cluster.id_of, self.cluster.nodes)) - set(replicas))
        if len(replicas) > self.rf:
            mode, to = "shrink", [r for r in replicas if r != victim]
        elif not outside:
            raise FaultSkipped(f"every broker holds a replica of partition {p}: reassignment needs more brokers "
                               f"(--nodes) than replicas ({len(replicas)})")
        else:
            added = pick.choice(outside)
            mode = "grow" if pick.random() < GROW else "move"
            to = replicas + [added] if mode == "grow" else [added if r == victim else r for r in replicas]
        answer = reassign.execute(self.cluster, reassign.plan(self.topic, {p: to}), self.throttle)
        self.pending[p] = to
        return {"partition": p, "mode": mode, "from": self._names(replicas), "to": self._names(to),
                "adding": self._names([r for r in to if r not in replicas]),
                "removing": self._names([r for r in replicas if r not in to]), "answer": answer}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Ask the tool how the reassignments started so far went: {partition: completed or still in progress}.
        Completed ones are no longer followed."""
        if not self.pending:
            return {}
        states = reassign.verify(self.cluster, reassign.plan(self.topic, self.pending))
        for p, state in states.items():
            if state == "completed":
                self.pending.pop(p, None)
        return {"reassignments": {str(p): s for p, s in sorted(states.items())}}

    def heal(self) -> None:
        """Wait up to SETTLE_S for every reassignment started to complete (the tool then clears the throttles); cancel
        those still in progress, which also clears the throttles."""
        deadline = time.monotonic() + SETTLE_S
        while self.pending and time.monotonic() < deadline:
            try:
                self.end([])
            except FaultSkipped:
                pass
            if self.pending:
                time.sleep(POLL_S)
        if self.pending:
            reassign.cancel(self.cluster, reassign.plan(self.topic, self.pending))
            self.pending.clear()


PACKAGES = (targeted("reassign", lambda c, cfg: Reassign(c, cfg), start_f="reassign", stop_f="verify",
                     targets=TARGETS, colors=COLORS),)
