"""The txn workload's verdict rules (docs/verdicts.md, "The txn workload")."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kchaos.checkers.txn.check import TXN
from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, Judgement, undecided_checks
from kchaos.core.promise import Promise

TXN_FAILS = {"lost_write": "a committed write is missing below offsets that were read, or after a poll read it",
             "G1a": "a read_committed reader saw a value of an aborted transaction",
             "torn_transaction": "only part of a committed transaction became visible",
             "duplicate": "a value was written twice, though the producer is transactional",
             "inconsistent_offsets": "one offset of a partition held two different values",
             "poll_skip": "a consumer jumped past records that exist, within one assignment",
             "nonmonotonic_poll": "a consumer went back in a partition, within one assignment",
             "int_poll_skip": "a transaction's polls jumped past records that exist",
             "int_nonmonotonic_poll": "a transaction's polls went back in a partition",
             "nonmonotonic_send": "a transactional producer's later transaction was written below its earlier one",
             "int_nonmonotonic_send": "a transaction's sends to one partition were written out of order"}
TXN_ALLOWED = {"aborted_read": "read_uncommitted polls see transactions that later abort",
               "G0": "Kafka does not isolate writes: concurrent transactions' sends interleave in each partition",
               "G1c": "its cycles go through ww edges, which only say how concurrent sends interleaved",
               "int_send_skip": "another transaction's sends may land between one transaction's sends"}
# Kinds a lost or rewritten log shows as: they fail where the configuration promises no loss, and are observed,
# allowed where it does not (unclean leader election), as the queue workload's `lost` and truncation kinds are.
TXN_LOSS = ("lost_write", "unseen", "inconsistent_offsets")
# Kinds that read_uncommitted polls explain, and that fail under read_committed: (why allowed, why failed).
BY_ISOLATION = {
    "precommitted_read": ("a read_uncommitted poll sees its own transaction's sends",
                          "a read_committed poll saw its own transaction's sends before the commit"),
    "G1c_wr": ("read_uncommitted polls see transactions before they commit",
               "transactions read each other's writes: impossible if each saw only committed data"),
}


def judge_txn(results: Mapping[str, Any], counts: Mapping[str, int], isolation: str | None = None,
              settings: Promise | None = None) -> Judgement:
    """The verdict of a txn run (docs/verdicts.md, "The txn workload"): every anomaly of TXN_FAILS fails, and
    so do unseen writes whose partition's final read completed, and the kinds of BY_ISOLATION under
    read_committed; the kinds of TXN_ALLOWED (and of BY_ISOLATION under read_uncommitted) are observed, allowed;
    unseen writes in partitions whose final read did not complete make it unknown. Where `settings` (test.json's;
    None: the defaults, which promise no loss) do not promise no loss, as under unclean leader election, the kinds
    of TXN_LOSS are observed, allowed instead of failing, as the queue workload's lost writes are. The isolation
    level is the checker's, else `isolation` (test.json's: a page reading only `essentials` has no checker's
    result)."""
    txn = (results.get("checkers") or {}).get(TXN) or {}
    failed = {k: counts[k] for k in TXN_FAILS if counts.get(k)}
    why: dict[str, dict[str, str]] = {"failed": {k: TXN_FAILS[k] for k in failed}, "allowed": {}}
    undecided = undecided_checks(results, counts, acknowledged(results))
    open_ = int(results.get("unseen_undecided") or txn.get("unseen_undecided") or 0)
    if counts.get("unseen", 0) > open_:
        failed["unseen"] = counts["unseen"] - open_
        why["failed"]["unseen"] = "committed writes the completed final read did not find"
    if open_:
        undecided.append(f"{open_} committed writes could not be looked for "
                         "(the final read of their partitions did not complete)")
    allowed = {k: counts[k] for k in TXN_ALLOWED if counts.get(k)}
    why["allowed"].update({k: TXN_ALLOWED[k] for k in allowed})
    s = settings or Promise.of({})
    if not s.no_loss:
        reason = s.no_durability or ""
        for kind in TXN_LOSS:
            if kind in failed:
                allowed[kind] = failed.pop(kind)
                why["failed"].pop(kind, None)
                why["allowed"][kind] = reason
    for kind, (ok_why, bad_why) in BY_ISOLATION.items():
        if counts.get(kind):
            fine = (txn.get("isolation") or isolation) == "read_uncommitted"
            (allowed if fine else failed)[kind] = counts[kind]
            why["allowed" if fine else "failed"][kind] = ok_why if fine else bad_why
    return Judgement(FAIL if failed else UNKNOWN if undecided else PASS, failed, allowed, why, tuple(undecided))


def acknowledged(results: Mapping[str, Any]) -> int | None:
    """The writes a checked txn run acknowledged: its sends in committed transactions (`stats.committed_sends`);
    None where the results do not say."""
    n = (results.get("stats") or {}).get("committed_sends")
    return int(n) if isinstance(n, (int, float)) else None
