"""The copy workload's verdict rules (docs/verdicts.md, "The copy workload"): exactly-once."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kchaos.checkers.copy.check import COPY, COPY_KINDS
from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, Judgement, undecided_checks
from kchaos.core.promise import Promise

# Kinds a read_uncommitted final read of the output explains: it also sees aborted and unfinished transactions.
COPY_UNCOMMITTED = {"copy_duplicate": "a read_uncommitted reader also sees aborted and unfinished copies",
                    "copy_reordered": "a read_uncommitted reader sees aborted copies where they were written"}


def judge_copy(results: Mapping[str, Any], counts: Mapping[str, int], settings: Promise | None = None) -> Judgement:
    """The verdict of a copy run (docs/verdicts.md): exactly-once is promised (transactional producers, offsets
    committed in the transaction, read_committed readers), so every kind of COPY_KINDS fails; under a
    read_uncommitted final read the kinds of COPY_UNCOMMITTED are observed, allowed. Where `settings` (test.json's;
    None: the defaults) do not promise no loss, as under unclean leader election, every kind is observed, allowed:
    a rewritten input, output or offsets log can show as any of them. A final read that did not complete, or a
    copy that stopped short of the input's end, makes a run with no other failure unknown."""
    copy = (results.get("checkers") or {}).get(COPY) or {}
    uncommitted = copy.get("isolation") == "read_uncommitted"
    s = settings or Promise.of({})
    unpromised = None if s.no_loss else (
        f"{s.no_durability}, so no exactly-once" if not s.acks_all
        else "unclean leader election is configured: Kafka's guarantee, and exactly-once with it, does not apply")
    failed: dict[str, int] = {}
    allowed: dict[str, int] = {}
    why: dict[str, dict[str, str]] = {"failed": {}, "allowed": {}}
    for kind, reason in COPY_KINDS.items():
        if counts.get(kind):
            fine = uncommitted and kind in COPY_UNCOMMITTED
            (allowed if fine or unpromised else failed)[kind] = counts[kind]
            why["allowed" if fine or unpromised else "failed"][kind] = (
                COPY_UNCOMMITTED[kind] if fine else unpromised or reason)
    undecided = undecided_checks(results, counts, acknowledged(counts))
    if copy.get("incomplete_partitions"):
        undecided.append(f"the final read of output partitions {copy['incomplete_partitions']} did not complete")
        if set(failed) == {"copy_missing"}:
            failed, why["failed"] = {}, {}  # the missing values may be in what was never read
    if counts.get("uncopied"):
        at = ", ".join(f"partition {p} at offset {o}" for p, o in (copy.get("uncopied") or {}).items())
        undecided.append(f"the copy stopped short of the input's end{f' ({at})' if at else ''}: {counts['uncopied']} "
                         "values were never copied, which says nothing of exactly-once")
    return Judgement(FAIL if failed else UNKNOWN if undecided else PASS, failed, allowed, why, tuple(undecided))


def acknowledged(counts: Mapping[str, int]) -> int | None:
    """The writes a checked copy run acknowledged: the values of its input (`counts.input`); None where the results
    do not say."""
    n = counts.get("input")
    return int(n) if isinstance(n, (int, float)) else None
