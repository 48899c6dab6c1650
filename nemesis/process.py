"""Process faults: SIGKILL, graceful stop, SIGSTOP for longer than the session timeout, rolling restart."""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.protocols import NodeControl
from kchaos.nemesis.base import FaultSkipped, Package, ScheduledOp, outlive_session, periodic, targeted
from kchaos.nemesis.targets import NODE_ROLES

log = logging.getLogger("kchaos.nemesis")
ANY = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller", *NODE_ROLES)
COLORS = {"kill": "#e15759", "stop": "#f28e2b", "pause": "#b07aa1", "start": "#59a14f", "resume": "#59a14f",
          "roll": "#edc948"}


def _running(cluster: NodeControl, nodes: list[str], verb: str) -> list[str]:
    """The nodes of `nodes` whose Kafka runs; FaultSkipped when none does."""
    up = [n for n in nodes if cluster.is_running(n)]
    if not up:
        raise FaultSkipped(f"cannot {verb} {', '.join(nodes)}: Kafka is not running there")
    return up


class Signal:
    """Kill (SIGKILL), stop (SIGTERM, wait) or pause (SIGSTOP) Kafka on nodes; mend by start or SIGCONT."""

    def __init__(self, cluster: NodeControl, verb: str):
        self.cluster, self.verb = cluster, verb

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Signal the Kafka processes of `nodes` that are running; the others are reported as skipped."""
        up = _running(self.cluster, nodes, self.verb)
        for n in up:
            getattr(self.cluster, self.verb)(n)
        return {"nodes": up, "skipped": sorted(set(nodes) - set(up))}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Resume (pause) or start (kill, stop) Kafka on `nodes`."""
        for n in nodes:
            self.cluster.resume(n) if self.verb == "pause" else self.cluster.start(n)
        return {}

    def heal(self) -> None:
        """Resume and start Kafka everywhere, the nodes at once (the cluster's `restore`)."""
        self.cluster.restore()


def _signal(name: str, verb: str, mend: str, targets: tuple[str, ...],
            duration: Callable[[TestConfig], float] | None = None) -> Package:
    return targeted(name, lambda c, cfg: Signal(c, verb), start_f=verb, stop_f=mend, targets=targets,
                    colors={verb: COLORS[verb], mend: COLORS[mend]}, duration=duration)


class RollingRestart:
    """Restarts every node gracefully, one at a time, waiting for each to rejoin the ISR before the next."""

    name = "rolling-restart"

    def __init__(self, cluster: NodeControl, cfg: TestConfig):
        self.cluster, self.cfg = cluster, cfg

    def setup(self, cluster: NodeControl, history: History) -> None:
        """Nothing to prepare."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """`{"f": "roll"}`: stop and start each node in turn; record how long each was out."""
        if op["f"] != "roll":
            raise ValueError(f"rolling-restart cannot {op['f']!r}")
        order = sorted(self.cluster.members)
        random.Random(op.get("pick", 0)).shuffle(order)
        out: dict[str, float] = {}
        for n in order:
            t0 = time.monotonic()
            self.cluster.stop(n)
            self.cluster.start(n)
            self.cluster.wait_brokers(60)
            self.cluster.wait_topic(self.cfg.topic.name, self.cfg.topic.replication_factor, 60)
            out[n] = round(time.monotonic() - t0, 1)
        return {"nodes": order, "seconds": out}

    def teardown(self) -> None:
        """Start any node a failed roll left down."""
        Signal(self.cluster, "stop").heal()


def _roll_schedule(rng: random.Random, cfg: TestConfig, spec: str, target: str | None) -> list[ScheduledOp]:
    return periodic(rng, cfg, spec, lambda r: {"f": "roll", "pick": r.randrange(2**31)}, None)


PACKAGES = (
    _signal("kill", "kill", "start", ANY),
    _signal("kill-leader", "kill", "start", ("leader",)),
    _signal("kill-controller", "kill", "start", ("controller",)),
    _signal("stop", "stop", "start", ANY),
    _signal("pause", "pause", "resume", ANY, duration=outlive_session),
    Package("rolling-restart", RollingRestart, _roll_schedule, {"roll": COLORS["roll"]}, (), ("roll",)),
)
