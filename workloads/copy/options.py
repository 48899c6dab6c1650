"""The copy workload's own options: test.json's `workload.options` for `--workload copy`."""
from __future__ import annotations

from dataclasses import dataclass, field

MAX_TXN_SIZE = 10000  # --txn-size: records one copy transaction holds at most
MAX_COPY_RECORDS = 10_000_000  # --copy-records: the input filled before the faults


@dataclass(frozen=True)
class CopyOptions:
    """The values filled into the input topic, whether the input is one partition whose order the output must
    keep, records per copy transaction (also a copier's poll size), and the isolation level of the final read of
    the output. Each field's metadata is its `kchaos run` option: `flag`, `help`, `metavar`."""

    records: int = field(default=0, metadata={
        "flag": "--copy-records", "metavar": "N",
        "help": "values filled into the input topic before the faults (0: --rate x --time-limit; the copiers copy "
                "at --rate, so the copy lasts the run)"})
    order: bool = field(default=False, metadata={
        "flag": "--copy-order",
        "help": "one input partition, copied to output partition 0, whose order the output must keep"})
    txn_size: int = field(default=10, metadata={
        "flag": "--txn-size", "metavar": "N", "help": "input records each copy transaction holds at most"})
    isolation: str = field(default="read_committed", metadata={
        "flag": "--txn-isolation", "metavar": "{read_committed,read_uncommitted}",
        "help": "the isolation level of the final read of the output (the copiers always read committed input)"})
