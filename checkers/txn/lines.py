"""The lines of a txn workload history, parsed and validated one at a time (docs/history.md, "The txn workload").

Pure Python (json and dataclasses only), so the Spark txn checker's tasks can carry it to their workers by value.
`LineParser` reads lines in history order; with `partial=True` it reads one stretch of the history (a Spark
task's share) whose start is unknown: a completion of a process seen nowhere before in the stretch is kept as a
`Head` for the driver to pair with an invocation of an earlier stretch. A line the checker cannot use raises
BadLine; `history.parse` turns it into a CheckInputError naming the file and line.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

NULL = -(1 << 63)  # int64's least: the Spark checker's columns' "none", as where a send has no offset
TYPES = {"ok": 1, "fail": 2, "info": 3}  # a completed transaction's outcome, as those columns code it


class BadLine(ValueError):
    """Line `n` of the history cannot be used, because `why`."""

    def __init__(self, n: int, why: str):
        super().__init__(f"{n}: {why}")
        self.n, self.why = n, why


@dataclass
class Txn:
    """One transaction op: its invocation's line, process, outcome and completed micro-ops."""

    index: int
    process: int
    type: str = "info"  # an invocation the run cut off counts as info: it may have committed
    done: int | None = None  # the completion's line index; None when the run cut the transaction off
    sends: list[tuple[int, int, int | None]] = field(default_factory=list)  # (value, partition, offset or None)
    polls: list[list[list[int]]] = field(default_factory=list)  # each poll's [partition, offset, value] records
    keys: list[int] | None = None  # a cut-off transaction's send keys, in order: its partitions follow from them


@dataclass
class Parsed:
    """What the checker needs from a history: transactions, reads by isolation, completed final reads."""

    txns: list[Txn] = field(default_factory=list)
    drains: list[list[int]] = field(default_factory=list)  # records of ok drains (read_committed)
    complete: set[int] = field(default_factory=set)
    partitions: set[int] = field(default_factory=set)
    drain_ok: int = 0
    nemesis_ops: int = 0
    # (line index, process, partitions) of each rebalance line: partitions revoked from or assigned to the process
    rebalances: list[tuple[int, int, frozenset[int]]] = field(default_factory=list)


# --- reading the history -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Head:
    """A completion at line `n` (index `index`) whose invocation lies before the stretch a partial parse read."""

    n: int
    index: int
    process: int
    type: str
    value: Any


class LineParser:
    """Feed `(line number, op)` pairs in history order, then `finish()`: the Parsed history.

    Partial (one stretch of a history): `heads` lists the completions paired by no invocation of the stretch
    and made by a process with no earlier txn line in it, `first[process]` says whether a process's first txn
    line in the stretch was an invocation ("invoke") or such a completion ("complete"), and `finish` leaves the
    invocations still open in `tails` (process -> (Txn, invoked micro-ops)) instead of cutting them off.
    """

    def __init__(self, partial: bool = False):
        self.out, self.partial = Parsed(), partial
        self.open: dict[int, tuple[Txn, list[list[Any]]]] = {}
        self.heads: list[Head] = []
        self.first: dict[int, str] = {}
        self.tails: dict[int, tuple[Txn, list[list[Any]]]] = {}

    def feed(self, n: int, op: Any) -> None:
        """Take line `n`; BadLine if it is not an operation the txn checkers can use."""
        out = self.out

        def bad(why: str) -> BadLine:
            return BadLine(n, why)
        if not isinstance(op, dict) or "process" not in op or "f" not in op:
            raise bad("not an operation (a JSON object with process and f)")
        if op.get("type") not in ("invoke", "ok", "fail", "info"):
            raise bad(f"unknown type {op.get('type')!r}")
        if op["process"] == "nemesis":
            out.nemesis_ops += 1
            return
        proc, f, type_ = op["process"], op["f"], op["type"]
        if not _int(proc):
            raise bad(f"process must be an integer or \"nemesis\", got {proc!r}")
        index = op.get("index", n - 1)
        if f == "txn":
            first = self.first.setdefault(proc, "invoke" if type_ == "invoke" else "complete")
            if type_ == "invoke":
                mops = op.get("value")
                if not isinstance(mops, list) or not all(_micro_op(m) for m in mops):
                    raise bad("txn invoke value must be a list of [\"send\", key, value] and [\"poll\"]")
                t = Txn(index=index, process=proc)
                out.txns.append(t)
                self.open[proc] = (t, mops)
            elif proc in self.open:
                t, mops = self.open.pop(proc)
                t.type, t.done = type_, index
                complete(t, mops, op.get("value"), bad)
                out.partitions |= {p for _, p, _ in t.sends}
            elif self.partial and first == "complete" and not any(h.process == proc for h in self.heads):
                self.heads.append(Head(n, index, proc, type_, op.get("value")))
            else:
                raise bad(f"{type_} txn of process {proc} completes no invocation")
        elif f == "rebalance":
            moved = [op.get("revoked", []), op.get("assigned", [])]
            if not all(isinstance(m, list) and all(map(_int, m)) for m in moved):
                raise bad("rebalance needs revoked and assigned: lists of partitions")
            out.rebalances.append((index, proc, frozenset(moved[0]) | frozenset(moved[1])))
        elif f == "drain" and type_ == "ok":
            records = op.get("records")
            if not _records(records) or not isinstance(op.get("partition"), int):
                raise bad("ok drain needs a partition and records of [partition, offset, value] integers")
            out.drains.extend(records)
            out.drain_ok += 1
            out.partitions.add(op["partition"])
            if op.get("complete") is True:
                out.complete.add(op["partition"])

    def finish(self) -> Parsed:
        """The parsed history; the invocations left open were cut off by the end of the run (or, partial, are
        left in `tails`)."""
        if self.partial:
            self.tails = dict(self.open)
        else:
            for t, mops in self.open.values():
                cut_off(t, mops)
        self.open = {}
        return self.out


def cut_off(t: Txn, mops: list[list[Any]], partitions: int | None = None) -> None:
    """A transaction the end of the run cut off: outcome unknown (info), its sends' offsets too. Each send's
    partition is its key mod `partitions`, the workload's mapping (docs/history.md), or -1 (in no partition)
    when the partition count is unknown; `t.keys` keeps the keys, for `place_cut_off`."""
    sends = [m for m in mops if m[0] == "send"]
    t.keys = [m[1] for m in sends]
    t.sends = [(m[2], m[1] % partitions if partitions else -1, None) for m in sends]


def partition_count(test: dict[str, Any] | None) -> int | None:
    """The topic's partition count that test.json records (`topic.partitions`), or None where it records none."""
    n = ((test or {}).get("topic") or {}).get("partitions")
    return n if _int(n) and n > 0 else None


def place_cut_off(parsed: Parsed, partitions: int | None) -> Parsed:
    """`parsed` with each cut-off transaction's sends in partition key mod `partitions` (as `cut_off` places
    them); `parsed` itself, unchanged, when `partitions` is None. The transactions are copied, not changed."""
    if not partitions:
        return parsed
    txns = [replace(t, sends=[(v, k % partitions, o) for (v, _, o), k in zip(t.sends, t.keys)])
            if t.keys is not None else t for t in parsed.txns]
    return replace(parsed, txns=txns)


def _int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _micro_op(m: Any) -> bool:
    return isinstance(m, list) and (m == ["poll"] or (len(m) == 3 and m[0] == "send" and _int(m[1]) and _int(m[2])))


def _records(records: Any) -> TypeGuard[list[list[int]]]:
    # The hot loop of parsing (a record per read): exact type tests, no calls. JSON gives int, never a subclass
    # but bool, which is what they keep out.
    if type(records) is not list:
        return False
    for r in records:
        if type(r) is not list or len(r) != 3 or type(r[0]) is not int or type(r[1]) is not int \
                or type(r[2]) is not int:
            return False
    return True


def complete(t: Txn, mops: list[list[Any]], done: Any, bad: Callable[[str], Exception]) -> None:
    """Fill `t`'s sends and polls from its completion's value `done`; raise `bad(why)` unless it mirrors `mops`."""
    if not isinstance(done, list) or len(done) != len(mops):
        raise bad("txn completion value must list one completed micro-op per invoked one")
    for m, d in zip(mops, done):
        if m[0] == "send":
            if not (isinstance(d, list) and len(d) == 5 and d[:3] == m and _int(d[3])
                    and (d[4] is None or _int(d[4]))):
                raise bad(f"completed send must be [\"send\", key, value, partition, offset or null], got {d!r}")
            t.sends.append((d[2], d[3], d[4]))
        else:
            if not (isinstance(d, list) and len(d) == 2 and d[0] == "poll" and (d[1] is None or _records(d[1]))):
                raise bad(f"completed poll must be [\"poll\", records or null], got {d!r}")
            if d[1]:
                t.polls.append(d[1])


