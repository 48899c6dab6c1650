"""The txn reference checker's order anomalies: what one partition's log says, and whether each process walked it
in order (docs/checkers.md, "The txn workload"). Names after Jepsen's Kafka checker (jepsen/tests/kafka.clj).

The *version order* of a partition is every (offset, value) the history shows to be in its log: every record
any poll (of a transaction of any outcome) or ok drain returned, and every send with an offset of a transaction
that committed or may have (ok, or info with some value that any read returned). Sends of failed transactions
are left out: their records were aborted, and a read_committed consumer passes over their offsets. Its *known
offsets* are the offsets holding at least one such value.

- `inconsistent_offsets`, key [partition, offset]: a known offset holding two or more different values;
- `poll_skip`, key [process, partition, a, b]: one process's consecutive reads of a partition in two different
  transactions, at offsets a then b > a, with a known offset strictly between them;
- `nonmonotonic_poll`, same key: the same with b <= a;
- `int_poll_skip`, `int_nonmonotonic_poll`, key [transaction, partition, a, b] (the transaction's invocation
  index): the same two within one transaction;
- `nonmonotonic_send`, key [process, partition, a, b]: an ok or info transaction whose first send to a partition
  with an offset is at b <= a, the offset of the last send there with an offset of the process's latest earlier
  ok or info transaction with such a send;
- `int_send_skip`, `int_nonmonotonic_send`, key [transaction, partition, a, b]: consecutive sends with an offset
  of one ok or info transaction to a partition, at a then b > a with a known offset between, or at b <= a.
  The send kinds pass over sends without an offset, and leave failed transactions out;
- `precommitted_read`, key value: a transaction polled a value it sent itself, before it committed.

A process's reads are one stream per partition: its consumer is never re-created, so the records of every poll
of every transaction it ran (ok, fail or info) come in order. A rebalance line of the process naming the
partition (docs/history.md) between the invocation of the transaction holding the earlier read and the
completion of the one holding the later read breaks the stream there: the jump is not checked.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from typing import Any

from kchaos.checkers.txn.history import Parsed, Txn

ORDER_COUNTS = ("precommitted_read", "inconsistent_offsets", "poll_skip", "nonmonotonic_poll", "int_poll_skip",
                "int_nonmonotonic_poll", "nonmonotonic_send", "int_send_skip", "int_nonmonotonic_send")
END = 1 << 62  # the completion index of a transaction the run cut off: after every line


def committed_may(parsed: Parsed, read: set[int]) -> list[Txn]:
    """The transactions whose sends enter the version order: ok, or info with some value that a read returned."""
    return [t for t in parsed.txns if t.type == "ok" or (t.type == "info" and any(v in read for v, _, _ in t.sends))]


def version_order(parsed: Parsed) -> dict[int, dict[int, set[int]]]:
    """partition -> offset -> the values the history shows at that offset (the module docstring's sources)."""
    log: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    read: set[int] = set()
    for records in [r for t in parsed.txns for r in t.polls] + [parsed.drains]:
        for p, o, v in records:
            log[p][o].add(v)
            read.add(v)
    for t in committed_may(parsed, read):
        for v, p, off in t.sends:
            if off is not None:
                log[p][off].add(v)
    return log


def order_anomalies(parsed: Parsed, log: dict[int, dict[int, set[int]]]) -> dict[str, list[Any]]:
    """Every key of each kind of ORDER_COUNTS, possibly repeated (the caller counts distinct keys)."""
    found: dict[str, list[Any]] = {k: [] for k in ORDER_COUNTS}
    known = {p: sorted(offsets) for p, offsets in log.items()}
    found["inconsistent_offsets"] = [(p, o) for p, at in log.items() for o, vs in at.items() if len(vs) > 1]

    def between(p: int, a: int, b: int) -> bool:  # a known offset of p strictly between a < b
        ks = known.get(p, [])
        return bisect_left(ks, b) > bisect_right(ks, a)

    moves: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))  # process -> p -> indexes
    for index, proc, parts in sorted(parsed.rebalances):
        for p in parts:
            moves[proc][p].append(index)

    def rebalanced(proc: int, p: int, after: int, before: int) -> bool:
        at = moves.get(proc, {}).get(p, [])
        return bisect_left(at, before) > bisect_right(at, after)

    last_read: dict[tuple[int, int], tuple[Txn, int]] = {}
    last_send: dict[tuple[int, int], int] = {}
    for t in sorted(parsed.txns, key=lambda t: t.index):
        own = {v for v, _, _ in t.sends}
        for records in t.polls:
            for p, o, v in records:
                if v in own:
                    found["precommitted_read"].append(v)
                prev = last_read.get((t.process, p))
                last_read[(t.process, p)] = (t, o)
                if prev is None or rebalanced(t.process, p, prev[0].index, END if t.done is None else t.done):
                    continue
                a, inner = prev[1], prev[0] is t
                key = (t.index if inner else t.process, p, a, o)
                prefix = "int_" if inner else ""
                if o <= a:
                    found[prefix + "nonmonotonic_poll"].append(key)
                elif between(p, a, o):
                    found[prefix + "poll_skip"].append(key)
        if t.type not in ("ok", "info"):
            continue
        mine: dict[int, int] = {}  # p -> offset of this transaction's last send there
        for _, p, off in t.sends:
            if off is None:
                continue
            if p in mine:
                a = mine[p]
                if off <= a:
                    found["int_nonmonotonic_send"].append((t.index, p, a, off))
                elif between(p, a, off):
                    found["int_send_skip"].append((t.index, p, a, off))
            elif (t.process, p) in last_send and off <= last_send[(t.process, p)]:
                found["nonmonotonic_send"].append((t.process, p, last_send[(t.process, p)], off))
            mine[p] = off
        for p, o in mine.items():
            last_send[(t.process, p)] = o
    return found
