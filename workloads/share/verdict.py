"""The share workload's verdict rules (docs/verdicts.md, "The share workload"): KIP-932's at-least-once."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kchaos.checkers.share.check import SHARE, SHARE_KINDS
from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, Judgement, undecided_checks
from kchaos.core.promise import Promise

ACCEPTED_TWICE_WHY = ("two of a record's ACCEPTs were each told committed: a duplicate at-least-once allows, which "
                      "nothing told the application")


def judge_share(results: Mapping[str, Any], counts: Mapping[str, int], settings: Promise | None = None) -> Judgement:
    """The verdict of a share run: every kind of SHARE_KINDS breaks a guarantee KIP-932 gives (at-least-once
    delivery of what was written, no delivery after a committed ACCEPT or REJECT, the delivery count limit, one
    holder of a record's lock at a time) and fails the run where `settings` promise no loss of the data; where
    they do not (acks below all, unclean election), a lost record is observed, allowed, and the other kinds still
    fail, since they do not depend on the data surviving. Redeliveries at-least-once allows are counted, never
    failed; records `accepted_twice` are listed as allowed. A final drain that did not complete makes a run with no
    failure unknown."""
    s = settings or Promise.of({})
    failed: dict[str, int] = {}
    allowed: dict[str, int] = {}
    why: dict[str, dict[str, str]] = {"failed": {}, "allowed": {}}
    for kind, reason in SHARE_KINDS.items():
        if counts.get(kind):
            if kind == "share_lost" and not s.no_loss:
                allowed[kind], why["allowed"][kind] = counts[kind], (
                    f"{s.no_durability or 'unclean leader election is configured'}: a lost record is allowed")
            else:
                failed[kind], why["failed"][kind] = counts[kind], reason
    if n := counts.get("accepted_twice"):
        allowed["accepted_twice"], why["allowed"]["accepted_twice"] = n, ACCEPTED_TWICE_WHY
    undecided = undecided_checks(results, counts, acknowledged(counts))
    if counts.get("unseen"):
        undecided.append(f"the final drain did not complete: {counts['unseen']} acknowledged records were never "
                         "delivered in partitions whose lag stayed above 0")
    share = (results.get("checkers") or {}).get(SHARE) or {}
    if share.get("error"):
        undecided.append(f"the share checker failed: {share['error']}")
    return Judgement(FAIL if failed else UNKNOWN if undecided else PASS, failed, allowed, why, tuple(undecided))


def acknowledged(counts: Mapping[str, int]) -> int | None:
    """The writes a checked share run acknowledged (`counts.acked`); None where the results do not say."""
    n = counts.get("acked")
    return int(n) if isinstance(n, (int, float)) else None
