"""What report.html draws from a copy run's history, read in one pass over history.jsonl: the copy transactions'
completions, the nemesis lines, the copiers' rebalances, the input and output tallies, where each example
anomaly's value was in the input and the output, and the lines of the copy ops that carried it.

A copy history is never converted to Parquet (docs/history.md, "The copy workload"), so this reads the JSON lines
itself, as `read_txn_run` does for a txn run. Times are seconds on the history's clock. The anomaly counts
are the checker's (results.json) when the run was checked; the tallies it does not keep (values copied exactly
once, distinct values duplicated) come from the same comparison, `checkers.copy.compare`, of the lines read here.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kchaos.checkers.copy.check import COPY_COUNTS, compare
from kchaos.reports.run.txn_data import Rebalance, nemesis_event, rebalances, timed_ops

__all__ = ["MAX_LINKED", "CopyExample", "CopyRun", "CopyTally", "read_copy_run"]

MAX_LINKED = 4  # copy ops linked per example value; a value copied more often says so with a count
MAX_SHOWN = 10  # example values per kind (results.json keeps 10)


@dataclass(frozen=True)
class CopyTally:
    """A copy run's input against its output: values `filled` (acknowledged fill records), `unacked` (fill sends
    that failed: maybe in the input), `output` records read, input values `copied_once` (exactly once in the
    output), and the copy checker's four kinds: `missing`, `duplicated` (occurrences beyond the first;
    `duplicated_values` distinct values), `invented`, `reordered` (None: the order was not checked)."""

    filled: int
    unacked: int
    output: int
    copied_once: int
    missing: int
    duplicated: int
    duplicated_values: int
    invented: int
    reordered: int | None


@dataclass(frozen=True)
class CopyExample:
    """One example value of an anomaly kind: where the fill wrote it (`input`: (partition, offset), None when no
    acknowledged fill did), where the final read found it (`output`: (partition, offset) each occurrence), and
    the copy ops whose batch held it (`copies`: (invocation index, outcome), the first MAX_LINKED; `copied`: how
    many there were)."""

    kind: str
    value: int
    input: tuple[int, int] | None
    output: tuple[tuple[int, int], ...]
    copies: tuple[tuple[int, str | None], ...]  # outcome None: the completion line has no type
    copied: int


@dataclass(frozen=True)
class CopyRun:
    """A copy run's history as the report uses it.

    `done_s`, `type` and `latency_ms`: one entry per copy transaction, at its completion (one the run cut off is
    `info` at the history's last time, latency NaN); `events`: the nemesis lines, shaped as
    `checkers.timeline.fault_windows` takes them; `rebalances`: the copiers' assign and revoke callbacks;
    `tally` and `examples` (kind by kind, in COPY_COUNTS order); `ops`: invocation index -> {"process", "type",
    "lines": [(line number, text)]} of every copy op an example links to (as `op_excerpts` gives them).
    """

    done_s: np.ndarray
    type: np.ndarray
    latency_ms: np.ndarray
    tally: CopyTally
    examples: tuple[CopyExample, ...] = ()
    events: tuple[dict[str, Any], ...] = ()
    rebalances: tuple[Rebalance, ...] = ()
    ops: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)


def _examples(results: Mapping[str, Any] | None, found: Mapping[str, list[int]]) -> dict[str, list[int]]:
    """The example values per kind: results.json's (the checker's own) when the run was checked, else the
    first MAX_SHOWN this module's comparison found."""
    ex = (results or {}).get("examples") or {}
    if results:
        return {k: [v for v in ex.get(k) or [] if isinstance(v, int)][:MAX_SHOWN] for k in COPY_COUNTS}
    return {k: sorted(found.get(k) or [])[:MAX_SHOWN] for k in COPY_COUNTS}


def read_copy_run(history: Path, test: Mapping[str, Any] | None, results: Mapping[str, Any] | None = None
                  ) -> CopyRun:
    """One pass over a copy history.jsonl (lines that are not JSON objects are skipped: the checker reports them),
    then a second over the copy ops that carried an example value, to quote their lines. The output is the
    test topic (test.json's `topic.name`); `results` (results.json) gives the counts and examples when checked."""
    t = test or {}
    out_topic = (t.get("topic") or {}).get("name")
    order = bool(((t.get("workload") or {}).get("options") or {}).get("order"))
    done, types, latency, moves = [], [], [], []
    events: list[dict[str, Any]] = []
    opened: dict[Any, tuple[int, int]] = {}  # process -> (invocation index, time)
    where_in: dict[int, tuple[int, int]] = {}
    inputs: list[int] = []
    unacked: set[int] = set()
    read: dict[tuple[int, int], int] = {}
    carried: list[tuple[int, str | None, list]] = []  # (invocation index, outcome, input records) of each copy
    last = 0
    for n, _line, op in timed_ops(history):
        tm, f, kind, proc = op["time"], op.get("f"), op.get("type"), op.get("process")
        last = max(last, tm)
        if proc == "nemesis":
            events.append(nemesis_event(op, n, epoch=len(events)))
        elif f in ("assign", "revoke", "rebalance"):
            moves.append(op)
        elif f == "copy" and kind == "invoke":
            opened[proc] = (op.get("index", n - 1), tm)
        elif f == "copy" and proc in opened:
            index, start = opened.pop(proc)
            done.append(tm / 1e9)
            types.append(kind)
            latency.append((tm - start) / 1e6)
            carried.append((index, kind, batch if isinstance(batch := op.get("value"), list) else []))
        elif f == "fill" and kind in ("ok", "info"):
            for r in op.get("records") or []:
                if isinstance(r, list) and len(r) == 3:
                    inputs.append(r[2])
                    where_in.setdefault(r[2], (r[0], r[1]))
            unacked.update(v for v in op.get("unacked") or [] if isinstance(v, int))
        elif f == "drain" and kind in ("ok", "info") and (out_topic is None
                                                          or op.get("topic", out_topic) == out_topic):
            for r in op.get("records") or []:
                if isinstance(r, list) and len(r) == 3:
                    read[(r[0], r[1])] = r[2]
    for index, _start in opened.values():  # cut off by the end of the run: info
        done.append(last / 1e9)
        types.append("info")
        latency.append(float("nan"))
        carried.append((index, "info", []))
    output = [v for _, v in sorted(read.items())]
    first = [v for (p, _), v in sorted(read.items()) if p == 0]  # the order --copy-order keeps: output partition 0
    found = compare(inputs, output, unacked, order=first if order else None)
    counts = (results or {}).get("counts") or {}
    totals = {k: int(counts[k]) if isinstance(counts.get(k), int) else len(found[k]) for k in COPY_COUNTS}
    seen = Counter(output)
    tally = CopyTally(filled=len(inputs), unacked=len(unacked), output=len(read),
                      copied_once=sum(1 for v in set(inputs) if seen[v] == 1), missing=totals["copy_missing"],
                      duplicated=totals["copy_duplicate"], duplicated_values=sum(1 for c in seen.values() if c > 1),
                      invented=totals["copy_invented"], reordered=totals["copy_reordered"] if order else None)
    wanted = _examples(results, found)
    values = {v for vs in wanted.values() for v in vs}
    out_at: dict[int, list[tuple[int, int]]] = {}
    for (p, o), v in sorted(read.items()):
        if v in values:
            out_at.setdefault(v, []).append((p, o))
    copies: dict[int, list[tuple[int, str | None]]] = {}
    for index, kind, recs in carried:
        for r in recs:
            if isinstance(r, list) and len(r) == 3 and r[2] in values:
                copies.setdefault(r[2], []).append((index, kind))
    examples = tuple(CopyExample(k, v, where_in.get(v), tuple(out_at.get(v, ())), tuple(copies.get(v, [])[:MAX_LINKED]),
                                 len(copies.get(v, []))) for k in COPY_COUNTS for v in wanted[k])
    linked = {i for e in examples for i, _ in e.copies}
    return CopyRun(np.asarray(done, float), np.asarray(types, object), np.asarray(latency, float), tally, examples,
                   tuple(events), tuple(rebalances(moves, subscribe=True)), _op_lines(history, linked))


def _op_lines(history: Path, wanted: set[int]) -> dict[int, dict[str, Any]]:
    """The invocation and completion lines of each copy op in `wanted` (invocation indexes), with their line
    numbers: `{index: {"process", "type", "lines"}}`. A second pass, read only when some example links to an op."""
    if not wanted:
        return {}
    ops: dict[int, dict[str, Any]] = {}
    opened: dict[Any, int] = {}
    with open(history, encoding="utf-8") as lines:
        for n, line in enumerate(lines, 1):
            if '"copy"' not in line:
                continue
            try:
                op = json.loads(line)
            except ValueError:
                continue
            if not isinstance(op, dict) or op.get("f") != "copy":
                continue
            proc = op.get("process")
            if op.get("type") == "invoke":
                index = op.get("index", n - 1)
                opened[proc] = index
                if index in wanted:
                    ops[index] = {"process": proc, "type": "info", "lines": [(n, line.rstrip("\n"))]}
            elif proc in opened and opened[proc] in ops:
                o = ops[opened.pop(proc)]
                o["type"] = op.get("type")
                o["lines"].append((n, line.rstrip("\n")))
            else:
                opened.pop(proc, None)
    return ops
