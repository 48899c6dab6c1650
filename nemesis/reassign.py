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
from dataclasses import replace
from typing import Any

from kchaos.clusters import admin, reassign
from kchaos.core.config import TestConfig
from kchaos.core.protocols import FaultSkipped, NodeControl
from kchaos.nemesis.base import TargetedNemesis, targeted, while_refused

TARGETS = ("leader", "follower")
COLORS = {"reassign": "#17becf", "verify": "#9edae5", "throttle": "#dbdb8d"}
THROTTLE_F = "throttle"
GROW = 1 / 3  # how often a reassignment adds a replica rather than moving one
SETTLE_S = 60.0  # how long the heal waits for reassignments to complete before it cancels them
POLL_S = 2.0
BROKERS_BACK_S = 30.0  # how long a throttle op retries while the tool does not know a broker its moves name


class Reassignments:
    """The reassignments a nemesis started, followed until they complete: what `verify` ops report and the heal
    settles."""

    def __init__(self, cluster: NodeControl, throttle: int | None):
        self.cluster, self.throttle = cluster, throttle
        self.pending: dict[tuple[str, int], list[int]] = {}  # (topic, partition) -> the replicas it moves to

    def start(self, moves: dict[tuple[str, int], list[int]]) -> str:
        """Start `moves` (kafka-reassign-partitions --execute, throttled as the run says); the tool's last line."""
        answer = reassign.execute(self.cluster, reassign.plan(moves), self.throttle)
        self.pending.update(moves)
        return answer

    def verify(self) -> dict[str, str]:
        """{"topic-partition": "completed" or "still in progress"} for those started and not yet seen complete,
        which are then no longer followed."""
        if not self.pending:
            return {}
        states = reassign.verify(self.cluster, reassign.plan(self.pending))
        for key, state in states.items():
            if state == "completed":
                self.pending.pop(key, None)
        return {f"{t}-{p}": state for (t, p), state in sorted(states.items())}

    def settle(self, within_s: float) -> bool:
        """Wait up to `within_s` for every reassignment followed to complete; whether they all did."""
        deadline = time.monotonic() + within_s
        while self.pending and time.monotonic() < deadline:
            try:
                self.verify()
            except FaultSkipped:
                pass
            if self.pending:
                time.sleep(POLL_S)
        return not self.pending

    def rethrottle(self, rate: int) -> str:
        """Throttle the reassignments in progress to `rate` bytes a second (`--execute --additional --throttle` with
        their plan, which Kafka takes as a change of throttle); the tool's last line, or "" when none is."""
        self.throttle = rate
        return reassign.execute(self.cluster, reassign.plan(self.pending), rate) if self.pending else ""

    def cancel(self) -> None:
        """Cancel those still followed (`--cancel`, which clears their throttles)."""
        if self.pending:
            reassign.cancel(self.cluster, reassign.plan(self.pending))
            self.pending.clear()


def names(cluster: NodeControl, ids: list[int] | tuple[int, ...]) -> list[str]:
    """Broker ids as node names."""
    return [cluster.node_of(i) or str(i) for i in ids]


class Reassign:
    """Start reassignments of the topic's partitions (`begin`), ask how they went (`end`), settle them (`heal`)."""

    def __init__(self, cluster: NodeControl, cfg: TestConfig):
        self.cluster, self.topic, self.rf = cluster, cfg.topic.name, cfg.topic.replication_factor
        self.moves = Reassignments(cluster, cfg.nemesis.reassign_throttle or None)

    def begin(self, nodes: list[str], op: dict[str, Any]) -> dict[str, Any]:
        """Reassign the op's partition away from the target replica `nodes[0]`: to a registered broker outside its
        replicas (a move; a third of the time an added replica instead), or, while it has more replicas than the
        topic's replication factor, without that replica. FaultSkipped when every broker holds a replica already."""
        p = int(op.get("partition", 0))
        pick = random.Random(op.get("pick", 0))
        state = admin.partitions(self.cluster.bootstrap(), self.topic).get(p)
        if state is None:
            raise FaultSkipped(f"topic {self.topic} has no partition {p}")
        replicas = list(state.replicas)
        victim = self.cluster.id_of(nodes[0])
        outside = sorted(admin.registered_brokers(self.cluster.bootstrap()) - set(replicas))
        if len(replicas) > self.rf:
            mode, to = "shrink", [r for r in replicas if r != victim]
        elif not outside:
            raise FaultSkipped(f"every broker holds a replica of partition {p}: reassignment needs more brokers "
                               f"(--nodes) than replicas ({len(replicas)})")
        else:
            added = pick.choice(outside)
            mode = "grow" if pick.random() < GROW else "move"
            to = replicas + [added] if mode == "grow" else [added if r == victim else r for r in replicas]
        answer = self.moves.start({(self.topic, p): to})
        return {"partition": p, "mode": mode, "from": names(self.cluster, replicas), "to": names(self.cluster, to),
                "adding": names(self.cluster, [r for r in to if r not in replicas]),
                "removing": names(self.cluster, [r for r in replicas if r not in to]), "answer": answer}

    def end(self, nodes: list[str]) -> dict[str, Any]:
        """Ask the tool how the reassignments started so far went: {"topic-partition": completed or still in
        progress}. Completed ones are no longer followed."""
        verified = self.moves.verify()
        return {"reassignments": verified} if verified else {}

    def rethrottle(self, op: dict[str, Any]) -> dict[str, Any]:
        """Change the throttle of the reassignments in progress to the op's `rate` (bytes a second). Kafka's tool
        refuses a plan naming a broker it does not know ("Unknown broker id": a restarted broker not registered
        again yet), so a refusal is retried every POLL_S / 2 for up to BROKERS_BACK_S, as an operator waits for the
        broker to come back; `refused` counts them."""
        rate = int(op["rate"])
        answer, refused = while_refused(lambda: self.moves.rethrottle(rate), "Unknown broker id", BROKERS_BACK_S,
                                        POLL_S / 2)
        return {"rate": rate, "partitions": [f"{t}-{p}" for t, p in sorted(self.moves.pending)],
                "refused": refused, "answer": answer}

    def heal(self) -> None:
        """Wait up to SETTLE_S for every reassignment started to complete (the tool then clears the throttles); cancel
        those still in progress, which also clears the throttles."""
        if not self.moves.settle(SETTLE_S):
            self.moves.cancel()


class ReassignNemesis(TargetedNemesis):
    """The reassign nemesis: `reassign` and `verify` as a targeted fault's start and stop, and `throttle` beside
    them."""

    fault: Reassign

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """A `throttle` op changes the throttle of the moves in progress; any other op is the targeted fault's."""
        if op["f"] == THROTTLE_F:
            return {"nodes": [], **self.fault.rethrottle(op)}
        return super().invoke(op)


def check_op(op: dict[str, Any]) -> str | None:
    """Why a scheduled reassign op is malformed: a `throttle` op needs `rate`, a positive number of bytes a second."""
    rate = op.get("rate")
    if op.get("f") == THROTTLE_F and (not isinstance(rate, int) or isinstance(rate, bool) or rate <= 0):
        return f"a throttle op needs rate, a positive number of bytes a second, got {rate!r}"
    return None


_TARGETED = targeted("reassign", lambda c, cfg: Reassign(c, cfg), start_f="reassign", stop_f="verify",
                     targets=TARGETS, colors=COLORS)
PACKAGES = (replace(_TARGETED, fs=(*_TARGETED.fs, THROTTLE_F), check_op=check_op,
                    make=lambda c, cfg: ReassignNemesis("reassign", Reassign(c, cfg), c, cfg, "reassign", "verify",
                                                        TARGETS[0])),)
