"""Workload registry: one line per workload. `WorkloadConfig.kind` names an entry; a workload is a
class implementing core.protocols.Workload, built from the test's configuration."""
from __future__ import annotations

from typing import Callable

from core.config import TestConfig
from core.protocols import Workload
from workloads.queue import QueueWorkload
from workloads.txn import TxnWorkload

WORKLOADS: dict[str, Callable[[TestConfig], Workload]] = {
    "queue": QueueWorkload,
    "txn": TxnWorkload,
}
