"""Nemesis registry: one line per package. `--nemesis a,b` names entries here."""
from __future__ import annotations

from nemesis import kill_leader
from nemesis.base import FaultSkipped, Package, ScheduledOp

PACKAGES: dict[str, Package] = {
    kill_leader.PACKAGE.name: kill_leader.PACKAGE,
}

# "none" runs the workload without faults.
NAMES = tuple(PACKAGES) + ("none",)

__all__ = ["PACKAGES", "NAMES", "Package", "ScheduledOp", "FaultSkipped"]
