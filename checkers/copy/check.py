"""The checker of the copy workload: the output read at the end must equal the input.

The input is every value a `fill` op recorded as written (`records`); values whose fill send failed (`unacked`)
may or may not be in it. The output is what the final read (`drain` ops of the output topic) returned, each
(partition, offset) once, in partition and offset order. The kinds (docs/checkers.md):

- `copy_missing`: an input value never in the output (unacked fill values are not looked for), among those the
  group's committed offsets had passed by the end: a value at or past its partition's committed offset when the
  copy stopped short (the `copied` op's `behind`) was never copied, and counts as `uncopied` (not a kind: the
  run is unknown, not failed, since exactly-once says nothing of what was not consumed yet);
- `copy_duplicate`: every occurrence of a value in the output beyond its first;
- `copy_invented`: every output record whose value is not in the input (nor among the unacked fill values);
- `copy_reordered` (with `--copy-order` only): the fewest output values that must move for the output's order
  (each value's first occurrence, in output partition 0) to be the input's, that is the number of values
  outside a longest run of them in input order (a longest increasing subsequence).

Kafka promises exactly-once here (idempotent, transactional producers; offsets committed in the transaction;
read_committed readers), so every kind fails the run under read_committed. Under a read_uncommitted final
read, duplicates and reorderings are what aborted and unfinished transactions leave visible: observed,
allowed (the verdict's `judge_copy`).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kchaos.checkers.history_scan import read_ops

__all__ = ["COPY", "COPY_COUNTS", "CopyChecker", "check_copy_ops", "compare", "out_of_order"]

COPY = "copy"  # the checker's name in results.json's `checkers`
COPY_KINDS = {"copy_missing": "an input value never reached the committed output",
              "copy_duplicate": "a value is in the output more than once",
              "copy_invented": "an output value is not in the input",
              "copy_reordered": "the output does not keep the input's order (--copy-order)"}
COPY_COUNTS = tuple(COPY_KINDS)
MAX_EXAMPLES = 10


def check_copy_ops(ops: Iterable[dict[str, Any]], test: dict[str, Any] | None) -> dict[str, Any]:
    """The copy checker's result for a history's ops (dicts as history.jsonl holds them) and test.json: `valid`
    (False if any kind was found, "unknown" if a final read of the output did not complete and values are
    missing, or if the copy stopped short of the input's end, else True), `counts` (COPY_COUNTS plus `input`,
    `output`, `unacked`, `uncopied`), `examples` (up to MAX_EXAMPLES values of each kind), `isolation`, and
    `uncopied`: where the copy stopped short, input partition -> the group's committed offset."""
    t = test or {}
    options = (t.get("workload") or {}).get("options") or {}
    out_topic = (t.get("topic") or {}).get("name")
    partitions = int((t.get("topic") or {}).get("partitions") or 1)
    order = bool(options.get("order"))
    filled: list[tuple[int, int, int]] = []
    unacked: set[int] = set()
    read: dict[tuple[int, int], int] = {}
    complete: set[int] = set()
    behind: dict[int, int] = {}  # input partition -> the group's committed offset, where the copy stopped short
    for op in ops:
        if op.get("type") not in ("ok", "info"):
            continue
        f = op.get("f")
        if f == "fill":
            filled += [(int(r[0]), int(r[1]), int(r[2])) for r in op.get("records") or []]
            unacked.update(int(v) for v in op.get("unacked") or [])
        elif f == "copied":
            behind = {int(b[0]): int(b[1]) for b in op.get("behind") or []}
        elif f == "drain" and (out_topic is None or op.get("topic", out_topic) == out_topic):
            for p, o, v in op.get("records") or []:
                read[(int(p), int(o))] = int(v)
            if op.get("complete"):
                complete.add(int(op.get("partition", 0)))
    inputs = [v for _, _, v in filled]
    found = compare(inputs, [v for _, v in sorted(read.items())], unacked,
                    order=[v for (p, _), v in sorted(read.items()) if p == 0] if order else None)
    never = {v for p, o, v in filled if p in behind and o >= behind[p]}
    uncopied = [v for v in found["copy_missing"] if v in never]
    found["copy_missing"] = [v for v in found["copy_missing"] if v not in never]
    counts = {k: len(found[k]) for k in COPY_COUNTS}
    counts.update(input=len(inputs), output=len(read), unacked=len(unacked), uncopied=len(uncopied))
    incomplete = sorted(set(range(partitions)) - complete)
    valid: bool | str = not any(counts[k] for k in COPY_COUNTS)
    if valid and (incomplete or uncopied):
        valid = "unknown"
    elif counts["copy_missing"] and incomplete and not any(counts[k] for k in COPY_COUNTS if k != "copy_missing"):
        valid = "unknown"  # the missing values may be in the part of the output never read
    return {"valid": valid, "counts": counts, "examples": {k: sorted(found[k])[:MAX_EXAMPLES] for k in COPY_COUNTS},
            "isolation": str(options.get("isolation") or "read_committed"), "incomplete_partitions": incomplete,
            "copy_order": order, "uncopied": {str(p): o for p, o in sorted(behind.items())} if uncopied else {}}


def compare(inputs: list[int], output: list[int], unacked: Iterable[int] = (),
            order: list[int] | None = None) -> dict[str, list[int]]:
    """The values of each kind (module doc) for `inputs` (the filled values, in input order), `output` (every
    value the final read returned) and `unacked`; `order` is the output sequence whose order must be the
    input's (None: order not checked). A value appears in a list once per occurrence that counts."""
    in_set, maybe = set(inputs), set(unacked)
    seen = Counter(output)
    missing = [v for v in inputs if v not in seen]
    duplicate = [v for v, n in seen.items() for _ in range(n - 1)]
    invented = [v for v in output if v not in in_set and v not in maybe]
    reordered: list[int] = []
    if order is not None:
        reordered = out_of_order(inputs, order)
    return {"copy_missing": missing, "copy_duplicate": duplicate, "copy_invented": invented,
            "copy_reordered": reordered}


def out_of_order(inputs: list[int], output: list[int]) -> list[int]:
    """The values of `output` (first occurrences of input values) outside one longest subsequence in input
    order: the fewest values that must move for the output to keep the input's order."""
    rank = {v: i for i, v in enumerate(inputs)}
    firsts, seen = [], set()
    for v in output:
        if v in rank and v not in seen:
            seen.add(v)
            firsts.append(v)
    ranks = [rank[v] for v in firsts]
    tails: list[int] = []  # tails[k]: the index in `ranks` ending the best increasing run of length k+1
    prev = [-1] * len(ranks)
    for i, r in enumerate(ranks):
        k = _bisect(ranks, tails, r)
        prev[i] = tails[k - 1] if k else -1
        if k == len(tails):
            tails.append(i)
        else:
            tails[k] = i
    keep: set[int] = set()
    i = tails[-1] if tails else -1
    while i >= 0:
        keep.add(i)
        i = prev[i]
    return [firsts[i] for i in range(len(firsts)) if i not in keep]


def _bisect(ranks: list[int], tails: list[int], r: int) -> int:
    lo, hi = 0, len(tails)
    while lo < hi:
        mid = (lo + hi) // 2
        if ranks[tails[mid]] < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


class CopyChecker:
    """Checks a copy run: its final read of the output against its input (module doc)."""

    def __init__(self, master: str | None = None):
        self.master = master  # no Spark: the input is at most a few million values

    def check(self, test: dict[str, Any], history_path: Path) -> dict[str, Any]:
        """`check_copy_ops` of the history at `history_path`."""
        return check_copy_ops(read_ops(Path(history_path)), test)

    def check_many(self, runs: list[tuple[dict[str, Any], Path]]) -> list[dict[str, Any]]:
        """`check` of each (test, history) pair, in order."""
        return [self.check(t, h) for t, h in runs]
