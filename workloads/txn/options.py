"""The txn workload's own options: test.json's `workload.options` for `--workload txn`."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TxnOptions:
    """The isolation level of the polls inside transactions, the share of transactions aborted on purpose, and
    the share of ops that are an assign or a subscribe instead (Jepsen's sub-p). Each field's metadata is its
    `kchaos run` option: `flag`, `help`, `metavar`."""

    isolation: str = field(default="read_committed", metadata={
        "flag": "--txn-isolation", "metavar": "{read_committed,read_uncommitted}",
        "help": "the isolation level of the polls inside transactions; under read_uncommitted aborted reads are "
                "expected (the final read is read_committed)"})
    abort_p: float = field(default=0.1, metadata={
        "flag": "--txn-abort-p", "metavar": "P", "help": "the share of transactions aborted on purpose"})
    sub_p: float = field(default=0.0, metadata={
        "flag": "--txn-sub-p", "metavar": "P",
        "help": "the share of ops that are, as Jepsen's sub-p, an assign (a random subset of partitions) or a "
                "subscribe instead of a transaction"})
