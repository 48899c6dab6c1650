"""What report.html draws from a txn run's history, read in one pass over history.jsonl: the transactions'
completions, the nemesis lines, the rebalances, where the checker's anomalies happened, and the lines of the ops
the report links to.

A txn history is never converted to Parquet (docs/history.md), so this reads the JSON lines itself. Times are
seconds on the history's clock, as on every run plot. `rebalances` also reads a queue run's subscribe-mode
`assign` and `revoke` completions (from any table of history rows), so both workloads' rebalances are drawn
alike.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MARKED", "Rebalance", "TxnRun", "linked_ops", "read_rebalances", "read_txn_run", "rebalances"]

# The anomaly kinds the transactions plot marks, with where each is placed: at the completion of the
# transaction (or final read) that read the aborted value, or of the torn transaction itself.
MARKED = ("G1a", "aborted_read", "torn_transaction")


@dataclass(frozen=True)
class Rebalance:
    """A consumer's assignment changed at `time_s`: partitions `revoked` from process `process` and `assigned`
    to it, under `generation` (None when the line has none: a txn `rebalance` line)."""

    time_s: float
    process: Any
    assigned: tuple[int, ...] = ()
    revoked: tuple[int, ...] = ()
    generation: int | None = None


@dataclass
class TxnRun:
    """A txn run's history as the report uses it.

    `done_s`, `type` and `latency_ms`: one entry per transaction, at its completion (a transaction the run cut
    off is `info` at the history's last time, latency NaN); `events`: the nemesis lines, shaped as
    `checkers.timeline.fault_windows` takes them; `marks`: kind of MARKED -> the times placed; `ops`: invocation
    index -> {"process", "type", "value" (the completed micro-ops), "error", "lines": [(line number, text)]},
    for the ops asked for only.
    """

    done_s: np.ndarray
    type: np.ndarray
    latency_ms: np.ndarray
    events: list[dict[str, Any]] = field(default_factory=list)
    rebalances: list[Rebalance] = field(default_factory=list)
    marks: dict[str, list[float]] = field(default_factory=dict)
    ops: dict[int, dict[str, Any]] = field(default_factory=dict)


def timed_ops(history: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Every op of a history that parses and has a numeric time, with its line number (from 1) and its line."""
    with open(history, encoding="utf-8") as lines:
        for n, line in enumerate(lines, 1):
            try:
                op = json.loads(line)
            except ValueError:
                continue
            if isinstance(op, dict) and isinstance(op.get("time"), (int, float)):
                yield n, line, op


def nemesis_event(op: dict[str, Any], n: int, epoch: int) -> dict[str, Any]:
    """A nemesis line (line number `n`) as the plots' fault windows read it; `epoch` counts the nemesis lines
    before it."""
    return {"index": op.get("index", n - 1), "time": op["time"], "type": op.get("type"), "f": op.get("f"),
            "nemesis": op.get("nemesis"), "epoch": epoch,
            "detail": {k: v for k, v in op.items() if k not in ("index", "time", "type", "f", "process", "nemesis")}}


def linked_ops(results: Mapping[str, Any] | None) -> set[int]:
    """The invocation indexes report.html links to: every op of an example cycle and the torn transactions."""
    r = results or {}
    ops = {o for c in (r.get("cycles") or {}).values() if isinstance(c, Mapping) for o in c.get("ops") or []}
    ops |= set((r.get("examples") or {}).get("torn_transaction") or [])
    return {o for o in ops if isinstance(o, int)}


def rebalances(rows: Iterable[Mapping[str, Any]], subscribe: bool = True) -> list[Rebalance]:
    """The rebalances among history rows (dicts with time in ns): every txn `rebalance` line and, when
    `subscribe` (a queue run in --consumer-mode subscribe, whose assign ops are rebalance callbacks), every
    ok `assign` and `revoke` completion; sorted by time."""
    out = []
    for r in rows:
        f, t = r.get("f"), r.get("time")
        if r.get("type") != "ok" or not isinstance(t, (int, float)):
            continue
        gen = r.get("generation")
        gen = gen if isinstance(gen, int) else None
        if f == "rebalance":
            out.append(Rebalance(t / 1e9, r.get("process"), _parts(r.get("assigned")), _parts(r.get("revoked")), gen))
        elif subscribe and f in ("assign", "revoke"):
            parts = _parts(r.get("partitions"))
            out.append(Rebalance(t / 1e9, r.get("process"), parts if f == "assign" else (),
                                 parts if f == "revoke" else (), gen))
    return sorted(out, key=lambda b: b.time_s)


def read_rebalances(history: Path) -> list[Rebalance]:
    """`rebalances` of a subscribe-mode queue run's history.jsonl, reading only the lines that can be one (the
    Parquet form has no `partitions` column)."""
    rows = []
    with open(history, encoding="utf-8") as lines:
        for line in lines:
            if '"assign"' in line or '"revoke"' in line or '"rebalance"' in line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
    return rebalances([r for r in rows if isinstance(r, dict)], subscribe=True)


def _parts(x: Any) -> tuple[int, ...]:
    return tuple(p for p in x if isinstance(p, int)) if isinstance(x, list) else ()


def read_txn_run(history: Path, results: Mapping[str, Any] | None = None,
                 isolation: str = "read_committed") -> TxnRun:
    """One pass over a txn history.jsonl (lines that are not JSON objects are skipped: the checker reports
    them); what to mark and which ops to keep come from `results` (results.json: its examples and cycles).

    Each example value of G1a is marked where a read_committed reader (the polls under `isolation`
    read_committed, the final read always) first returned it, of aborted_read where a poll first did; a torn
    transaction where it completed. An example list holds at most 10 keys, so the marks are the checker's
    examples, not every anomaly: the plot's legend gives both numbers.
    """
    r = results or {}
    examples = r.get("examples") or {}
    values = {k: set(examples.get(k) or []) for k in ("G1a", "aborted_read")}
    polled = dict(values) if isolation == "read_committed" else {"aborted_read": values["aborted_read"]}
    drained = {"G1a": values["G1a"]}  # the final read is read_committed
    torn, wanted = set(examples.get("torn_transaction") or []), linked_ops(r)
    done, types, latency, moves = [], [], [], []
    events: list[dict[str, Any]] = []
    marks: dict[str, list[float]] = {k: [] for k in MARKED}
    opened: dict[Any, tuple[int, int, list[tuple[int, str]]]] = {}  # process -> (index, time, lines kept)
    ops: dict[int, dict[str, Any]] = {}
    last = 0
    for n, line, op in timed_ops(history):
        t, f, kind, proc = op["time"], op.get("f"), op.get("type"), op.get("process")
        last = max(last, t)
        if proc == "nemesis":
            events.append(nemesis_event(op, n, epoch=len(events)))
        elif f == "rebalance":
            moves.append(op)
        elif f == "txn" and kind == "invoke":
            index = op.get("index", n - 1)
            opened[proc] = (index, t, [(n, line.rstrip("\n"))] if index in wanted else [])
        elif f == "txn" and proc in opened:
            index, start, kept = opened.pop(proc)
            done.append(t / 1e9)
            types.append(kind)
            latency.append((t - start) / 1e6)
            if index in torn:
                marks["torn_transaction"].append(t / 1e9)
            _mark_reads(op.get("value"), polled, marks, t)
            if index in wanted:
                ops[index] = {"process": proc, "type": kind, "value": op.get("value"), "error": op.get("error"),
                              "lines": kept + [(n, line.rstrip("\n"))]}
        elif f == "drain" and kind == "ok":
            _mark_reads([["poll", op.get("records")]], drained, marks, t)
    for proc, (index, _start, kept) in opened.items():  # cut off by the end of the run: info
        done.append(last / 1e9)
        types.append("info")
        latency.append(float("nan"))
        if index in wanted:
            ops[index] = {"process": proc, "type": "info", "value": None, "error": "cut off by the end of the run",
                          "lines": kept}
    return TxnRun(np.asarray(done, float), np.asarray(types, object), np.asarray(latency, float), events,
                  rebalances(moves), marks, ops)


def _mark_reads(mops: Any, values: dict[str, set], marks: dict[str, list[float]], t: int) -> None:
    """Mark time `t` for each example value of `values` (kind -> values not yet marked) the polls in micro-ops
    `mops` returned, and take it out: a value is marked where it was first read."""
    if not any(values.values()) or not isinstance(mops, list):
        return
    read = {rec[2] for m in mops if isinstance(m, list) and len(m) == 2 and m[0] == "poll"
            and isinstance(m[1], list) for rec in m[1] if isinstance(rec, list) and len(rec) == 3}
    for kind, vs in values.items():
        for _ in read & vs:
            marks[kind].append(t / 1e9)
        vs -= read
