"""The history's side of a txn run's anomalous transactions: the ops, and which anomalies name them.

`load_txn_ops(run)` reads history.jsonl once into `TxnOp`s (an invocation of
`f` `txn` and its completion, docs/history.md), each with its sends (key,
value, partition, offset), its outcome and error, and the completion's line
as written. `anomalies(run)` reads results.json's txn checker examples
(docs/checkers.md: torn_transaction keys are invocation line indices, G1a,
lost_write and aborted_read keys are values) and `anomalous_ops` puts each on
its op: an op is explained once, with every anomaly that names it.
`client_log` picks the client's own lines about a process out of harness.log.
Times are history seconds.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kchaos.core.history import HistoryError
from kchaos.evidence import EvidenceError

__all__ = ["KINDS", "Send", "TxnOp", "anomalies", "anomalous_ops", "client_log", "load_txn_ops"]

_PREFIX = re.compile(r"^[A-Z]+ \S+ \[[^\]]*\] ")  # harness.log's "LEVEL logger [thread] " before the text
# The anomalies explained, keyed by value except torn_transaction (by op); in the order they are said.
KINDS = ("torn_transaction", "G1a", "lost_write", "aborted_read")


@dataclass(frozen=True)
class Send:
    """A send micro-op as its completion recorded it: `offset` None when no delivery report gave one."""

    key: int
    value: int
    partition: int | None
    offset: int | None


@dataclass
class TxnOp:
    """One transaction of the history: invocation `index` (the line index torn_transaction names), process,
    times, outcome (`ok`, `fail`, `info`; `info` too when the run cut it off), error, sends in order, the
    number of polls, and the completion's line as written (the invocation's when there is none)."""

    index: int
    process: int
    invoke_s: float
    complete_s: float | None
    outcome: str
    error: str | None
    sends: tuple[Send, ...]
    polls: int
    line: str
    anomalies: dict[str, list[int]] = field(default_factory=dict)  # kind -> the values it names ([] for torn)

    def values(self) -> list[int]:
        """The values the transaction sent, in order."""
        return [s.value for s in self.sends]


def _sends(value: Any) -> tuple[tuple[Send, ...], int]:
    sends, polls = [], 0
    for mop in value if isinstance(value, list) else []:
        if not isinstance(mop, list) or not mop:
            continue
        if mop[0] == "send" and len(mop) >= 3:
            p = mop[3] if len(mop) > 3 and isinstance(mop[3], int) else None
            o = mop[4] if len(mop) > 4 and isinstance(mop[4], int) else None
            sends.append(Send(mop[1], mop[2], p, o))
        elif mop[0] == "poll":
            polls += 1
    return tuple(sends), polls


def load_txn_ops(run: Path) -> list[TxnOp]:
    """Every `txn` op of the run's history, in invocation order (raises HistoryError on a line that is not JSON)."""
    path = Path(run) / "history.jsonl"
    open_: dict[Any, TxnOp] = {}
    ops: list[TxnOp] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if '"txn"' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                if not line.endswith("\n"):
                    break  # a killed run's half-written last line
                raise HistoryError(f"{path}:{n + 1}: not JSON ({e})") from None
            if rec.get("f") != "txn":
                continue
            proc, t = rec.get("process"), round(rec.get("time", 0) / 1e9, 3)
            if rec.get("type") == "invoke":
                sends, polls = _sends(rec.get("value"))
                op = TxnOp(int(rec.get("index", n)), int(proc), t, None, "info", "cut off by the end of the run",
                           sends, polls, line.rstrip("\n"))
                open_[proc] = op
                ops.append(op)
            elif proc in open_:
                op = open_.pop(proc)
                sends, polls = _sends(rec.get("value"))
                op.complete_s, op.outcome, op.error = t, str(rec.get("type")), rec.get("error")
                op.sends, op.polls, op.line = sends or op.sends, polls, line.rstrip("\n")
    return ops


def anomalies(run: Path) -> tuple[dict[str, list[int]], dict[str, int], list[str]]:
    """(kind -> listed keys, kind -> count, notes) of the txn check in results.json, for the KINDS.

    Raises EvidenceError when results.json is missing or not JSON (check the run first)."""
    try:
        res = json.loads((Path(run) / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EvidenceError(f"{run}: no readable results.json ({e}); check the run first: kchaos check RUN") from None
    txn = (res.get("checkers") or {}).get("txn") or res
    examples, counts = txn.get("examples") or {}, txn.get("counts") or {}
    listed = {k: [int(x) for x in examples.get(k) or [] if isinstance(x, int)] for k in KINDS}
    count = {k: int(counts.get(k) or 0) for k in KINDS}
    notes = [f"results.json lists {len(listed[k])} of {count[k]} {k}; only those are explained"
             for k in KINDS if len(listed[k]) < count[k]]
    return listed, count, notes


def anomalous_ops(ops: list[TxnOp], listed: dict[str, list[int]]) -> tuple[list[TxnOp], list[str]]:
    """The ops the listed anomalies name (each once, with `anomalies` filled), in invocation order, and notes
    on keys no op holds."""
    by_index = {op.index: op for op in ops}
    by_value = {s.value: op for op in ops for s in op.sends}
    named: dict[int, TxnOp] = {}
    notes = []
    for kind in KINDS:
        for key in listed.get(kind) or []:
            op = by_index.get(key) if kind == "torn_transaction" else by_value.get(key)
            if op is None:
                notes.append(f"{kind} {key}: no transaction of the history " +
                             ("was invoked on that line" if kind == "torn_transaction" else "sent that value"))
                continue
            named.setdefault(op.index, op).anomalies.setdefault(kind, [])
            if kind != "torn_transaction":
                op.anomalies[kind].append(key)
    return [named[i] for i in sorted(named)], notes


def client_log(run: Path, process: int, tid: str | None, start_unix_ms: float | None, t0_ms: float | None,
               t1_ms: float | None, limit: int = 5) -> list[dict[str, Any]]:
    """The harness.log lines the process's client wrote between two wall-clock times (unix ms): lines naming
    `process N:` or the transactional id, as {"time_s", "text"} (text after the logger's prefix), at most
    `limit`. harness.log stamps are the harness's clock in UTC, as the run directory's name is."""
    path = Path(run) / "harness.log"
    if t0_ms is None or t1_ms is None or start_unix_ms is None or not path.is_file():
        return []
    marks = [f"process {process}:"] + ([f"transactionalId={tid}"] if tid else [])
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not any(m in line for m in marks):
                continue
            try:
                t = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            except ValueError:
                continue
            ms = t.timestamp() * 1000
            if t0_ms <= ms <= t1_ms:
                text = _PREFIX.sub("", line[24:].rstrip())
                out.append({"time_s": round((ms - start_unix_ms) / 1000, 3), "text": text[:400]})
                if len(out) >= limit:
                    break
    return out
