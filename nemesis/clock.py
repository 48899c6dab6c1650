"""Clock faults: a node's Kafka reads a wall clock that is off, or that jumps back and forth.

Containers share their host's kernel clock, so no fault may set a node's clock. Instead, in a run that
may take a clock fault (preflight sets `cluster.faketime`), every Kafka JVM runs under libfaketime
(`kafka-ctl start` preloads it, with a zero offset until a fault says otherwise), which adds an offset to
the wall clock the process reads: `fault-ctl clock S` changes that offset while Kafka runs. Monotonic
clocks stay real (System.nanoTime), so only what Kafka times with System.currentTimeMillis moves: record
timestamps under LogAppendTime, time-based retention, transaction timeouts, the replica lag check, the
KRaft election and fetch timers (docs/nemeses.md).
"""
from __future__ import annotations

import random
from typing import Any

from kchaos.core.protocols import NodeControl
from kchaos.nemesis.base import outlive_lag, targeted
from kchaos.nemesis.targets import NODE_ROLES

MAX_SKEW_S = 60  # a drawn offset is 1..MAX_SKEW_S seconds, ahead or behind
STROBE_PERIOD_S = 1  # libfaketime reads its offset file once a second: no clock can jump faster
NODES = ("one", "minority", "majority", "all", "leader", "follower", "followers", "controller", *NODE_ROLES)


def draw_offsets(nodes: list[str], op: dict[str, Any]) -> dict[str, int]:
    """Each node's offset in whole seconds: the op's `offset_s` for all of them when it has one, else
    drawn from the op's `pick` (1..`max_s` seconds, default MAX_SKEW_S, either sign), so a replayed op
    gives the same nodes the same offsets."""
    if "offset_s" in op:
        return {n: int(op["offset_s"]) for n in nodes}
    rng, top = random.Random(op.get("pick", 0)), int(op.get("max_s", MAX_SKEW_S))
    return {n: rng.choice((-1, 1)) * rng.randint(1, max(1, top)) for n in sorted(nodes)}


class Skew:
    """`fault-ctl clock S` on each target, S drawn per node (`draw_offsets`); the mend sets 0 again."""

    def __init__(self, cluster: NodeControl):
        self.cluster = cluster

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Move the clock of every node in `nodes`; record each node's offset in seconds."""
        offsets = draw_offsets(nodes, op)
        for n in nodes:
            self.cluster.fault_ctl(n, "clock", str(offsets[n]))
        return {"offsets_s": offsets}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Set the clock of `nodes` back to the real one (stopping a strobe too)."""
        for n in nodes:
            self.cluster.fault_ctl(n, "unclock")
        return {}

    def heal(self) -> None:
        """Every node's clock real again."""
        self.end(sorted(set(self.cluster.nodes) | set(self.cluster.controllers)))


class Strobe(Skew):
    """`fault-ctl clock-strobe 0 S P` on each target: its clock jumps between real and S seconds off every
    P seconds until the mend (Jepsen's strobe, at the one-second pace libfaketime allows)."""

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Start strobing every node in `nodes`; record the two offsets and the period of each."""
        offsets = draw_offsets(nodes, op)
        period = max(1, int(op.get("period_s", STROBE_PERIOD_S)))
        for n in nodes:
            self.cluster.fault_ctl(n, "clock-strobe", "0", str(offsets[n]), str(period))
        return {"strobe": {n: {"offsets_s": [0, offsets[n]], "period_s": period} for n in nodes}}


PACKAGES = (
    targeted("clock-skew", lambda c, cfg: Skew(c), start_f="start-clock-skew", stop_f="stop-clock-skew",
             targets=NODES, duration=outlive_lag, needs_faketime=True,
             colors={"start-clock-skew": "#86bcb6", "stop-clock-skew": "#bab0ac"}),
    targeted("clock-strobe", lambda c, cfg: Strobe(c), start_f="start-clock-strobe", stop_f="stop-clock-strobe",
             targets=NODES, duration=outlive_lag, needs_faketime=True,
             colors={"start-clock-strobe": "#f1ce63", "stop-clock-strobe": "#bab0ac"}),
)
