"""Operator actions on leadership: an unclean leader election requested through the Admin API.

This is what `kafka-leader-election --election-type UNCLEAN` does. Kafka 3.7's
KRaft controller does not act on unclean.leader.election.enable by itself
(that arrived in 3.9, KAFKA-12670); in 3.7 a partition whose ISR is down stays
offline until an ISR member returns, or until an operator asks for exactly
this: any live replica, in sync or not, becomes leader, and the others
truncate to it when they return.
"""
from __future__ import annotations

import random
from typing import Any

from confluent_kafka import ElectionType, KafkaException, TopicPartition

from kchaos.clusters import admin
from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.protocols import FaultSkipped, NodeControl
from kchaos.nemesis.base import Package, ScheduledOp, periodic

TIMEOUT_S = 15.0


class UncleanElection:
    """`{"f": "elect-unclean", "partition": P}`: ask the controller for an unclean election of partition P."""

    name = "elect-unclean"

    def __init__(self, cluster: NodeControl, cfg: TestConfig):
        self.cluster, self.topic = cluster, cfg.topic.name

    def setup(self, cluster: NodeControl, history: History) -> None:
        """Nothing to prepare."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """Request the election; FaultSkipped when the partition has a leader already (nothing to elect)."""
        p = op.get("partition", 0)
        client = admin.admin_client(self.cluster.bootstrap())
        try:
            # No timeout keywords: confluent-kafka 2.16's elect_leaders raises SystemError on them; its
            # timeouts then follow the client's socket.timeout.ms.
            fut = client.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(self.topic, p)])
            outcome = fut.result(timeout=admin.settle(TIMEOUT_S))
        except KafkaException as e:
            raise FaultSkipped(f"unclean election of partition {p} refused: {e.args[0].str()}") from None
        err = next(iter(outcome.values()), None)
        if err is not None:
            raise FaultSkipped(f"unclean election of partition {p}: {err.str()}")
        state = admin.partitions(self.cluster.bootstrap(), self.topic).get(p)
        leader = self.cluster.node_of(state.leader) if state else None
        return {"partition": p, "nodes": [leader] if leader else [], "leader": leader}

    def teardown(self) -> None:
        """An election cannot be undone; nothing to heal."""


def _schedule(rng: random.Random, cfg: TestConfig, spec: str, target: str | None) -> list[ScheduledOp]:
    return periodic(rng, cfg, spec, lambda r: {"f": "elect-unclean", "partition": r.randrange(cfg.topic.partitions)},
                    None)


PACKAGES = (Package("elect-unclean", UncleanElection, _schedule, {"elect-unclean": "#d37295"}, (),
                    ("elect-unclean",)),)
