"""What every nemesis package shares: the package record, the skip signal, the schedule type."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.config import TestConfig
from harness.protocols import Cluster, Nemesis


class FaultSkipped(RuntimeError):
    """A fault that cannot be applied now (e.g. no leader to kill); recorded as `info`, the run goes on."""


@dataclass(frozen=True)
class ScheduledOp:
    """One fault operation at `at` seconds after the workload started."""

    at: float
    nemesis: str
    op: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON form, as saved in schedule.json."""
        return {"at": round(self.at, 3), "nemesis": self.nemesis, "op": self.op}


@dataclass(frozen=True)
class Package:
    """A nemesis bundled with its schedule and the colours its faults get in plots (Jepsen's packages)."""

    name: str
    make: Callable[[Cluster, TestConfig], Nemesis]
    schedule: Callable[[random.Random, TestConfig], list[ScheduledOp]]
    colors: dict[str, str] = field(default_factory=dict)


def periodic(rng: random.Random, cfg: TestConfig, name: str,
             fault: Callable[[random.Random], dict[str, Any]], heal: dict[str, Any]) -> list[ScheduledOp]:
    """Fault, then heal after `restart_delay`, repeated every `interval` (+/- jitter) until the time limit."""
    n = cfg.nemesis
    ops: list[ScheduledOp] = []
    t = n.interval * (1 + rng.uniform(-n.jitter, n.jitter))
    while t < cfg.time_limit:
        ops.append(ScheduledOp(t, name, fault(rng)))
        heal_at = t + min(n.restart_delay, n.interval * (1 - n.jitter) * 0.9)
        ops.append(ScheduledOp(heal_at, name, dict(heal)))
        t += n.interval * (1 + rng.uniform(-n.jitter, n.jitter))
    return ops
