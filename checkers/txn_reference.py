"""The reference checker of the txn workload: the executable definition of its anomalies (docs/checkers.md).

Single process, no Spark: one pass reads the history (validating it; a
malformed line is a CheckInputError naming it), then plain sets and dicts find
every anomaly. The names are Jepsen's (jepsen/tests/kafka.clj):

- `lost_write`: a committed value, never read, at an offset below the highest
  offset any read returned in its partition;
- `unseen`: a committed value never read, not a lost_write;
- `G1a`: a value of a transaction that failed (aborted), read by a
  read_committed reader (a poll under `--txn-isolation read_committed`, or the
  final read, which is always read_committed);
- `aborted_read`: the same read by a read_uncommitted poll only: expected,
  never a failure;
- `torn_transaction`: a transaction that completed ok or info, some of whose
  values a read_committed reader saw and some not, though the final read of
  their partition completed;
- `duplicate`: a value read at two or more distinct (partition, offset).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from checkers.parquet import CheckInputError

COUNTS = ("lost_write", "unseen", "G1a", "aborted_read", "torn_transaction", "duplicate")
# Kinds that make the checker's `valid` false; `unseen` only where the final read of its partition completed.
INVALID = ("lost_write", "G1a", "torn_transaction", "duplicate")
MAX_EXAMPLES = 10
COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"


@dataclass
class Txn:
    """One transaction op: its invocation's line, process, outcome and completed micro-ops."""

    index: int
    process: int
    type: str = "info"  # an invocation the run cut off counts as info: it may have committed
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


def isolation_of(test: dict[str, Any] | None) -> str:
    """The polls' isolation level recorded in test.json (read_committed when absent)."""
    return str(((test or {}).get("workload") or {}).get("txn_isolation") or COMMITTED)


def check_txn_file(history: Path, test: dict[str, Any] | None) -> dict[str, Any]:
    """`check_txn` of a history.jsonl; CheckInputError (one line, naming the line) if it is malformed."""
    return check_txn(parse(Path(history)), test)


def check_txn(parsed: Parsed, test: dict[str, Any] | None, *,
              max_examples: int | None = MAX_EXAMPLES) -> dict[str, Any]:
    """Every anomaly of COUNTS in a parsed txn history, judged with test.json's isolation level.

    Returns `{"valid", "counts", "examples", "unseen_undecided", "isolation", "stats"}`: `counts` has every
    kind of COUNTS (keys: values; for torn_transaction the line index of the transaction's invocation);
    `examples` the smallest keys of each non-zero kind; `unseen_undecided` the unseen values whose
    partition's final read did not complete (they may be there). `valid` is False for any kind of INVALID
    or an unseen value in a completed partition, else "unknown" if some unseen value is undecided, else True.
    """
    isolation = isolation_of(test)
    polls_committed = isolation == COMMITTED
    where: dict[int, set[tuple[int, int]]] = defaultdict(set)  # value -> (p, o) read
    seen_committed: set[int] = set()  # values a read_committed reader returned
    seen_uncommitted: set[int] = set()
    top: dict[int, int] = {}  # partition -> highest offset read
    for t in parsed.txns:
        for records in t.polls:
            _reads(records, where, top, seen_committed if polls_committed else seen_uncommitted)
    _reads(parsed.drains, where, top, seen_committed)
    committed = [(v, p, o) for t in parsed.txns if t.type == "ok" for v, p, o in t.sends]
    aborted = {v for t in parsed.txns if t.type == "fail" for v, _, _ in t.sends}
    found: dict[str, list[Any]] = {k: [] for k in COUNTS}
    for v, p, o in committed:
        if v not in where:
            lost = o is not None and p in top and o < top[p]
            found["lost_write" if lost else "unseen"].append(v)
    undecided = [v for v, p, _ in committed if v in set(found["unseen"]) and p not in parsed.complete]
    found["G1a"] = sorted(aborted & seen_committed)
    found["aborted_read"] = sorted((aborted & seen_uncommitted) - seen_committed)
    for t in parsed.txns:
        if t.type in ("ok", "info"):
            shown = [v in seen_committed for v, _, _ in t.sends]
            hidden = [v for v, p, _ in t.sends if v not in seen_committed and p in parsed.complete]
            if any(shown) and hidden:
                found["torn_transaction"].append(t.index)
    found["duplicate"] = [v for v, at in where.items() if len(at) > 1]
    counts = {k: len(set(found[k])) for k in COUNTS}
    failed = any(counts[k] for k in INVALID) or counts["unseen"] > len(set(undecided))
    valid: bool | str = False if failed else "unknown" if undecided else True
    return {"valid": valid, "counts": counts,
            "examples": {k: sorted(set(found[k]))[:max_examples] for k in COUNTS if found[k]},
            "unseen_undecided": len(set(undecided)), "isolation": isolation,
            "stats": _stats(parsed, committed, where, test)}


def _reads(records: Iterable[list[int]], where: dict[int, set[tuple[int, int]]], top: dict[int, int],
           seen: set[int]) -> None:
    for p, o, v in records:
        where[v].add((p, o))
        seen.add(v)
        top[p] = max(top.get(p, -1), o)


def _stats(parsed: Parsed, committed: list, where: dict, test: dict[str, Any] | None) -> dict[str, Any]:
    by_type = defaultdict(int)
    for t in parsed.txns:
        by_type[t.type] += 1
    parts = set(parsed.partitions)
    n = ((test or {}).get("topic") or {}).get("partitions")
    if isinstance(n, int):
        parts |= set(range(n))
    return {"txn_invoke": len(parsed.txns), "txn_ok": by_type["ok"], "txn_fail": by_type["fail"],
            "txn_info": by_type["info"], "committed_sends": len(committed), "values_read": len(where),
            "drain_ok": parsed.drain_ok, "nemesis_ops": parsed.nemesis_ops,
            "partitions_complete": sorted(parsed.complete), "partitions_incomplete": sorted(parts - parsed.complete)}


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
                t.type = type_
                _complete(t, mops, op.get("value"), bad)
                out.partitions |= {p for _, p, _ in t.sends}
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


class TxnChecker:
    """The txn workload's checker (core.protocols.Checker): `check_txn` on the history, in this process."""

    def __init__(self, master: str | None = None):
        self.master = master  # unused: this checker needs no Spark

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """`check_txn_file(history_path, test)`."""
        return check_txn_file(history_path, test)

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` for each (test, history) pair, in order."""
        return [self.check(test, path) for test, path in runs]
