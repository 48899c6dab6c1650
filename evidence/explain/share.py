"""Why a share run's records were delivered as they were, told from the share coordinators' own log.

`explain_share(run)` takes the example records of each anomaly the share check found (results.json's
`checkers.share.examples`: `[partition, offset, value]`), and for each puts side by side:

- its deliveries (when each poll returned it, to which member, with which delivery count) and the
  acknowledgements of it, with the outcome each member was told, from the history;
- the faults that completed between its first and its last delivery, and the partition's leaders
  meanwhile as the harness's monitor saw them (isr.jsonl);
- what the share coordinator wrote of that offset: each `__share_group_state` record of the run's
  partition (a run has one share group) whose ranges hold it (time, snapshot or update, delivery state,
  count), decoded from the run's evidence (`kchaos.evidence.share_log`).

A regressed delivery count gets a cause where the log tells it:

- `acquisition_unwritten`: no state record gave the offset a count as high as the earlier delivery's
  before the later delivery. Kafka counts a delivery when the share-partition leader acquires the
  record, and writes the state only on an acknowledgement, a release or a lock timeout: an acquisition
  that its leader did not outlive is forgotten.
- `release_unwritten`: as `acquisition_unwritten`, and the release that made the record available for
  the earlier delivery (count one lower) is missing from the log too, so the record came back with a count
  below the earlier delivery's. A lock timeout frees a record in the leader's memory at once and writes
  that in the background, retrying while the share coordinator is away; a leader that fails meanwhile
  takes both with it.
- `written_then_lost`: the coordinator's log held a count as high as the earlier delivery's before the
  later delivery, and the later delivery still carried a lower or equal one: written state not read back.

A record delivered again after an ACCEPT or REJECT the client was told committed gets one too:

- `done_never_written`: no state record held it done (acknowledged, archived, or below the start offset) before
  it came back: the acknowledgement the client was told committed never reached the log.
- `done_then_redelivered`: the log held it done, and it came back all the same.

It writes RUN/evidence/share_explanation.json and returns it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kchaos.core.history import HistoryError, read_history
from kchaos.evidence import EvidenceError
from kchaos.evidence.decode import Dumper, FindLibs, check_run, history_clock
from kchaos.evidence.files import EVIDENCE_DIR, ISR_FILE, RAW_DIR, read_isr, read_json_object
from kchaos.evidence.kafka_logs import dump
from kchaos.evidence.share_log import ShareState, decode_share

__all__ = ["HEADS", "SHARE_EXPLANATION_FILE", "explain_share", "load_share_explanation", "share_lines"]

SHARE_EXPLANATION_FILE = "share_explanation.json"  # in EVIDENCE_DIR
HEADS = {
    "acquisition_unwritten": "its earlier acquisition was never written to the share coordinator's log, and the "
                             "share-partition leader that counted it did not survive",
    "release_unwritten": "neither its earlier acquisition nor the lock timeout's release before it reached the share "
                         "coordinator's log (a lock timeout frees a record before its write lands), and the "
                         "share-partition leader that held them did not survive",
    "written_then_lost": "the share coordinator's log held the higher count, and a later delivery carried a lower one",
    "done_never_written": "the client was told its acknowledgement committed, but the share coordinator's log never "
                          "held the record done before it came back (KAFKA-20330's class)",
    "done_then_redelivered": "the share coordinator's log held the record done, and it was delivered again",
    "unexplained": "the share coordinator's log does not say why",
}


def _topic_id(run: Path, topic: str) -> str | None:
    for meta in sorted((run / EVIDENCE_DIR / RAW_DIR).glob(f"*/{topic}-*/partition.metadata")):
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "topic_id":
                return value.strip()
    return None


def _facts(run: Path, wanted: set[tuple[int, int]]) -> tuple[dict[tuple[int, int], dict[str, list]], list[dict]]:
    """The deliveries and acknowledgements of each wanted (partition, offset), and the faults, from the history."""
    out: dict[tuple[int, int], dict[str, list]] = {k: {"deliveries": [], "acks": []} for k in wanted}
    faults = []
    for op in read_history(run / "history.jsonl"):
        t = op.get("time", 0) / 1e9
        if op.get("process") == "nemesis":
            if op.get("type") == "ok" and op.get("nodes"):
                faults.append({"t": round(t, 3), "f": op.get("f"), "nodes": op.get("nodes")})
        elif op.get("f") == "share-poll" and op.get("type") == "ok":
            for p, o, _v, count in op.get("records") or ():
                if (p, o) in out:
                    out[(p, o)]["deliveries"].append({"t": round(t, 3), "process": op["process"], "count": count})
        elif op.get("f") == "share-ack" and op.get("type") in ("ok", "info"):
            for a in op.get("acks") or ():
                if (a[0], a[1]) in out:
                    outcome = a[3] if len(a) > 3 else "info"
                    out[(a[0], a[1])]["acks"].append({"t": round(t, 3), "process": op["process"], "kind": a[2],
                                                      "outcome": outcome})
    return out, faults


def _state(states: list[ShareState], topic_id: str | None, p: int, o: int, clock: Any) -> list[dict]:
    """The state records of partition `p` (of the topic with `topic_id`, when known) that held offset `o`, then
    the first that put it below the start offset (done with)."""
    rows = []
    for s in states:
        if s.partition != p or (topic_id is not None and s.topic_id != topic_id):
            continue
        row = {"t": clock.to_s(s.time_ms), "kind": s.kind, "at": f"__share_group_state-{s.state_partition}@{s.offset}",
               "leader_epoch": s.leader_epoch, "start_offset": s.start_offset}
        held = s.covering(o)
        if held is not None:
            rows.append({**row, "state": held[0], "count": held[1]})
        elif s.start_offset > o:
            rows.append({**row, "state": "below the start offset"})
            break
    return rows


def _leaders(isr: list[dict], p: int, first: float | None, last: float | None) -> list[dict]:
    """The leaders of partition `p` the harness's monitor saw from the sample before `first` to `last` (history
    seconds), each with when it was first seen: [{"t", "leader"}], a change per entry."""
    if first is None or last is None:
        return []
    out: list[dict] = []
    for row in isr:
        if row.get("partition") != p:
            continue
        t = row.get("time", 0) / 1e9
        if t > last:
            break
        if out and out[-1]["leader"] == row.get("leader"):
            continue
        if t < first:
            out = []
        out.append({"t": round(t, 3), "leader": row.get("leader")})
    return out


def _regressed(deliveries: list[dict], state: list[dict]) -> tuple[str, str]:
    """(cause, sentence) of a delivery count that went back."""
    for i, later in enumerate(deliveries):
        earlier = [d for d in deliveries[:i] if d["count"] >= later["count"]]
        if not earlier:
            continue
        top = max(earlier, key=lambda d: d["count"])
        written = [r for r in state if r.get("count", 0) >= top["count"] and r["t"] is not None
                   and r["t"] <= later["t"]]
        if written:
            w = written[-1]
            return "written_then_lost", (f"count {w['count']} was written at {w['t']} s ({w['at']}); the delivery at "
                                         f"{later['t']} s carried {later['count']}")
        last = [r for r in state if r["t"] is not None and r["t"] <= later["t"] and "count" in r]
        had = f"the last state written for it had count {last[-1]['count']}" if last else "no state was written for it"
        told = (f"delivered with count {top['count']} at {top['t']} s, again with {later['count']} at {later['t']} s; "
                f"{had}")
        if (last[-1]["count"] if last else 0) < top["count"] - 1:
            return "release_unwritten", f"{told}, not even the release before count {top['count']}"
        return "acquisition_unwritten", told
    return "unexplained", "no later delivery carried a lower or equal count"


# The delivery state a committed acknowledgement of each kind leaves in the share coordinators' log.
_DONE = {"accept": "acknowledged", "reject": "archived"}


def _after_done(kind: str, deliveries: list[dict], acks: list[dict], state: list[dict]) -> tuple[str, str]:
    """(cause, sentence) of a record delivered again after an ACCEPT (`kind` accept) or REJECT the client was told
    committed: whether the coordinators' log ever held it done before that delivery."""
    for ack in acks:
        if ack["kind"] != kind or ack["outcome"] != "ok":
            continue
        later = next((d for d in deliveries if d["t"] > ack["t"]), None)
        if later is None:
            continue
        done = [r for r in state if r["t"] is not None and r["t"] <= later["t"]
                and r.get("state") in (_DONE[kind], "below the start offset")]
        told = f"the client was told its {kind.upper()} committed at {ack['t']} s"
        if done:
            return "done_then_redelivered", (f"{told}; the log held it {done[-1]['state']} at {done[-1]['t']} s "
                                             f"({done[-1]['at']}), yet it was delivered again at {later['t']} s")
        return "done_never_written", (f"{told}, but no state record held it {_DONE[kind]} before it was "
                                      f"delivered again at {later['t']} s")
    return "unexplained", ""


def explain_share(run: Path, libs: Path | None = None, dumper: Dumper = dump,
                  find_libs: FindLibs | None = None) -> dict[str, Any]:
    """(Re)build the explanation of a share run's example records; write share_explanation.json; return it.

    Raises EvidenceError (one line) when the run has no evidence/raw, no test.json or no readable results.json
    or history. `libs` are the Kafka jars; without them `find_libs` finds the run's own from test.json."""
    run = Path(run)
    check_run(run)
    test = json.loads((run / "test.json").read_text(encoding="utf-8"))
    try:
        results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EvidenceError(f"{run}: results.json unreadable ({e})") from None
    share = (results.get("checkers") or {}).get("share") or {}
    examples = {k: [tuple(x) for x in v] for k, v in (share.get("examples") or {}).items()}
    notes: list[str] = []
    wanted = {(p, o) for xs in examples.values() for p, o, *_ in xs}
    try:
        facts, faults = _facts(run, wanted)
    except (OSError, HistoryError) as e:
        raise EvidenceError(f"{run}: history.jsonl unreadable ({e})") from None
    states: list[ShareState] = []
    if wanted:
        try:
            libs = libs or (find_libs(test) if find_libs else None)
        except Exception as e:
            notes.append(f"no Kafka jars for test.json's version: {type(e).__name__}: {e}")
        if libs is None:
            notes.append("no Kafka jars: the share coordinators' log was not decoded")
        else:
            states = decode_share(run, libs, dumper, notes)
    isr = read_isr(run / ISR_FILE)
    clock = history_clock(test)
    topic = (test.get("topic") or {}).get("name", "kchaos")
    topic_id = _topic_id(run, topic)
    records = []
    for kind, xs in sorted(examples.items()):
        for p, o, *rest in xs:
            f = facts[(p, o)]
            first, last = (f["deliveries"][0]["t"], f["deliveries"][-1]["t"]) if f["deliveries"] else (None, None)
            state = _state(states, topic_id, p, o, clock)
            if kind == "delivery_count_regressed":
                cause, why = _regressed(f["deliveries"], state)
            elif kind in ("redelivered_after_accept", "redelivered_after_reject"):
                cause, why = _after_done(kind.rsplit("_", 1)[1], f["deliveries"], f["acks"], state)
            else:
                cause, why = "unexplained", ""
            records.append({"kind": kind, "partition": p, "offset": o, "value": rest[0] if rest else None,
                            **f, "state": state, "cause": cause, "why": why, "leaders": _leaders(isr, p, first, last),
                            "faults": [x for x in faults if first is not None and first <= x["t"] <= last]})
    groups: dict[str, list[list[int]]] = {}
    for r in records:
        groups.setdefault(r["cause"], []).append([r["partition"], r["offset"]])
    out = {"run": str(run), "topic_id": topic_id, "records": records,
           "groups": [{"cause": c, "head": HEADS[c], "records": rs}
                      for c, rs in sorted(groups.items(), key=lambda g: -len(g[1]))],
           "notes": list(dict.fromkeys(notes))}
    (run / EVIDENCE_DIR / SHARE_EXPLANATION_FILE).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


def load_share_explanation(run: Path) -> dict[str, Any] | None:
    """RUN/evidence/share_explanation.json as a dict, or None when absent or unreadable."""
    return read_json_object(Path(run) / EVIDENCE_DIR / SHARE_EXPLANATION_FILE)


def share_lines(explanation: dict[str, Any], every: bool = False) -> list[str]:
    """The explanation as plain lines: each cause with its records, then each record's story (the first few of
    each cause unless `every`)."""
    lines = []
    by: dict[str, list[dict[str, Any]]] = {}
    for r in explanation.get("records") or ():
        by.setdefault(r["cause"], []).append(r)
    for g in explanation.get("groups") or ():
        rs = by.get(g["cause"], [])
        lines.append(f"{len(rs)} record{'s' * (len(rs) != 1)}: {g['head']}")
        for r in rs if every else rs[:3]:
            head = f"  p{r['partition']}@{r['offset']} (value {r['value']}, {r['kind']})"
            lines.append(f"{head}: {r['why']}" if r["why"] else head)
            lines.append("    delivered: " + ", ".join(f"{d['t']} s to {d['process']} (count {d['count']})"
                                                    for d in r["deliveries"]))
            if r["acks"]:
                lines.append("    acknowledged: " + ", ".join(f"{a['t']} s {a['kind']} by {a['process']} "
                                                           f"({a['outcome']})" for a in r["acks"]))
            if r.get("leaders"):
                lines.append("    partition leader: " + ", ".join(f"{x['leader']} from {x['t']} s"
                                                               for x in r["leaders"]))
            for x in r["faults"]:
                lines.append(f"    fault: {x['t']} s {x['f']} {', '.join(x['nodes'])}")
            for s in r["state"]:
                count = f" count {s['count']}" if "count" in s else ""
                lines.append(f"    state: {s['t']} s {s['kind']} {s['state']}{count} ({s['at']}, leader epoch "
                             f"{s['leader_epoch']})")
    lines += [f"note: {n}" for n in explanation.get("notes") or ()]
    return lines
