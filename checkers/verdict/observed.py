"""What a checked run observed, as flat numbers a scenario's prediction can be decided on.

`observe(run)` reads results.json (the checker's counts), the history (send
outcomes and times) and faults.json (which nemesis ops break) of one run
directory and returns, for example,
`{"lost": 12, "acked": 900, "duplicate": 0, "unavailable_s": 9.4, ...}`.
The names are listed in METRICS with what each one means; docs/scenarios.md
shows them in use.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kchaos.checkers.outages import OUTAGE_GAP_S, outages
from kchaos.checkers.verdict.judge import FAIL, PASS, judge
from kchaos.core.faults import FaultsError, read_faults
from kchaos.core.history import read_history
from kchaos.core.workload_kind import all_kinds
from kchaos.evidence.files import ISR_FILE, read_isr

# Every checker count a prediction may name, each once, in the registry's order of the workloads; then the anomaly
# kinds a workload's checker counts beyond them, with what each means.
COUNTS = tuple(dict.fromkeys(k for kind in all_kinds() for k in kind.counts))
OTHER_KINDS = {k: f"{kind.name} workload: {why}" for kind in all_kinds() for k, why in kind.anomalies.items()
               if k not in COUNTS}
TXN_OUTCOMES = ("ok", "fail", "info")

METRICS: dict[str, str] = {
    **{k: f"checker count: {k}" for k in COUNTS},
    **OTHER_KINDS,
    "send_ok": "sends acknowledged",
    "send_fail": "sends that definitely failed",
    "send_info": "sends whose outcome is unknown (timeouts)",
    **{f"txn_{t}": f"transactions that ended {t} (--workload txn: {what})" for t, what in
       zip(TXN_OUTCOMES, ("committed", "certainly not committed", "outcome unknown"))},
    "not_enough_replicas": "sends refused with NOT_ENOUGH_REPLICAS(_AFTER_APPEND): the ISR was below min.insync",
    "unavailable_s": f"seconds in stretches of >= {OUTAGE_GAP_S:g} s with no write acknowledged, from the first "
                     "acknowledgement (or an earlier fault) to the last send's invocation (checkers/outages.py)",
    "longest_outage_s": "the longest such stretch, in seconds",
    "faults": "faults the nemesis applied (recorded ok)",
    "recovery_s": "seconds from the last fault applied to the next acknowledged write (to the end of the workload "
                  "if none came)",
    "leader_changes": "times a partition's leader, as the ISR monitor sampled it each second, was another broker "
                      "than at the previous sample with a leader (a change and back within a second is missed)",
    "isr_shrinks": "times a partition's sampled ISR lacked a member it had at the previous sample",
    "valid": "1 when the run's verdict is pass, 0 when it is fail, -1 when unknown (docs/verdicts.md)",
    "lost_in_promise": "lost writes that Kafka's guarantee covered: an in-sync replica held them throughout "
                       "(checkers/verdict/promise.py); with acks=1 or unclean election configured, 0",
    "lost_outside_promise": "lost writes outside the guarantee (every replica that counted lost power, an unclean "
                            "election, or a configuration the guarantee does not cover)",
    "metadata_divergence": "brokers' views or roles the metadata log contradicted at the end (results.json's "
                           "agreement); -1 for a run whose views were not sampled",
    "replica_divergence": "in-sync replicas whose batches differed below the high watermark at the end; -1 as above",
    "unclean_elections": "elections in the metadata log that Kafka marked unclean (RECOVERING), or that elected a "
                         "leader from outside the ISR and ELR unmarked; -1 as above",
    "mislabelled_elections": "clean elections a controller logged as an UNCLEAN partition change (Kafka up to 4.0); "
                             "-1 as above",
}


class ObserveError(ValueError):
    """The run directory has no results.json or history to observe, or no faults.json that describes its nemesis
    lines."""


def observe(run: Path) -> dict[str, float]:
    """The METRICS of one checked run directory; ObserveError if it was never checked or its faults.json does not
    describe its nemesis lines (`read_faults`)."""
    run = Path(run)
    try:
        results = json.loads((run / "results.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ObserveError(f"{run}: no readable results.json ({e}); check the run first (kchaos check)") from None
    counts = results.get("counts") or {}
    out: dict[str, float] = {k: int(counts.get(k) or 0) for k in (*COUNTS, *OTHER_KINDS)}
    try:
        out.update(_from_history(run))
    except FaultsError as e:
        raise ObserveError(str(e)) from None
    out.update(_from_isr(read_isr(run / ISR_FILE)))
    try:
        test = json.loads((run / "test.json").read_text())
    except (OSError, json.JSONDecodeError):
        test = {}
    out["valid"] = {PASS: 1, FAIL: 0}.get(judge(results, test if isinstance(test, dict) else {}).verdict, -1)
    loss = results.get("loss") or {}
    inside = int(loss.get("lost_in_promise", out["lost"] if loss.get("promised") else 0) or 0)
    out["lost_in_promise"], out["lost_outside_promise"] = inside, out["lost"] - inside
    out.update(_from_agreement(results.get("agreement")))
    return out


def _from_agreement(agreement: Any) -> dict[str, float]:
    """The agreement metrics of results.json's `agreement`: -1 each when the run has none (or no elections)."""
    a = agreement if isinstance(agreement, dict) else {}
    elections = a.get("elections") if isinstance(a.get("elections"), dict) else None
    kinds = (elections or {}).get("kinds") or {}
    return {"metadata_divergence": int(a.get("metadata_divergence", -1)),
            "replica_divergence": int(a.get("replica_divergence", -1)),
            "unclean_elections": int(kinds.get("unclean", 0)) + int(kinds.get("unmarked", 0)) if elections else -1,
            "mislabelled_elections": int(elections.get("mislabelled", 0)) if elections else -1}


def _from_history(run: Path) -> dict[str, float]:
    """The metrics of the run's history; a fault is an ok completion of a break op of its faults.json
    (`read_faults`, whose FaultsError propagates)."""
    sends = {"ok": 0, "fail": 0, "info": 0}
    txns = dict.fromkeys(TXN_OUTCOMES, 0)
    refused = 0
    first = last = None
    acks: list[int] = []
    invoked: list[int] = []
    nemesis: list[dict[str, Any]] = []
    for op in read_history(run / "history.jsonl"):
        if op.get("process") == "nemesis":
            nemesis.append(op)
            continue
        if op.get("f") == "txn" and op.get("type") in txns:
            txns[op["type"]] += 1
        if op.get("f") != "send":
            continue
        t = op.get("time")
        kind = op.get("type")
        if isinstance(t, int):
            first = t if first is None else first
            last = t
            if kind == "invoke":
                invoked.append(t)
        if kind in sends:
            sends[kind] += 1
            if kind == "ok" and isinstance(t, int):
                acks.append(t)
            if "NOT_ENOUGH_REPLICAS" in str(op.get("error") or ""):
                refused += 1
    starts = read_faults(run, nemesis).break_ops
    applied = [op.get("time") for op in nemesis if op.get("type") == "ok" and op.get("f") in starts]
    faults, last_fault = len(applied), applied[-1] if applied else None
    out = outages([t / 1e9 for t in sorted(acks)], min(invoked) / 1e9 if invoked else None,
                  max(invoked) / 1e9 if invoked else None,
                  [{"start_s": t / 1e9, "applied": True} for t in applied if isinstance(t, int)])
    recovery = 0.0
    if isinstance(last_fault, int) and last is not None:
        recovery = (next((t for t in acks if t > last_fault), max(last, last_fault)) - last_fault) / 1e9
    return {"send_ok": sends["ok"], "send_fail": sends["fail"], "send_info": sends["info"],
            **{f"txn_{t}": n for t, n in txns.items()}, "not_enough_replicas": refused, "faults": faults,
            "unavailable_s": round(out["total_s"], 1), "longest_outage_s": round(out["longest_s"], 1),
            "recovery_s": round(recovery, 1)}


def _from_isr(samples: list[dict[str, Any]]) -> dict[str, int]:
    """leader_changes and isr_shrinks from the ISR monitor's samples (failed samples and leaderless ones skipped)."""
    leader: dict[int, int] = {}
    isr: dict[int, set[int]] = {}
    changes = shrinks = 0
    for x in samples:
        p = x.get("partition")
        if "error" in x or not isinstance(p, int):
            continue
        if isinstance(x.get("leader"), int) and x["leader"] >= 0:
            changes += p in leader and leader[p] != x["leader"]
            leader[p] = x["leader"]
        if isinstance(x.get("isr"), list):
            now = set(x["isr"])
            shrinks += p in isr and not isr[p] <= now
            isr[p] = now
    return {"leader_changes": changes, "isr_shrinks": shrinks}


def anomaly_kinds(results: dict[str, Any]) -> list[str]:
    """The anomaly kinds a results.json found (counts > 0), most severe first, allowed by the configuration or
    not (an acks=1 run's lost writes are what repro and shrink look for); `acked` is not an anomaly."""
    counts = results.get("counts") or {}
    return [k for k in (*COUNTS, *OTHER_KINDS) if k != "acked" and counts.get(k)]
