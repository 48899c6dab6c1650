"""Slow nodes: a follower's replication traffic shaped with tc or stalled, a slow disk (lazyfs delays),
a CPU quota.

Kafka's replication throttles do not slow a follower that is in the ISR, so
these faults slow the node itself, for longer than replica.lag.time.max.ms:
the leader should then drop the slow follower from the ISR, and take it back
once the fault is mended and it has caught up.
"""
from __future__ import annotations

from typing import Any

from kchaos.core.protocols import NodeControl
from kchaos.nemesis.base import outlive_lag, targeted
from kchaos.nemesis.targets import NODE_ROLES

# 512 bit/s towards port 9092: a follower's fetch request (and the ACKs for the
# data it receives) then take seconds each, so it cannot reach the leader's log
# end within replica.lag.time.max.ms, while its controller heartbeats (port
# 9093) and the clients it serves are untouched.
FOLLOWER_RATE = "512bit"
DISK_DELAY_MS = (100, 1000)  # every write, every fsync
CPU_SHARE = 0.05  # of one core
FOLLOWERS = ("follower", "followers", "one", "minority", "majority", "all", "leader", "controller",
             *NODE_ROLES)
NODES = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller",
         *NODE_ROLES)


class Each:
    """Runs `fault-ctl START...` on each target node, `fault-ctl STOP...` to mend, and STOP everywhere to heal."""

    def __init__(self, cluster: NodeControl, start: list[str], stop: list[str], record: dict[str, Any]):
        self.cluster, self.start, self.stop, self.record = cluster, start, stop, record

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Apply the fault on every node in `nodes`."""
        for n in nodes:
            self.cluster.fault_ctl(n, *self.start)
        return dict(self.record)

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Mend `nodes`."""
        for n in nodes:
            self.cluster.fault_ctl(n, *self.stop)
        return {}

    def heal(self) -> None:
        """Mend every node."""
        self.end(sorted(set(self.cluster.nodes) | set(self.cluster.controllers)))


class Stall:
    """A follower at rate zero: the target drops everything other brokers send from port 9092, so its
    replica fetchers get no answer, while clients and controller heartbeats (port 9093) go on.

    slow-follower's trickle lets a follower that left the ISR catch up again as soon as
    min.insync.replicas stops new writes, so it rejoins within a fetch or two; a stalled follower
    stays out until mended. Rules live in fault-ctl's drop chain, tagged with the nemesis name.
    """

    TAG = "stall-follower"

    def __init__(self, cluster: NodeControl):
        self.cluster = cluster

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Stall every node in `nodes`: record whom each no longer hears from."""
        stalled = {}
        for n in nodes:
            stalled[n] = sorted(b for b in self.cluster.nodes if b != n)
            self.cluster.fault_ctl(n, "stall", self.TAG, *(self.cluster.address(b) for b in stalled[n]))
        return {"stalled_from": stalled}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Let `nodes` fetch again."""
        for n in nodes:
            self.cluster.fault_ctl(n, "net-heal", self.TAG)
        return {}

    def heal(self) -> None:
        """Let every node fetch again."""
        self.end(sorted(set(self.cluster.nodes) | set(self.cluster.controllers)))


class CpuStarve:
    """Starves a node's Kafka of CPU (in Docker a CFS quota on its container, on a host a SIGSTOP/SIGCONT duty
    cycle: NodeControl.set_cpu); mending removes it."""

    def __init__(self, cluster: NodeControl, share: float = CPU_SHARE):
        self.cluster, self.share = cluster, share

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Cap every node in `nodes`."""
        for n in nodes:
            self.cluster.set_cpu(n, self.share)
        return {"cpu": self.share}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Remove the cap from `nodes`."""
        for n in nodes:
            self.cluster.set_cpu(n, None)
        return {}

    def heal(self) -> None:
        """Remove every cap."""
        self.end(sorted(set(self.cluster.nodes) | set(self.cluster.controllers)))


w_ms, f_ms = DISK_DELAY_MS
PACKAGES = (
    targeted("slow-follower", lambda c, cfg: Each(c, ["shape", FOLLOWER_RATE], ["unshape"], {"rate": FOLLOWER_RATE}),
             start_f="start-slow", stop_f="stop-slow", targets=FOLLOWERS, duration=outlive_lag,
             colors={"start-slow": "#76b7b2", "stop-slow": "#bab0ac"}),
    targeted("stall-follower", lambda c, cfg: Stall(c), start_f="start-stall", stop_f="stop-stall",
             targets=FOLLOWERS, duration=outlive_lag, colors={"start-stall": "#499894", "stop-stall": "#bab0ac"}),
    targeted("slow-disk", lambda c, cfg: Each(c, ["disk-delay", str(w_ms), str(f_ms)], ["disk-delay", "0", "0"],
                                              {"write_ms": w_ms, "fsync_ms": f_ms}),
             start_f="start-slow-disk", stop_f="stop-slow-disk", targets=NODES, duration=outlive_lag,
             colors={"start-slow-disk": "#9c755f", "stop-slow-disk": "#bab0ac"}, needs_lazyfs=True),
    targeted("cpu-starve", lambda c, cfg: CpuStarve(c), start_f="start-starve", stop_f="stop-starve",
             targets=NODES, duration=outlive_lag, colors={"start-starve": "#ff9da7", "stop-starve": "#bab0ac"}),
)
