"""A run's verdict, one word for every surface: pass, fail or unknown (docs/verdicts.md).

`judge(results, test)` is the only place the verdict is decided. It reads results.json's counts, its
`loss` section (how many lost writes Kafka's guarantee covered), its stats and its checkers' errors, and
test.json's producer and topic settings. results.json, the console, report.html, compare, serve, JUnit
and the exit code all take their word from it.

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
from kchaos.core.workload_kind import UnknownWorkload, kind_of_test

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
VERDICTS = (PASS, FAIL, UNKNOWN)
# results.json's `valid`, kept for compatibility
VALID: dict[str, bool | str] = {PASS: True, FAIL: False, UNKNOWN: "unknown"}
FIELDS = ("verdict", "failed", "allowed", "why", "undecided")

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
        """The judgement results.json holds (written by `judged`); unknown, saying so, for one that holds none."""
        if results.get("verdict") in VERDICTS:
            return cls(results["verdict"], dict(results.get("failed") or {}), dict(results.get("allowed") or {}),
                       {k: dict(v) for k, v in (results.get("why") or {}).items()},
                       tuple(results.get("undecided") or ()))
        return cls(UNKNOWN, undecided=("results.json holds no verdict: check the run again",))

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


def lost_in_promise(results: Mapping[str, Any]) -> int | None:
    """Lost writes of a checked run that Kafka's guarantee covered (`loss.lost_in_promise`); None where results.json
    does not say (no lost write was judged against the guarantee: a run that lost none has 0)."""
    loss = results.get("loss") or {}
    if "lost_in_promise" in loss:
        return int(loss["lost_in_promise"] or 0)
    return None if (results.get("counts") or {}).get("lost") else 0


def judge(results: Mapping[str, Any] | None, test: Mapping[str, Any] | None) -> Judgement:
    """The verdict of a run from its results.json (None or {} when never checked) and its test.json ({} or None:
    the harness's defaults, acks=all and idempotence off), by the verdict rules of the run's workload
    (its `WorkloadKind`). docs/verdicts.md has the tables the workloads implement."""
    results = results or {}
    counts = {k: int(v or 0) for k, v in (results.get("counts") or {}).items() if isinstance(v, (int, float))}
    try:
        kind = kind_of_test(test)
    except UnknownWorkload as e:
        return Judgement(UNKNOWN, undecided=(str(e),))
    judgement: Judgement = kind.judge(results, counts, Promise.of(test), test or {})
    return with_agreement(judgement, results.get("agreement") or {})


REPLICA_WHY = "an in-sync replica held other records than the leader below the high watermark"
CORRUPTED_WHY = "the corrupt nemesis flipped bytes of these replicas"


def with_agreement(j: Judgement, agreement: Mapping[str, Any]) -> Judgement:
    """`j` with results.json's `agreement` weighed, whatever the workload: a `replica_divergence` fails the run, one
    on a replica the corrupt nemesis flipped is allowed, and a `metadata_divergence` (a broker's view the controllers
    contradict after the recovery time) and an unmarked election (a leader from outside the ISR and ELR that Kafka
    did not mark unclean) make a run that failed nothing unknown."""
    failed, allowed = dict(j.failed), dict(j.allowed)
    why = {k: dict(v) for k, v in j.why.items()}
    undecided = list(j.undecided)
    if n := int(agreement.get("replica_divergence") or 0):
        failed["replica_divergence"] = n
        why.setdefault("failed", {})["replica_divergence"] = REPLICA_WHY
    if n := int(agreement.get("allowed_replica_divergence") or 0):
        allowed["replica_divergence"] = n
        why.setdefault("allowed", {})["replica_divergence"] = CORRUPTED_WHY
    if n := int(agreement.get("metadata_divergence") or 0):
        undecided.append(metadata_reason(n, (agreement.get("metadata_divergences") or [{}])[0]))
    elections = agreement.get("elections") or {}
    if n := int((elections.get("kinds") or {}).get("unmarked") or 0):
        first = (elections.get("unmarked_elections") or [{}])[0]
        undecided.append(f"{n} unmarked election: the controller elected a leader from outside the ISR and ELR "
                         f"without marking it unclean (first: {first.get('topic')}-{first.get('partition')}, leader "
                         f"{' → '.join(map(str, first.get('leader') or []))} at epoch {first.get('leader_epoch')})")
    if (failed, allowed, undecided) == (dict(j.failed), dict(j.allowed), list(j.undecided)):
        return j
    return Judgement(FAIL if failed else UNKNOWN if undecided else PASS, failed, allowed, why, tuple(undecided))


def metadata_reason(n: int, first: Mapping[str, Any]) -> str:
    """Why metadata divergences make a run unknown, with the first one's broker, partition and both views."""
    def view(v: Mapping[str, Any]) -> str:
        return f"leader {v.get('leader')}, ISR {v.get('isr')}, replicas {v.get('replicas')}"
    text = f"{n} metadata_divergence: a broker's view of a partition outlasted the recovery time"
    if first.get("acts"):
        acts, ctl = first["acts"], first.get("controller") or {}
        return text + (f" (first: {first['node']} acts as {acts.get('role')} of {first.get('topic')}-"
                       f"{first.get('partition')} at leader epoch {acts.get('leader_epoch')}; the controllers' log: "
                       f"leader {ctl.get('leader')} at epoch {ctl.get('leader_epoch')}, ISR {ctl.get('isr')})")
    if first.get("node"):
        other = first.get("controller") or first.get("others") or {}
        whose = "the controllers' log" if "controller" in first else "most brokers"
        text += (f" (first: {first['node']} sees {first.get('topic')}-{first.get('partition')} as "
                 f"{view(first.get('broker') or {})}; {whose}: {view(other)})")
    return text


def undecided_checks(results: Mapping[str, Any], counts: Mapping[str, int], acknowledged: int | None) -> list[str]:
    """Why a run is unknown before any anomaly is weighed: a checker's error, a run never checked or whose
    checker reported no counts, and `cannot_pass`'s reasons."""
    out = [f"checker {name} failed: {c['error']}" for name, c in (results.get("checkers") or {}).items()
           if isinstance(c, Mapping) and c.get("error")]
    if not counts:
        out.append("the run was not checked" if not results else "the checker reported no counts")
    else:
        out += cannot_pass(results, acknowledged)
    return out


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


def cannot_pass(results: Mapping[str, Any], acknowledged: int | None) -> list[str]:
    """Why a checked run cannot pass, whatever it found: its history is damaged (`history`: a cut-off last line;
    any other damaged line is bad input, never checked), it acknowledged nothing (NOTHING_ACKED), its nemesis was
    asked for faults and applied none (results.json's `nemesis`), the cluster did not recover after the heal
    (`recovery`: a broker that never came back, or an ISR still short), or Kafka logged an internal fault
    (`kafka_errors`). After Jepsen's stats checker, in which an operation that never
    succeeded makes a test invalid, and its redpanda assert checker: a verdict never says more than the run
    shows."""
    out = []
    history = results.get("history") or {}
    if history.get("cut_off_last_line"):
        out.append(f"the last line of the history was cut off; judged on the {history.get('lines')} lines before it")
    if acknowledged == 0:
        out.append(NOTHING_ACKED)
    if (why := no_fault(results.get("nemesis") or {})) is not None:
        out.append(why)
    if (why := not_recovered(results.get("recovery") or {})) is not None:
        out.append(why)
    return out + internal_reasons(results.get("kafka_errors"))


def not_recovered(recovery: Mapping[str, Any]) -> str | None:
    """Why a run whose cluster did not recover after the heal cannot pass (results.json's `recovery`, from
    test.json), or None when it recovered or the run has no record of it."""
    if recovery.get("recovered", True) is not False:
        return None
    within = recovery.get("within_s")
    return ("the cluster did not recover after the heal" + (f" within {within:g} s" if within else "")
            + (f": {recovery['error']}" if recovery.get("error") else ""))


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


def judged(results: dict[str, Any], test: Mapping[str, Any] | None) -> dict[str, Any]:
    """`results` with the verdict fields set (verdict, failed, allowed, why, undecided) and `valid` made to match,
    the verdict fields first after `valid`, then the page-cache model in one line; the input is
    not changed."""
    j = judge(results, test)
    rest = {k: v for k, v in results.items() if k not in ("valid", *FIELDS, "page_cache")}
    return {"valid": j.valid, **j.as_json(), "page_cache": describe_page_cache(test or {}), **rest}


def essentials(results: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a results.json that `judge` reads and a page shows (counts, the loss section's numbers, stats,
    each checker's `valid` and error, the stored verdict fields): a few hundred bytes of what can be megabytes."""
    out: dict[str, Any] = {k: results[k] for k in ("valid", *FIELDS, "page_cache", "counts", "stats",
                                                    "unseen_undecided", "history", "nemesis", "recovery")
                                  if k in results}
    if isinstance(results.get("loss"), Mapping):
        out["loss"] = {k: v for k, v in results["loss"].items() if not isinstance(v, (list, dict))}
    if isinstance(results.get("kafka_errors"), Mapping):  # what the verdict weighs: the internal groups
        logged = results["kafka_errors"]
        out["kafka_errors"] = {**{k: logged.get(k) for k in ("kinds", "statuses", "total_groups", "errors", "fatals")},
                               "groups": [g for g in logged.get("groups") or () if g.get("status") == "internal"]}
    if isinstance(results.get("agreement"), Mapping):  # the counts and the first metadata divergence
        a = results["agreement"]
        out["agreement"] = {**{k: v for k, v in a.items() if not isinstance(v, (list, dict))},
                            "metadata_divergences": (a.get("metadata_divergences") or [])[:1]}
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
