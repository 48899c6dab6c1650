"""The queue workload's verdict rules (docs/verdicts.md, "The queue workload"): a lost write fails where Kafka's
guarantee covered it, a duplicate or a reordered send fails with idempotence on, a rewritten log fails only where
no allowed loss explains it, and a consumer group's anomalies fail by how it commits."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, Judgement, lost_in_promise, undecided_checks
from kchaos.core.promise import Promise

NAME = "queue"  # the queue checker's name in results.json's `checkers`: the one its counts come from
# A log truncated and rewritten shows as these; they fail only where no allowed loss explains them.
TRUNCATION = ("acked_offset_mismatch", "inconsistent_offset", "nonmonotonic_poll")
NEVER = {"unexpected": "a value was read that no send ever invoked",
         "poll_skip": "a consumer jumped past records that exist",
         "corrupt_read": "a reader was handed a record the corrupt nemesis flipped on disk, not the value "
                         "acknowledged at its offset (a consumer with check.crcs=false)"}




def judge_queue(results: Mapping[str, Any], counts: Mapping[str, int], s: Promise,
                test: Mapping[str, Any]) -> Judgement:
    """The verdict of a queue run from its results.json, its `counts` and what its configuration promises."""
    undecided = undecided_checks(results, counts, acknowledged(counts))
    others = [(n, c.get("valid")) for n, c in (results.get("checkers") or {}).items()
              if n != NAME and isinstance(c, Mapping)]
    failed: dict[str, int] = {}
    allowed: dict[str, int] = {}
    why: dict[str, dict[str, str]] = {"failed": {}, "allowed": {}}

    def put(kind: str, n: int, fails: bool, reason: str) -> None:
        if n:
            (failed if fails else allowed)[kind] = n
            why["failed" if fails else "allowed"][kind] = reason

    lost = counts.get("lost", 0)
    judged_inside = lost_in_promise(results)
    inside = min(lost, judged_inside or 0)
    cause = f"acks={s.acks}" if not s.acks_all else "unclean leader election"
    if s.no_loss and judged_inside is None:
        # Nothing says which lost writes the guarantee covered: neither failed nor allowed, and the verdict unknown.
        undecided.append(f"{lost} lost writes were not judged against Kafka's guarantee (results.json has no "
                         "loss.lost_in_promise): check the run again")
    elif s.no_loss:
        put("lost", inside, True, "inside Kafka's guarantee: an in-sync replica held them")
        put("lost", lost - inside, False, "outside Kafka's guarantee")
    else:
        put("lost", lost, False, s.no_durability or "")
    # A truncated and rewritten log shows as these kinds. They are allowed where the configuration promises no
    # loss, or where this run lost writes outside the guarantee (the truncation that caused them); per run, not
    # per partition.
    truncated_ok = not s.no_loss or lost > inside
    rewritten = (f"a rewritten log, which {cause} allows" if not s.no_loss
                 else "a log truncated outside Kafka's guarantee")
    for kind in TRUNCATION:
        put(kind, counts.get(kind, 0), not truncated_ok,
            rewritten if truncated_ok else "the log changed, and no write was lost outside Kafka's guarantee")
    put("duplicate", counts.get("duplicate", 0), s.idempotence,
        "idempotence is on" if s.idempotence else "idempotence is off: a retried send may be written twice")
    reorder_fails = s.idempotence and not truncated_ok
    put("nonmonotonic_send", counts.get("nonmonotonic_send", 0), reorder_fails,
        "idempotence is on" if reorder_fails else rewritten if s.idempotence
        else "idempotence is off: retries may reorder sends")
    for kind, reason in NEVER.items():
        put(kind, counts.get(kind, 0), True, reason)
    put("failed_visible", counts.get("failed_visible", 0), False,
        "a send reported failed was written: not against Kafka's guarantee")
    commits = group_commit(test)
    put("committed_unconsumed", counts.get("committed_unconsumed", 0), commits == "sync",
        "the group committed offsets past records no member processed, though it commits only after processing "
        "(at-least-once)" if commits == "sync" else "auto-commit commits the positions of what poll returned, "
        "processed or not" if commits == "auto" else "the consumers are no group members committing after processing")
    put("double_consumed", counts.get("double_consumed", 0), False,
        "a queue is at-least-once: a record may be delivered again")
    for name, v in others:
        if v is False:
            put(f"checker:{name}", 1, True, f"checker {name} found an anomaly")
        elif v is not True and not (results.get("checkers") or {})[name].get("error"):
            undecided.append(f"checker {name} could not decide")
    if counts.get("unseen"):
        undecided.append(f"{counts['unseen']} acknowledged writes could not be looked for "
                         "(the final read of their partitions did not complete)")
    stats = results.get("stats") or {}
    malformed = int(stats.get("malformed_client_ops") or 0) + int(stats.get("malformed_records") or 0)
    if malformed:
        undecided.append(f"{malformed} client operations or records could not be parsed")
    verdict = FAIL if failed else UNKNOWN if undecided else PASS
    return Judgement(verdict, failed, allowed, why, tuple(undecided))


def acknowledged(counts: Mapping[str, int]) -> int | None:
    """The writes a checked queue run acknowledged (`counts.acked`); None where the results do not say."""
    n = counts.get("acked")
    return int(n) if isinstance(n, (int, float)) else None


def group_commit(test: Mapping[str, Any] | None) -> str | None:
    """How a subscribe-mode run's consumers committed (`sync` or `auto`, test.json's `workload.options.group_commit`),
    None for assigned consumers."""
    w = (test or {}).get("workload") or {}
    return ((w.get("options") or {}).get("group_commit") or "sync") if w.get("consumer_mode") == "subscribe" else None
