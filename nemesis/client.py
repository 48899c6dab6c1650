"""Client faults: `crash-client` crashes one client process (a consumer group member of the queue workload, a
transaction process of the txn workload, a copier of the copy workload) and starts a new one with the same
identity in its place.

The workload does the crashing (`CrashableClients.crash_client` of the workload's clients): a thread cannot be
killed, so the process abandons its clients without closing them (no commit of its own, no LeaveGroup,
no abort), as a crashed process would leave them, and starts new ones, same client.id (and transactional.id),
after `--restart-delay` seconds. The op is one-shot: nothing to mend.
"""
from __future__ import annotations

import random
from typing import Any

from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.protocols import CrashableClients, FaultSkipped, NodeControl
from kchaos.nemesis.base import Package, ScheduledOp, periodic

COLORS = {"crash": "#9c755f"}


class CrashClient:
    """Crashes the group member the op's `pick` chooses."""

    name = "crash-client"

    def __init__(self, cluster: NodeControl, cfg: TestConfig, workload: CrashableClients):
        self.workload, self.restart_after = workload, cfg.nemesis.restart_delay

    def setup(self, cluster: NodeControl, history: History) -> None:
        """Nothing to prepare."""

    def invoke(self, op: dict[str, Any]) -> dict[str, Any]:
        """`{"f": "crash", "pick": N}`: crash one member; return the `member` (its process) and `restart_after`."""
        if op["f"] != "crash":
            raise ValueError(f"crash-client cannot {op['f']!r}")
        try:
            return self.workload.crash_client(int(op.get("pick", 0)), self.restart_after)
        except (AttributeError, ValueError) as e:
            raise FaultSkipped(str(e)) from None

    def teardown(self) -> None:
        """Nothing to heal: a crashed member has already been replaced, or will be."""


def _schedule(rng: random.Random, cfg: TestConfig, spec: str, target: str | None) -> list[ScheduledOp]:
    return periodic(rng, cfg, spec, lambda r: {"f": "crash", "pick": r.randrange(2**31)}, None)


PACKAGES = (Package("crash-client", CrashClient, _schedule, COLORS, (), ("crash",), needs_workload=True),)
