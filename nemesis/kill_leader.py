"""`kill-leader`: SIGKILL the Kafka process leading a random partition, restart it after a delay."""
from __future__ import annotations

import random
from typing import Any

from clusters import admin
from harness.config import TestConfig
from harness.history import History
from harness.protocols import Cluster
from nemesis.base import FaultSkipped, Package, ScheduledOp, periodic


class KillLeader:
    """Kills the current leader of the partition named in each `kill` op; `start` restarts what it killed."""

    name = "kill-leader"

    def __init__(self, cluster: Cluster, cfg: TestConfig):
        self.cluster = cluster
        self.topic = cfg.topic.name
        self.down: set[str] = set()

    def setup(self, cluster: Cluster, history: History) -> None:
        """Nothing to prepare."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """`{"f": "kill", "partition": p}` kills p's leader; `{"f": "start"}` restarts killed nodes."""
        if op["f"] == "kill":
            p = op["partition"]
            leader = admin.partitions(self.cluster.bootstrap(), self.topic)[p].leader
            node = self.cluster.node_of(leader)
            if node is None:
                raise FaultSkipped(f"partition {p} has no leader")
            self.cluster.kill(node)
            self.down.add(node)
            return {"partition": p, "node": node}
        if op["f"] == "start":
            nodes = sorted(self.down)
            for node in nodes:
                self.cluster.start(node)
            self.down.clear()
            return {"nodes": nodes}
        raise ValueError(f"kill-leader cannot {op['f']!r}")

    def teardown(self) -> None:
        """Restart every node this nemesis killed."""
        self.invoke({"f": "start"})


def schedule(rng: random.Random, cfg: TestConfig) -> list[ScheduledOp]:
    """A kill of a random partition's leader every interval, each followed by a restart."""
    return periodic(rng, cfg, "kill-leader",
                    lambda r: {"f": "kill", "partition": r.randrange(cfg.topic.partitions)}, {"f": "start"})


PACKAGE = Package("kill-leader", KillLeader, schedule, colors={"kill": "#e15759", "start": "#59a14f"})
