"""A txn run's transactions in Kafka's own files: producers' records, transaction markers, coordinator states.

`decode_txn(ev, libs, dumper)` takes the topic's decoded segments (an
`Evidence`) and decodes the transaction coordinators' log
(`RUN/evidence/raw/<node>/__transaction_state-<p>/`, one JVM, DumpLogSegments
with `--transaction-log-decoder`, read by `txn_log.txn_states`), writes
`RUN/evidence/txn_state.jsonl` (one line per state change, with its history
time) and returns a `TxnEvidence` that answers:

- where a value's record is: partition, offset, the producer id and epoch of
  its batch, its CreateTime (`record`);
- the transaction markers (COMMIT / ABORT, with the coordinator epoch) a
  producer id and epoch wrote on a partition (`markers`), and the first one
  after an offset (`marker_after`), which is what decided that record;
- a transactional id's state changes (`states`), and which id a producer id
  belongs to (`tid_of`).

Records and markers are read from one replica per partition: the one whose log
ends furthest (replicas of a committed log agree; a value found only elsewhere
is still found). Coordinator states are read from the replica of each
`__transaction_state` partition with the most records.
"""
from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.evidence.decode import Dumper, Evidence, value_of
from kchaos.evidence.files import EVIDENCE_DIR, RAW_DIR, TXN_STATE_DIR, TXN_STATE_FILE
from kchaos.evidence.kafka_logs import DumpError, parse_dump
from kchaos.evidence.txn_log import TxnState, txn_states

__all__ = ["Marker", "Placed", "TxnEvidence", "decode_txn"]


@dataclass(frozen=True)
class Placed:
    """A record of a value in a replica's segments: where it is and which producer (id, epoch) wrote it."""

    node: str
    partition: int
    offset: int
    time_ms: int  # the record's CreateTime: the producer's clock when it was sent
    producer_id: int
    producer_epoch: int
    leader_epoch: int


@dataclass(frozen=True)
class Marker:
    """A transaction marker (a control batch): COMMIT or ABORT of one producer id and epoch on one partition."""

    node: str
    partition: int
    offset: int
    time_ms: int  # the marker batch's CreateTime, stamped by the partition leader that wrote it
    kind: str
    coordinator_epoch: int | None
    producer_id: int
    producer_epoch: int


@dataclass
class TxnEvidence:
    """Lookups over a txn run's records, markers and coordinator states (see the module docstring)."""

    ev: Evidence
    records: dict[Any, list[Placed]] = field(default_factory=dict)  # value -> its records (reference replica first)
    marks: dict[tuple[int, int, int], list[Marker]] = field(default_factory=dict)  # (p, pid, epoch) -> by offset
    by_tid: dict[str, list[TxnState]] = field(default_factory=dict)
    pids: dict[int, str] = field(default_factory=dict)
    reference: dict[int, str] = field(default_factory=dict)  # partition -> the replica records are read from
    notes: list[str] = field(default_factory=list)

    def record(self, value: Any) -> Placed | None:
        """The value's record in the reference replica of its partition (else any replica's); None if none holds it."""
        found = self.records.get(value) or []
        return next((r for r in found if self.reference.get(r.partition) == r.node), found[0] if found else None)

    def markers(self, p: int, pid: int, epoch: int) -> list[Marker]:
        """The markers of producer `pid` epoch `epoch` on partition `p`, in offset order."""
        return self.marks.get((p, pid, epoch), [])

    def marker_after(self, p: int, pid: int, epoch: int, offset: int) -> Marker | None:
        """The first marker of that producer and epoch on `p` past `offset`: the one that decided a record there."""
        ms = self.markers(p, pid, epoch)
        i = bisect_right([m.offset for m in ms], offset)
        return ms[i] if i < len(ms) else None

    def marker_before(self, p: int, pid: int, epoch: int, offset: int) -> Marker | None:
        """The last marker of that producer and epoch on `p` before `offset` (the end of its previous transaction)."""
        ms = [m for m in self.markers(p, pid, epoch) if m.offset < offset]
        return ms[-1] if ms else None

    def states(self, tid: str) -> list[TxnState]:
        """The transactional id's state changes, in the order its coordinator wrote them."""
        return self.by_tid.get(tid, [])

    def tid_of(self, pid: int) -> str | None:
        """The transactional id whose coordinator gave out producer id `pid` (None when no state names it)."""
        return self.pids.get(pid)


def _reference(ev: Evidence) -> dict[int, str]:
    best: dict[int, tuple[int, str]] = {}
    for (node, p) in ev.batches:
        end = ev.log_end(node, p) or 0
        if p not in best or end > best[p][0]:
            best[p] = (end, node)
    return {p: node for p, (_, node) in best.items()}


def _index_topic(te: TxnEvidence) -> None:
    ev = te.ev
    for (node, p), batches in sorted(ev.batches.items()):
        ref = te.reference.get(p) == node
        for b in batches:
            for r in b.records:
                if r.payload is not None:
                    placed = Placed(node, p, r.offset, r.time_ms, b.producer_id, b.producer_epoch, b.leader_epoch)
                    te.records.setdefault(value_of(r.payload), []).append(placed)
                elif ref and r.control in ("COMMIT", "ABORT"):
                    te.marks.setdefault((p, b.producer_id, b.producer_epoch), []).append(
                        Marker(node, p, r.offset, r.time_ms, r.control, r.coordinator_epoch, b.producer_id,
                               b.producer_epoch))
    for ms in te.marks.values():
        ms.sort(key=lambda m: m.offset)


def _decode_states(raw: Path, libs: Path, dumper: Dumper, notes: list[str]) -> list[TxnState]:
    """Every state change, from the replica of each coordinator partition with the most records."""
    files = sorted(str(f.relative_to(raw)) for f in raw.glob(f"*/{TXN_STATE_DIR}-*/*.log"))
    if not files:
        notes.append(f"no {TXN_STATE_DIR} segments were collected: the coordinator's side is unknown")
        return []
    per: dict[tuple[str, int], list[TxnState]] = {}
    folder = re.compile(re.escape(TXN_STATE_DIR) + r"-(\d+)")
    for b in parse_dump(dumper(libs, files, raw, txn_log=True), notes):
        node, d = b.file.split("/")[:2]
        m = folder.fullmatch(d)
        if m:
            part = int(m.group(1))
            per.setdefault((node, part), []).extend(txn_states([b], lambda _, part=part: part, notes))
    best: dict[int, list[TxnState]] = {}
    for (_node, p), states in sorted(per.items()):
        if len(states) > len(best.get(p, [])):
            best[p] = states
    return [s for p in sorted(best) for s in best[p]]


def decode_txn(ev: Evidence, libs: Path | None, dumper: Dumper) -> TxnEvidence:
    """Index `ev`'s records and markers, decode the coordinators' log with `libs` (None: notes that it cannot),
    write evidence/txn_state.jsonl and return the TxnEvidence. A DumpLogSegments failure is a note."""
    te = TxnEvidence(ev, reference=_reference(ev))
    _index_topic(te)
    states: list[TxnState] = []
    if libs is None:
        te.notes.append("no Kafka jars: the coordinator's log was not decoded")
    else:
        try:
            states = _decode_states(ev.run / EVIDENCE_DIR / RAW_DIR, libs, dumper, te.notes)
        except (DumpError, OSError, RuntimeError) as e:
            te.notes.append(f"DumpLogSegments --transaction-log-decoder: {e}")
    for s in states:
        te.by_tid.setdefault(s.transactional_id, []).append(s)
        if s.producer_id >= 0:
            te.pids.setdefault(s.producer_id, s.transactional_id)
    with open(ev.run / EVIDENCE_DIR / TXN_STATE_FILE, "w", encoding="utf-8") as fh:
        for s in states:
            fh.write(json.dumps({**s.to_dict(), "time_s": ev.clock.to_s(s.time_ms)}, separators=(",", ":")) + "\n")
    return te
