"""A run's verdict, one word for every surface: pass, fail or unknown (docs/verdicts.md).

`judge(results, test)` is the only place the verdict is decided. It reads results.json's counts, its
`loss` section (how many lost writes Kafka's guarantee covered), its stats and its checkers' errors, and
test.json's producer and topic settings. results.json, the console, report.html, compare, serve, JUnit
and the exit code all take their word from it, and a results.json written before verdicts existed is
judged the same way when any of them reads it.

- **fail**: the run shows an anomaly its configuration promises against (a lost write inside Kafka's
  guarantee, a duplicate with idempotence on, a value nobody sent, ...);
- **unknown**: nothing failed, but the checker could not decide everything (acknowledged writes it could
  not look for, a checker error, a run never checked);
- **pass**: otherwise. Anomalies the configuration allows (loss under acks=1, loss outside the guarantee,
  duplicates with idempotence off) are counted in `allowed`: observed, allowed.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kchaos.checkers.kafka_errors import internal_reasons
from kchaos.core.page_cache import describe as describe_page_cache
from kchaos.core.promise import Promise

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
VERDICTS = (PASS, FAIL, UNKNOWN)
# results.json's `valid`, kept for compatibility
VALID: dict[str, bool | str] = {PASS: True, FAIL: False, UNKNOWN: "unknown"}
SOURCE = "queue"  # the checker whose counts results.json summarises; its own `valid` is superseded here
FIELDS = ("verdict", "failed", "allowed", "why", "undecided")

# A log truncated and rewritten shows as these; they fail only where no allowed loss explains them.
TRUNCATION = ("acked_offset_mismatch", "inconsistent_offset", "nonmonotonic_poll")
NEVER = {"unexpected": "a value was read that no send ever invoked",
         "poll_skip": "a consumer jumped past records that exist",
         "corrupt_read": "a reader was handed a record the corrupt nemesis flipped on disk, not the value "
                         "acknowledged at its offset (a consumer with check.crcs=false)"}


@dataclass(frozen=True)
class Judgement:
    """A run's verdict with its grounds: `failed` and `allowed` map anomaly kinds to counts, `why` says why each
    kind failed (`why["failed"][kind]`) or was allowed (`why["allowed"][kind]`), `undecided` why the verdict is
    unknown. A kind can be in both: lost writes inside Kafka's guarantee fail, those outside it are allowed."""

    verdict: str
    failed: Mapping[str, int] = field(default_factory=dict)
    allowed: Mapping[str, int] = field(default_factory=dict)
    why: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    undecided: tuple[str, ...] = ()

    @classmethod
    def from_results(cls, results: Mapping[str, Any]) -> Judgement:
        """The judgement results.json holds (written by `judged`); a results.json without one (written before
        verdicts) has its `valid` as the verdict and no grounds: `judge` it with its test.json instead."""
        if results.get("verdict") in VERDICTS:
            return cls(results["verdict"], dict(results.get("failed") or {}), dict(results.get("allowed") or {}),
                       {k: dict(v) for k, v in (results.get("why") or {}).items()},
                       tuple(results.get("undecided") or ()))
        return cls(of_valid(results.get("valid")))

    @property
    def valid(self) -> bool | str:
        """results.json's `valid` for this verdict: True for pass, False for fail, "unknown" for unknown."""
        return VALID[self.verdict]

    def as_json(self) -> dict[str, Any]:
        """The fields results.json gets: verdict, failed, allowed, why, undecided."""
        return {"verdict": self.verdict, "failed": dict(self.failed), "allowed": dict(self.allowed),
                "why": {k: dict(v) for k, v in self.why.items()}, "undecided": list(self.undecided)}

    def failed_text(self) -> list[str]:
        """Each failed kind as `3 lost (inside Kafka's guarantee: ...)`."""
        return _texts(self.failed, self.why.get("failed") or {})

    def allowed_text(self) -> list[str]:
        """Each allowed kind as `605 lost (outside Kafka's guarantee)`."""
        return _texts(self.allowed, self.why.get("allowed") or {})

    def lines(self) -> list[str]:
        """The verdict in words: `verdict: pass`, then `fails:`, `observed, allowed:` and `unknown because:` lines
        for those that apply."""
        out = [f"verdict: {self.verdict}"]
        if self.failed:
            out.append("fails: " + "; ".join(self.failed_text()))
        if self.allowed:
            out.append("observed, allowed: " + "; ".join(self.allowed_text()))
        if self.undecided and self.verdict == UNKNOWN:
            out.append("unknown because: " + "; ".join(self.undecided))
        return out


def _texts(counts: Mapping[str, int], why: Mapping[str, str]) -> list[str]:
    return [f"{n} {k}" + (f" ({why[k]})" if why.get(k) else "") for k, n in counts.items()]


def lost_in_promise(results: Mapping[str, Any], test: Mapping[str, Any] | None) -> int:
    """Lost writes of a checked run that Kafka's guarantee covered (`loss.lost_in_promise`). A results.json written
    before the per-write rule has no such count: then every lost write is inside when the configuration promises
    no loss, none when it does not."""
    loss = results.get("loss") or {}
    if "lost_in_promise" in loss:
        return int(loss["lost_in_promise"] or 0)
    lost = int((results.get("counts") or {}).get("lost") or 0)
    return lost if Promise.of(test).no_loss else 0


def judge(results: Mapping[str, Any] | None, test: Mapping[str, Any] | None) -> Judgement:
    """The verdict of a run from its results.json (None or {} when never checked) and its test.json ({} or None:
    the harness's defaults, acks=all and idempotence off). docs/verdicts.md has the table this implements."""
    results, s = results or {}, Promise.of(test)
    counts = {k: int(v or 0) for k, v in (results.get("counts") or {}).items() if isinstance(v, (int, float))}
    kind = ((test or {}).get("workload") or {}).get("kind")
    if kind == TXN:
        return judge_txn(results, counts, ((test or {}).get("workload") or {}).get("txn_isolation"), s)
    if kind == COPY:
        return judge_copy(results, counts, s)
    undecided = [f"checker {name} failed: {c['error']}" for name, c in (results.get("checkers") or {}).items()
                 if isinstance(c, Mapping) and c.get("error")]
    others = [(n, c.get("valid")) for n, c in (results.get("checkers") or {}).items()
              if n != SOURCE and isinstance(c, Mapping)]
    if not counts:
        undecided.append("the run was not checked" if not results else "the checker reported no counts")
    else:
        undecided += cannot_pass(results, counts, kind)
    failed: dict[str, int] = {}
    allowed: dict[str, int] = {}
    why: dict[str, dict[str, str]] = {"failed": {}, "allowed": {}}

    def put(kind: str, n: int, fails: bool, reason: str) -> None:
        if n:
            (failed if fails else allowed)[kind] = n
            why["failed" if fails else "allowed"][kind] = reason

    lost = counts.get("lost", 0)
    inside = min(lost, lost_in_promise(results, test))
    cause = f"acks={s.acks}" if not s.acks_all else "unclean leader election"
    if s.no_loss:
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


NOTHING_ACKED = "nothing was acknowledged, so nothing could be lost"


def history_line(history: Mapping[str, Any]) -> str | None:
    """results.json's `history` section in one line when the history is damaged (`history: 1 unparsed line: the
    last line was cut off; judged on the 14 lines before it`), whatever the verdict; None when it is whole."""
    unparsed = int(history.get("unparsed_lines") or 0)
    if not unparsed:
        return None
    cut = (f": the last line was cut off; judged on the {history.get('lines')} lines before it"
           if history.get("cut_off_last_line") else "")
    return f"history: {unparsed} unparsed line{'s' if unparsed != 1 else ''}{cut}"


def acknowledged(results: Mapping[str, Any], counts: Mapping[str, int], kind: str | None) -> int | None:
    """The writes a checked run acknowledged, by workload `kind`: the queue's acknowledged sends (`counts.acked`),
    the txn workload's sends in committed transactions (`stats.committed_sends`), the copy workload's input values
    (`counts.input`); None where the results do not say."""
    if kind == TXN:
        n = (results.get("stats") or {}).get("committed_sends")
    else:
        n = counts.get("input" if kind == COPY else "acked")
    return int(n) if isinstance(n, (int, float)) else None


def cannot_pass(results: Mapping[str, Any], counts: Mapping[str, int], kind: str | None) -> list[str]:
    """Why a checked run cannot pass, whatever it found: its history is damaged (`history`: a cut-off last line;
    any other damaged line is bad input, never checked), it acknowledged nothing (NOTHING_ACKED), its nemesis was
    asked for faults and applied none (results.json's `nemesis`), or Kafka logged an internal fault
    (`kafka_errors`, checkers/kafka_errors.py). After Jepsen's stats checker, in which an operation that never
    succeeded makes a test invalid, and its redpanda assert checker: a verdict never says more than the run
    shows."""
    out = []
    history = results.get("history") or {}
    if history.get("cut_off_last_line"):
        out.append(f"the last line of the history was cut off; judged on the {history.get('lines')} lines before it")
    if acknowledged(results, counts, kind) == 0:
        out.append(NOTHING_ACKED)
    if (why := no_fault(results.get("nemesis") or {})) is not None:
        out.append(why)
    return out + internal_reasons(results.get("kafka_errors"))


def no_fault(nemesis: Mapping[str, Any]) -> str | None:
    """Why a run whose nemesis was asked for faults applied none of them (results.json's `nemesis` section), or
    None when it applied one or was asked for none."""
    if not nemesis.get("asked") or nemesis.get("applied"):
        return None
    asked = ", ".join(nemesis["asked"])
    invoked = int(nemesis.get("invoked") or 0)
    if not invoked:
        return f"the nemesis ({asked}) was asked for faults and applied none: none was invoked before the run ended"
    reasons = "; ".join(f"{why} ×{n}" if n > 1 else why for why, n in (nemesis.get("why_not") or {}).items())
    return (f"the nemesis ({asked}) was asked for faults and applied none: {invoked} invoked, "
            f"{int(nemesis.get('not_applied') or 0)} skipped or failed" + (f" ({reasons})" if reasons else ""))


def group_commit(test: Mapping[str, Any] | None) -> str | None:
    """How a subscribe-mode run's consumers committed (`sync` or `auto`, test.json's `workload.group_commit`),
    None for assigned consumers."""
    w = (test or {}).get("workload") or {}
    return (w.get("group_commit") or "sync") if w.get("consumer_mode") == "subscribe" else None


def judged(results: dict[str, Any], test: Mapping[str, Any] | None) -> dict[str, Any]:
    """`results` with the verdict fields set (verdict, failed, allowed, why, undecided) and `valid` made to match,
    the verdict fields first after `valid`, then the page-cache model in one line (core/page_cache.py); the input is
    not changed."""
    j = judge(results, test)
    rest = {k: v for k, v in results.items() if k not in ("valid", *FIELDS, "page_cache")}
    return {"valid": j.valid, **j.as_json(), "page_cache": describe_page_cache(test or {}), **rest}


TXN = "txn"  # the workload whose runs checkers/txn/reference.py checks, and these rules judge
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
    undecided = [f"checker {TXN} failed: {txn['error']}"] if txn.get("error") else []
    if not counts:
        undecided.append("the run was not checked" if not results else "the checker reported no counts")
    else:
        undecided += cannot_pass(results, counts, TXN)
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


COPY = "copy"  # the workload checkers/copy/check.py checks, and these rules judge
COPY_KINDS = {"copy_missing": "an input value never reached the committed output",
              "copy_duplicate": "a value is in the output more than once",
              "copy_invented": "an output value is not in the input",
              "copy_reordered": "the output does not keep the input's order (--copy-order)"}
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
    undecided = [f"checker {COPY} failed: {copy['error']}"] if copy.get("error") else []
    if not counts:
        undecided.append("the run was not checked" if not results else "the checker reported no counts")
    else:
        undecided += cannot_pass(results, counts, COPY)
    if copy.get("incomplete_partitions"):
        undecided.append(f"the final read of output partitions {copy['incomplete_partitions']} did not complete")
        if set(failed) == {"copy_missing"}:
            failed, why["failed"] = {}, {}  # the missing values may be in what was never read
    if counts.get("uncopied"):
        at = ", ".join(f"partition {p} at offset {o}" for p, o in (copy.get("uncopied") or {}).items())
        undecided.append(f"the copy stopped short of the input's end{f' ({at})' if at else ''}: {counts['uncopied']} "
                         "values were never copied, which says nothing of exactly-once")
    return Judgement(FAIL if failed else UNKNOWN if undecided else PASS, failed, allowed, why, tuple(undecided))


def essentials(results: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a results.json that `judge` reads and a page shows (counts, the loss section's numbers, stats,
    each checker's `valid` and error, the stored verdict fields): a few hundred bytes of what can be megabytes."""
    out: dict[str, Any] = {k: results[k] for k in ("valid", *FIELDS, "page_cache", "counts", "stats",
                                                    "unseen_undecided", "history", "nemesis") if k in results}
    if isinstance(results.get("loss"), Mapping):
        out["loss"] = {k: v for k, v in results["loss"].items() if not isinstance(v, (list, dict))}
    if isinstance(results.get("kafka_errors"), Mapping):  # what the verdict weighs: the internal groups
        logged = results["kafka_errors"]
        out["kafka_errors"] = {**{k: logged.get(k) for k in ("kinds", "statuses", "total_groups", "errors", "fatals")},
                               "groups": [g for g in logged.get("groups") or () if g.get("status") == "internal"]}
    if isinstance(results.get("checkers"), Mapping):
        out["checkers"] = {n: {k: c[k] for k in ("valid", "error", "isolation", "incomplete_partitions", "uncopied")
                               if k in c}
                           for n, c in results["checkers"].items() if isinstance(c, Mapping)}
    return out


def merge(verdicts: list[str]) -> str:
    """The verdict of several runs (a suite cell's repetitions): fail if any fails, else unknown if any is unknown
    (or there are none), else pass."""
    if FAIL in verdicts:
        return FAIL
    return PASS if verdicts and all(v == PASS for v in verdicts) else UNKNOWN


def of_valid(valid: Any) -> str:
    """The verdict word for a `valid` value as results.json and progress.jsonl hold it (True, False, anything
    else unknown)."""
    return PASS if valid is True else FAIL if valid is False else UNKNOWN
