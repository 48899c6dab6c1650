"""Why each lost write was lost, told from the history and Kafka's own files.

`explain(run)` decodes the run's evidence (`kchaos.evidence.decode`), takes the
lost values from results.json (timeline.anomalies.lost), places each at the
partition and offset its acknowledgement named (history.jsonl), groups them
into ranges (per partition, same leader, epoch and ISR when acknowledged, no
value of theirs kept in between) and, for each range, assembles:

- who acknowledged it: the leader, leader epoch and ISR in the metadata log
  at the acknowledgement's wall-clock time;
- the faults (history nemesis lines) that hit those nodes afterwards, up to
  the election that replaced the range, and the ISR when the first hit;
- that election: the first leader epoch after the acknowledging one in the
  surviving leader-epoch-checkpoint, its start offset (where the new
  leader's log ended), and its leader and time in the metadata log;
- each replica's fate: it still holds the values (segments), truncated past
  them (server.log's truncation, else its checkpoint), lost them with its
  unsynced tail (a power failure and a shorter log after restart), or
  "unknown" when the evidence does not say.

The ranges are then grouped by cause (same
partition, acknowledging leader(s) and epoch, and fate of each replica), each
group told in one sentence. It writes
RUN/evidence/explanation.json and returns an `Explanation`, whose `why` is one
sentence per range and whose `groups` say the same per cause, largest first.
Every claim names its source; nothing is inferred from timing alone.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kchaos.core.history import HistoryError
from kchaos.core.promise import Promise
from kchaos.evidence import EvidenceError
from kchaos.evidence.decode import EVIDENCE_DIR, Dumper, Evidence, FindLibs, check_run, decode
from kchaos.evidence.explain.facts import Facts, load_facts, node_names
from kchaos.evidence.explain.fates import LostRange, replica_fates
from kchaos.evidence.explain.groups import LostGroup, group_ranges
from kchaos.evidence.explain.why import pick_faults, why
from kchaos.evidence.files import read_json_object
from kchaos.evidence.kafka_logs import dump

__all__ = ["EXPLANATION_FILE", "Explanation", "explain", "load_explanation"]

EXPLANATION_FILE = "explanation.json"


@dataclass(frozen=True)
class Explanation:
    """The explanation of a run's lost writes: ranges with their why, the ranges grouped by cause (largest
    first), per-partition timelines, notes."""

    run: str
    lost: int
    listed: int
    ranges: tuple[LostRange, ...]
    timelines: dict[str, list[dict[str, Any]]]
    clock: dict[str, Any]
    notes: tuple[str, ...] = field(default_factory=tuple)
    groups: tuple[LostGroup, ...] = field(default_factory=tuple)

    @property
    def why(self) -> list[str]:
        """One sentence per lost range."""
        return [r.why for r in self.ranges]

    def truncated(self) -> set[str]:
        """Every replica that truncated past some lost range."""
        return set().union(*(r.truncated() for r in self.ranges)) if self.ranges else set()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (what explanation.json holds)."""
        return {"run": self.run, "lost": self.lost, "listed": self.listed,
                "ranges": [r.to_dict() for r in self.ranges], "why": self.why,
                "groups": [g.to_dict() for g in self.groups], "timelines": self.timelines,
                "clock": self.clock, "notes": list(self.notes)}


def _set(ids: tuple[int, ...] | None, names: dict[int, str]) -> tuple[str, ...] | None:
    return None if ids is None else tuple(names.get(i, f"broker {i}") for i in ids)


def _group(facts: Facts, lost: list[tuple[int, int | None, int, float | None]]
           ) -> list[list[tuple[int, int | None, int, float | None]]]:
    """Lost offsets per partition and (leader, epoch, ISR) at acknowledgement, split where a value acknowledged
    under that key survived between them. Keys are apart before offsets are compared: two leaders that
    acknowledged the same offsets (a split brain) would otherwise cut each other's runs into single offsets."""
    by_key: dict[tuple[int, Any], list[tuple[int, int | None, int, float | None]]] = {}
    for e in lost:
        by_key.setdefault((e[0], facts.ack_key(e[0], e[3], e[1], True)), []).append(e)
    groups: list[list[tuple[int, int | None, int, float | None]]] = []
    for (p, key), es in by_key.items():
        run: list[tuple[int, int | None, int, float | None]] = []
        for e in sorted(es, key=lambda e: (e[1] is None, e[1] if e[1] is not None else 0, e[2])):
            if run:
                last = run[-1]
                if e[1] is not None and last[1] is not None:
                    same = not facts.survivor_between(p, last[1], e[1], key)
                else:
                    same = e[1] is None and last[1] is None
                if not same:
                    groups.append(run)
                    run = []
            run.append(e)
        groups.append(run)
    return sorted(groups, key=lambda g: (g[0][0], g[0][1] is None, g[0][1] or 0, g[0][3] or 0))


def _election(facts: Facts, ev: Evidence, p: int, epoch: int | None, hi: int | None) -> dict[str, Any] | None:
    """The first epoch after `epoch` in the surviving lineage's checkpoint, with its leader and time."""
    if epoch is None:
        return None
    survivor = facts.final_leader(p)
    order = ([survivor] if survivor else []) + [n for n in ev.nodes if n != survivor]
    for node in order:
        cp = ev.checkpoints.get((node, p))
        if not cp:
            continue
        later = [(e, s) for e, s in cp if e > epoch]
        if not later:
            continue
        e, start = later[0]
        st = facts.first_state_with_epoch(p, e)
        out = {"epoch": e, "start_offset": start, "checkpoint_of": node,
               "leader": facts.names.get(st.leader, f"broker {st.leader}") if st and st.leader >= 0 else None,
               "time_s": ev.clock.to_s(st.time_ms) if st else None,
               "overwrote": hi is not None and start <= hi,
               "unclean": bool(st and st.recovering)}  # Kafka marks an unclean election's leader RECOVERING
        became = facts.became_leader(p, e)
        if became is not None:
            out["leader_log_end"] = became.offset  # state-change.log: log end on taking the leadership
        return out
    return None


def _lost(run: Path) -> tuple[list[tuple[int, float | None]], int, list[str]]:
    """(value, acked_s) of every listed lost write, the lost count, notes."""
    try:
        res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EvidenceError(f"{run}: no readable results.json ({e}); check the run first: kchaos check RUN") from None
    count = int((res.get("counts") or {}).get("lost") or 0)
    listed = ((res.get("timeline") or {}).get("anomalies") or {}).get("lost")
    notes = []
    if listed is None:
        listed = [{"key": k, "acked_s": None} for k in (res.get("examples") or {}).get("lost") or []]
    out = [(a["key"], a.get("acked_s")) for a in listed if isinstance(a.get("key"), int)]
    if len(out) < count:
        notes.append(f"results.json lists {len(out)} of {count} lost writes; only those are explained")
    return out, count, notes


def explain(run: Path, libs: Path | None = None, dumper: Dumper = dump,
            find_libs: FindLibs | None = None) -> Explanation:
    """(Re)build the explanation of `run`'s lost writes from RUN/evidence/raw; write explanation.json.

    Raises EvidenceError (one line) when the run has no evidence/raw, no
    test.json or no readable results.json. `libs` are the Kafka jars used to
    decode; without them `find_libs` finds the run's own from its test.json
    (clusters.distribution.run_libs). `dumper` stands in for DumpLogSegments
    (tests).
    """
    run = Path(run)
    check_run(run)
    lost, count, notes = _lost(run)
    ev = decode(run, libs, dumper, find_libs)
    notes += ev.notes
    try:
        facts = load_facts(run, ev, node_names(run), {v for v, _ in lost})
    except (OSError, HistoryError) as e:
        raise EvidenceError(f"{run}: history.jsonl unreadable ({e})") from None
    notes += facts.notes
    placed = [(*facts.place(v), v, facts.ack_s(v, s)) for v, s in lost]
    entries = [(p, off, v, t) for p, off, v, t in placed if p is not None]
    if len(entries) < len(placed):
        notes.append(f"{len(placed) - len(entries)} lost values have no acknowledged send in the history")
    acks_all = Promise.of(ev.test).acks_all
    holders = ev.holders()
    ranges = []
    for g in _group(facts, entries):
        p = g[0][0]
        offs = [e[1] for e in g if e[1] is not None]
        lo, hi = (min(offs), max(offs)) if offs else (None, None)
        times = [e[3] for e in g if e[3] is not None]
        t0, t1 = (min(times), max(times)) if times else (None, None)
        ack = facts.acker(p, g[0][3], g[0][1], True)
        isr, leader, epoch = _set(ack.isr, facts.names), ack.leader, ack.epoch
        newer = None  # the controller moved on while the acknowledging leader went on, not knowing
        if epoch is not None:
            st = next((x for x in facts.timeline(p) if x.leader_epoch > epoch), None)
            if st is not None and t1 is not None and (ev.clock.to_s(st.time_ms) or 0) <= t1:
                newer = {"leader": facts.names.get(st.leader, "none" if st.leader < 0 else str(st.leader)),
                         "epoch": st.leader_epoch, "time_s": ev.clock.to_s(st.time_ms)}
        el = _election(facts, ev, p, epoch, hi)
        values = tuple(sorted(e[2] for e in g))
        fates = replica_fates(ev, facts, p, values, lo, hi, t0, leader, epoch, isr, acks_all, holders)
        # Faults up to the election, or to the last truncation when that came later (a healed partition).
        ends = [x for x in [el.get("time_s") if el else None, *(f.time_s for f in fates if f.status == "truncated")]
                if x is not None]
        hit = set(isr or ()) | ({leader} if leader else set())
        faults = pick_faults(facts.faults_between(t0, max(ends) if ends else None, hit), fates)
        shown, isr_f = isr, None
        for f in faults:  # the ISR when a fault struck, where it differs from the last one said
            sf = facts.state_at_s(p, f["time_s"])
            now = _set(sf.isr, facts.names) if sf else None
            if f["role"] == "fault" and now is not None and now != shown:
                f["isr"], shown = now, now
                isr_f = isr_f or now
        told = LostRange(p, lo, hi, values, t0, t1, leader, epoch, isr, tuple(faults), isr_f, el, fates, "",
                         ack.source, newer, ack.candidates if leader is None else ())
        ranges.append(replace(told, why=why([told])))
    affected = sorted({r.partition for r in ranges})
    exp = Explanation(str(run), count, len(lost), tuple(ranges),
                      {str(p): facts.timeline_rows(p) for p in affected},
                      {"history_start_unix_ms": ev.clock.start_unix_ms, "source": ev.clock.source},
                      tuple(notes), group_ranges(ranges))
    out = run / EVIDENCE_DIR / EXPLANATION_FILE
    out.write_text(json.dumps(exp.to_dict(), indent=1) + "\n", encoding="utf-8")
    return exp


def load_explanation(run: Path) -> dict[str, Any] | None:
    """RUN/evidence/explanation.json as a dict, or None when absent or unreadable."""
    return read_json_object(Path(run) / EVIDENCE_DIR / EXPLANATION_FILE)

