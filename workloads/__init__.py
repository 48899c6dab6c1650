"""Workload registry: one line per workload. `WorkloadConfig.kind` names an entry; a workload is a
class implementing core.protocols.Workload, built from the test's configuration (and, for txn and copy with
`--client java`, the compiled Java client: harness/build.py passes it as `java=`)."""
from __future__ import annotations

from collections.abc import Callable

from kchaos.core.protocols import Workload
from kchaos.workloads.copy import CopyWorkload
from kchaos.workloads.queue import QueueWorkload
from kchaos.workloads.txn import TxnWorkload

WORKLOADS: dict[str, Callable[..., Workload]] = {
    "queue": QueueWorkload,
    "txn": TxnWorkload,
    "copy": CopyWorkload,
}
