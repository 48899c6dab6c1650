"""The txn workload's own options: test.json's `workload.options` for `--workload txn`."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TxnOptions:
    """The isolation level of the polls inside transactions, the share of transactions aborted on purpose, and
    the share of ops that are an assign or a subscribe instead (Jepsen's sub-p). Each field's `flag` is its
    `kchaos run` option."""

    isolation: str = field(default="read_committed", metadata={"flag": "--txn-isolation"})
    abort_p: float = field(default=0.1, metadata={"flag": "--txn-abort-p"})
    sub_p: float = field(default=0.0, metadata={"flag": "--txn-sub-p"})
