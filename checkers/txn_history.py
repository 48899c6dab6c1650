"""A txn workload history read and validated (docs/history.md, "The txn workload"): transactions, final reads,
rebalances. The txn checkers (checkers/txn_reference.py, checkers/txn_spark.py) start from here."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from checkers.parquet import CheckInputError


@dataclass
class Txn:
    """One transaction op: its invocation's line, process, outcome and completed micro-ops."""

    index: int
    process: int
    type: str = "info"  # an invocation the run cut off counts as info: it may have committed
    done: int | None = None  # the completion's line index; None when the run cut the transaction off
    sends: list[tuple[int, int, int | None]] = field(default_factory=list)  # (value, partition, offset or None)
    polls: list[list[list[int]]] = field(default_factory=list)  # each poll's [partition, offset, value] records


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
def parse(history: Path) -> Parsed:
    """Read a txn history.jsonl; CheckInputError `path:line: why` for the first line the checker cannot use.
    A truncated last line without a newline (a killed run's tail) is skipped."""
    text = history.read_text(encoding="utf-8")
    lines = text.split("\n")
    return parse_ops(_load(history, lines, text.endswith("\n")), where=str(history))


def _load(history: Path, lines: list[str], ended: bool) -> Iterable[tuple[int, Any]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines) and not ended:
                return
            raise CheckInputError(f"{history}:{n}: not JSON ({e.msg})") from None


def parse_ops(ops: Iterable[tuple[int, Any]], where: str = "history") -> Parsed:
    """Parse `(line number, op)` pairs in history order (see docs/history.md, "The txn workload")."""
    out = Parsed()
    open_txn: dict[int, tuple[Txn, list[list[Any]]]] = {}
    for n, op in ops:
        def bad(why: str) -> CheckInputError:
            return CheckInputError(f"{where}:{n}: {why}")
        if not isinstance(op, dict) or "process" not in op or "f" not in op:
            raise bad("not an operation (a JSON object with process and f)")
        if op.get("type") not in ("invoke", "ok", "fail", "info"):
            raise bad(f"unknown type {op.get('type')!r}")
        if op["process"] == "nemesis":
            out.nemesis_ops += 1
            continue
        proc, f, type_ = op["process"], op["f"], op["type"]
        if f == "txn":
            if type_ == "invoke":
                mops = op.get("value")
                if not isinstance(mops, list) or not all(_micro_op(m) for m in mops):
                    raise bad("txn invoke value must be a list of [\"send\", key, value] and [\"poll\"]")
                t = Txn(index=op.get("index", n - 1), process=proc)
                out.txns.append(t)
                open_txn[proc] = (t, mops)
            else:
                if proc not in open_txn:
                    raise bad(f"{type_} txn of process {proc} completes no invocation")
                t, mops = open_txn.pop(proc)
                t.type, t.done = type_, op.get("index", n - 1)
                _complete(t, mops, op.get("value"), bad)
                out.partitions |= {p for _, p, _ in t.sends}
        elif f == "rebalance":
            moved = [op.get("revoked", []), op.get("assigned", [])]
            if not all(isinstance(m, list) and all(map(_int, m)) for m in moved):
                raise bad("rebalance needs revoked and assigned: lists of partitions")
            out.rebalances.append((op.get("index", n - 1), proc, frozenset(moved[0]) | frozenset(moved[1])))
        elif f == "drain" and type_ == "ok":
            records = op.get("records")
            if not _records(records) or not isinstance(op.get("partition"), int):
                raise bad("ok drain needs a partition and records of [partition, offset, value] integers")
            out.drains.extend(records)
            out.drain_ok += 1
            out.partitions.add(op["partition"])
            if op.get("complete") is True:
                out.complete.add(op["partition"])
    for t, mops in open_txn.values():  # cut off by the end of the run: outcome unknown, no offsets known
        t.sends = [(m[2], -1, None) for m in mops if m[0] == "send"]
    return out


def _int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _micro_op(m: Any) -> bool:
    return isinstance(m, list) and (m == ["poll"] or (len(m) == 3 and m[0] == "send" and _int(m[1]) and _int(m[2])))


def _records(records: Any) -> bool:
    return isinstance(records, list) and all(isinstance(r, list) and len(r) == 3 and all(map(_int, r))
                                             for r in records)


def _complete(t: Txn, mops: list[list[Any]], done: Any, bad) -> None:  # noqa: ANN001
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


