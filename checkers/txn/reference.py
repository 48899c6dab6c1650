"""The reference checker of the txn workload: the executable definition of its anomalies (docs/checkers.md).

Single process, no Spark: one pass reads the history (validating it; a
malformed line is a CheckInputError naming it), then plain sets and dicts find
every anomaly. The names are Jepsen's (jepsen/tests/kafka.clj):

- `lost_write`: a committed value, never read, at an offset below the highest
  offset any read returned in its partition; or a committed value that a poll
  returned and no drain did, though the final read of its partition completed;
- `unseen`: a committed value never read, not a lost_write;
- `G1a`: a value of a transaction that failed (aborted), read by a
  read_committed reader (a poll under `--txn-isolation read_committed`, or the
  final read, which is always read_committed);
- `aborted_read`: the same read by a read_uncommitted poll only: expected,
  never a failure;
- `torn_transaction`: a transaction that completed ok or info (or was cut off
  by the end of the run), some of whose values a read_committed reader saw and
  some not, though the final read of the partition of those not seen completed
  (a cut-off transaction's partitions: its keys mod test.json's partition count);
- `duplicate`: a value at two or more distinct (partition, offset), counting its
  reads and its send's offset (of an ok or info transaction);
- the order kinds (precommitted_read, inconsistent_offsets, poll and send skips and reorderings, within a
  transaction or between two) and the dependency cycles G0 and G1c.

The Spark txn checker (`check_txn_spark`) computes the same result; `assemble` is where both end.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kchaos.checkers.txn.cycles import CYCLE_COUNTS, cycles, reference_edges
from kchaos.checkers.txn.history import Parsed, parse, parse_ops
from kchaos.checkers.txn.lines import partition_count, place_cut_off
from kchaos.checkers.txn.order import ORDER_COUNTS, order_anomalies, version_order

__all__ = ["COUNTS", "INVALID", "TxnChecker", "assemble", "check_txn", "check_txn_file", "parse", "parse_ops"]

BASE_COUNTS = ("lost_write", "unseen", "G1a", "aborted_read", "torn_transaction", "duplicate")
COUNTS = BASE_COUNTS + ORDER_COUNTS + CYCLE_COUNTS
# Kinds that make the checker's `valid` false; `unseen` only where the final read of its partition completed, and
# `precommitted_read` and `G1c_wr` only under read_committed. G0, G1c and int_send_skip are what Kafka's
# transactions allow.
INVALID = ("lost_write", "G1a", "torn_transaction", "duplicate", "inconsistent_offsets", "poll_skip",
           "nonmonotonic_poll", "int_poll_skip", "int_nonmonotonic_poll", "nonmonotonic_send",
           "int_nonmonotonic_send")
MAX_EXAMPLES = 10
COMMITTED, UNCOMMITTED = "read_committed", "read_uncommitted"


def isolation_of(test: Mapping[str, Any] | None) -> str:
    """The isolation level a txn or copy run's test.json records (`workload.options.isolation`; read_committed
    when absent)."""
    return str((((test or {}).get("workload") or {}).get("options") or {}).get("isolation") or COMMITTED)


def check_txn_file(history: Path, test: dict[str, Any] | None) -> dict[str, Any]:
    """`check_txn` of a history.jsonl; CheckInputError (one line, naming the line) if it is malformed."""
    return check_txn(parse(Path(history)), test)


def check_txn(parsed: Parsed, test: dict[str, Any] | None, *,
              max_examples: int | None = MAX_EXAMPLES) -> dict[str, Any]:
    """Every anomaly of COUNTS in a parsed txn history, judged with test.json's isolation level; the sends of a
    transaction the run cut off lie in their keys' partitions when test.json records the partition count.

    Returns `{"valid", "counts", "examples", "cycles", "unseen_undecided", "isolation", "stats"}`: `counts` has
    every kind of COUNTS (keys: values; for torn_transaction the line index of the transaction's invocation; the
    order kinds' keys are those `order_anomalies` gives; G0 and G1c count components);
    `examples` the smallest keys of each non-zero kind but G0 and G1c, whose example cycle is in `cycles`;
    `unseen_undecided` the unseen values whose partition's final read did not complete (they may be there).
    `valid` is False for any kind of INVALID, a precommitted_read or G1c_wr under read_committed or an unseen
    value in a completed partition, else "unknown" if some unseen value is undecided, else True.
    """
    isolation = isolation_of(test)
    polls_committed = isolation == COMMITTED
    parsed = place_cut_off(parsed, partition_count(test))
    where: dict[int, set[tuple[int, int]]] = defaultdict(set)  # value -> (p, o) read
    seen_committed: set[int] = set()  # values a read_committed reader returned
    seen_uncommitted: set[int] = set()
    top: dict[int, int] = {}  # partition -> highest offset read
    for t in parsed.txns:
        for records in t.polls:
            _reads(records, where, top, seen_committed if polls_committed else seen_uncommitted)
    _reads(parsed.drains, where, top, seen_committed)
    drained = {v for _, _, v in parsed.drains}
    committed = [(v, p, o) for t in parsed.txns if t.type == "ok" for v, p, o in t.sends]
    aborted = {v for t in parsed.txns if t.type == "fail" for v, _, _ in t.sends}
    found: dict[str, list[Any]] = {k: [] for k in BASE_COUNTS}
    for v, p, o in committed:
        if v not in where:
            lost = o is not None and p in top and o < top[p]
            found["lost_write" if lost else "unseen"].append(v)
        elif v not in drained and p in parsed.complete:  # a poll returned it; the complete final read did not
            found["lost_write"].append(v)
    unseen = set(found["unseen"])
    undecided = [v for v, p, _ in committed if v in unseen and p not in parsed.complete]
    found["G1a"] = sorted(aborted & seen_committed)
    found["aborted_read"] = sorted((aborted & seen_uncommitted) - seen_committed)
    for t in parsed.txns:
        if t.type in ("ok", "info"):
            shown = [v in seen_committed for v, _, _ in t.sends]
            hidden = [v for v, p, _ in t.sends if v not in seen_committed and p in parsed.complete]
            if any(shown) and hidden:
                found["torn_transaction"].append(t.index)
    sent_at: dict[int, set[tuple[int, int]]] = defaultdict(set)  # value -> (p, o) its ok or info send reported
    for t in parsed.txns:
        if t.type in ("ok", "info"):
            for v, p, o in t.sends:
                if o is not None:
                    sent_at[v].add((p, o))
    found["duplicate"] = [v for v in where.keys() | sent_at.keys()
                          if len(where.get(v, set()) | sent_at.get(v, set())) > 1]
    log = version_order(parsed)
    found.update(order_anomalies(parsed, log))
    counts = {k: len(set(found[k])) for k in BASE_COUNTS + ORDER_COUNTS}
    examples = {k: sorted(set(found[k]))[:max_examples] for k in BASE_COUNTS + ORDER_COUNTS if found[k]}
    cycle_counts, cycle_examples = cycles(reference_edges(parsed.txns, log))
    return assemble({**counts, **cycle_counts}, examples, cycle_examples, len(set(undecided)), isolation,
                    _stats(parsed, committed, where, test))


def assemble(counts: dict[str, int], examples: dict[str, list[Any]], cycle_examples: dict[str, Any],
             undecided: int, isolation: str, stats: dict[str, Any]) -> dict[str, Any]:
    """The checker's result from its counts (every kind of COUNTS), examples (keys as tuples or lists) and
    cycles; `valid` as `check_txn` says. Both txn checkers end here, so their results have one shape."""
    invalid = [*INVALID, *(("precommitted_read", "G1c_wr") if isolation == COMMITTED else ())]
    failed = any(counts[k] for k in invalid) or counts["unseen"] > undecided
    valid: bool | str = False if failed else "unknown" if undecided else True
    return {"valid": valid, "counts": {k: int(counts[k]) for k in COUNTS},
            "examples": {k: [list(x) if isinstance(x, (tuple, list)) else int(x) for x in v]
                         for k, v in examples.items() if v},
            "cycles": cycle_examples, "unseen_undecided": int(undecided), "isolation": isolation, "stats": stats}


def _reads(records: Iterable[list[int]], where: dict[int, set[tuple[int, int]]], top: dict[int, int],
           seen: set[int]) -> None:
    for p, o, v in records:
        where[v].add((p, o))
        seen.add(v)
        top[p] = max(top.get(p, -1), o)


def _stats(parsed: Parsed, committed: list, where: dict, test: dict[str, Any] | None) -> dict[str, Any]:
    by_type: defaultdict[str, int] = defaultdict(int)
    for t in parsed.txns:
        by_type[t.type] += 1
    parts = set(parsed.partitions) | set(range(partition_count(test) or 0))
    return {"txn_invoke": len(parsed.txns), "txn_ok": by_type["ok"], "txn_fail": by_type["fail"],
            "txn_info": by_type["info"], "committed_sends": len(committed), "values_read": len(where),
            "drain_ok": parsed.drain_ok, "nemesis_ops": parsed.nemesis_ops,
            "partitions_complete": sorted(parsed.complete), "partitions_incomplete": sorted(parts - parsed.complete)}


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
