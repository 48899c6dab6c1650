"""What Kafka's files say became of one transaction of the history: its producer, its values, its markers,
its coordinator's states.

`txn_fates(op, te, tid_hint)` reads, for a `TxnOp` (one transaction of the history)
and the run's `TxnEvidence` (its transactions in Kafka's files):

- the producer id and epoch its records carry (the most common among its
  values' records), else those its transactional id had when the op began;
- each value's fate (`ValueFate`): `committed` or `aborted` by the first
  marker of that producer and epoch after its record on its partition, `open`
  when no marker followed, `not written` when no replica holds it; `late` when
  its record stands after a marker its own transaction's end wrote (it was
  appended after its transaction had ended, into a later one);
- per partition the transaction wrote (or its coordinator added), the first
  marker of that producer and epoch that ended it there (`PartitionEnd`), with
  how long after the transaction's first record it came;
- the coordinator's states of the transactional id from the one in force
  when the op began to the first completed one after the op and its markers,
  and the PrepareCommit / PrepareAbort that decided its transaction.

Nothing is inferred here; `txn_why.cause` reads causes off these.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kchaos.evidence.txn_log import TxnState

if TYPE_CHECKING:
    from kchaos.evidence.explain.txn_facts import TxnOp
    from kchaos.evidence.txn_decode import Marker, Placed, TxnEvidence

__all__ = ["MAX_STATES", "PartitionEnd", "TxnFates", "TxnStory", "ValueFate", "txn_fates"]

MAX_STATES = 12  # coordinator states kept per transaction
_DONE = ("CompleteCommit", "CompleteAbort", "Empty", "Dead")


@dataclass(frozen=True)
class ValueFate:
    """One value of the transaction: where the history put it, where its record is, what decided it."""

    value: int
    partition: int | None  # the history's
    offset: int | None  # the history's
    status: str  # committed, aborted, open, not written
    record: dict[str, Any] | None  # Placed as a dict, with time_s
    marker: dict[str, Any] | None  # the Marker that decided it, with time_s
    late: dict[str, Any] | None = None  # the marker its record stands after, when that came after it was sent


@dataclass(frozen=True)
class PartitionEnd:
    """How the transaction ended on one partition: the first marker of its producer and epoch there after the
    transaction's start (None when there is none), and ms after the transaction's first record."""

    partition: int
    marker: dict[str, Any] | None
    after_first_ms: int | None


@dataclass
class TxnFates:
    """Everything Kafka's files say about one transaction (see the module docstring)."""

    transactional_id: str | None
    producer_id: int | None
    producer_epoch: int | None
    producer_source: str
    first_record_ms: int | None
    first_value: int | None
    values: list[ValueFate] = field(default_factory=list)
    ends: list[PartitionEnd] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    decided: dict[str, Any] | None = None  # the coordinator's PrepareCommit/PrepareAbort that ended it
    began: dict[str, Any] | None = None  # the coordinator's first Ongoing of it

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)


def _timed(te: TxnEvidence, x: Placed | Marker | None) -> dict[str, Any] | None:
    return None if x is None else {**asdict(x), "time_s": te.ev.clock.to_s(x.time_ms)}


def _state(te: TxnEvidence, s: TxnState) -> dict[str, Any]:
    return {**s.to_dict(), "time_s": te.ev.clock.to_s(s.time_ms), "decided_s": te.ev.clock.to_s(s.last_update_ms)}


def _topic_partition(name: str, topic: str) -> int | None:
    head, _, p = name.rpartition("-")
    return int(p) if head == topic and p.isdigit() else None


def _producer(op: TxnOp, te: TxnEvidence, tid_hint: str | None
              ) -> tuple[str | None, int | None, int | None, str]:
    """(transactional id, producer id, epoch, where they were read)."""
    seen = Counter((r.producer_id, r.producer_epoch) for v in op.values() if (r := te.record(v)) is not None)
    if seen:
        (pid, epoch), _ = seen.most_common(1)[0]
        return te.tid_of(pid) or tid_hint, pid, epoch, "the records' batches"
    states = te.states(tid_hint) if tid_hint else []
    at = te.ev.clock.to_unix_ms(op.invoke_s)
    before = [s for s in states if at is None or s.time_ms <= at] or states[:1]
    if before and before[-1].producer_id >= 0:
        s = before[-1]
        return tid_hint, s.producer_id, s.producer_epoch, f"the coordinator's state of {tid_hint} when the op began"
    return tid_hint, None, None, "unknown"


def _coordinator(te: TxnEvidence, tid: str | None, start_ms: float | None, end_ms: float | None
                 ) -> list[dict[str, Any]]:
    """The id's states from the one in force at start_ms to the first completed one after end_ms."""
    states = te.states(tid) if tid else []
    if not states or start_ms is None:
        return []
    i = max((k for k, s in enumerate(states) if s.time_ms <= start_ms), default=0)
    out = []
    for s in states[i:]:
        out.append(s)
        if end_ms is not None and s.time_ms >= end_ms and s.state in _DONE and len(out) > 1:
            break
        if len(out) >= MAX_STATES:
            break
    return [_state(te, s) for s in out]


def _own(te: TxnEvidence, tid: str | None, start_ms: float | None) -> tuple[TxnState | None, TxnState | None]:
    """The coordinator's first Ongoing of the id at or after start_ms (the op's transaction as it saw it) and the
    first PrepareCommit / PrepareAbort after that (its end); None where the log does not have them."""
    states = te.states(tid) if tid and start_ms is not None else []
    begin = next((s for s in states if s.state == "Ongoing" and s.time_ms >= (start_ms or 0)), None)
    end = begin and next((s for s in states if s.state in ("PrepareCommit", "PrepareAbort")
                          and s.time_ms >= begin.time_ms), None)
    return begin, end


def txn_fates(op: TxnOp, te: TxnEvidence, tid_hint: str | None = None) -> TxnFates:
    """The facts of `op` in Kafka's files; `tid_hint` is its transactional id by the workload's naming, used when
    no record of it names its producer.

    The transaction's own markers are those of its producer and epoch that
    came after its coordinator's Ongoing (markers of the previous transaction
    all come before: the coordinator refuses a new transaction's partitions
    until they are written); without the coordinator's log, the first after
    its first record on each partition. A record is `late` when the marker
    before it came at or after its transaction's PrepareCommit/PrepareAbort.
    """
    tid, pid, epoch, source = _producer(op, te, tid_hint)
    clock = te.ev.clock
    start_ms = clock.to_unix_ms(op.invoke_s)
    end_ms = clock.to_unix_ms(op.complete_s)
    begin, end = _own(te, tid, start_ms)
    values: list[ValueFate] = []
    firsts: dict[int, int] = {}  # partition -> the op's first record offset there
    times = []
    for s in op.sends:
        rec = te.record(s.value)
        if rec is not None:  # decided by its own batch's producer and epoch, whichever the others carry
            m = te.marker_after(rec.partition, rec.producer_id, rec.producer_epoch, rec.offset)
            prev = te.marker_before(rec.partition, rec.producer_id, rec.producer_epoch, rec.offset)
            late = _timed(te, prev) if prev is not None and end is not None and prev.time_ms >= end.time_ms else None
            status = "open" if m is None else "committed" if m.kind == "COMMIT" else "aborted"
            values.append(ValueFate(s.value, s.partition, s.offset, status, _timed(te, rec), _timed(te, m), late))
            firsts[rec.partition] = min(firsts.get(rec.partition, rec.offset), rec.offset)
            times.append((rec.time_ms, s.value))
        else:
            values.append(ValueFate(s.value, s.partition, s.offset, "not written", _timed(te, rec), None))
    first_ms, first_value = min(times) if times else (None, None)
    parts = set(firsts) | {s.partition for s in op.sends if s.partition is not None}
    for st in [begin, end]:
        parts |= {q for n in (st.partitions if st else ()) if (q := _topic_partition(n, te.ev.topic)) is not None}
    ends = []
    for p in sorted(parts):
        m = None
        if pid is not None and epoch is not None:
            if begin is not None:
                m = next((x for x in te.markers(p, pid, epoch) if x.time_ms >= begin.time_ms), None)
            elif p in firsts:
                m = te.marker_after(p, pid, epoch, firsts[p])
        after = None if m is None or first_ms is None else int(m.time_ms - first_ms)
        ends.append(PartitionEnd(p, _timed(te, m), after))
    marks = [*(e.marker["time_ms"] for e in ends if e.marker), *(v.marker["time_ms"] for v in values if v.marker)]
    last = max([x for x in [end_ms, *marks] if x is not None], default=None)
    states = _coordinator(te, tid, start_ms, last)
    return TxnFates(tid, pid, epoch, source, first_ms, first_value, values, ends, states,
                    None if end is None else _state(te, end), None if begin is None else _state(te, begin))


@dataclass
class TxnStory:
    """One anomalous transaction: its op, what Kafka's files say of it, its context, and its cause."""

    op: TxnOp
    fates: TxnFates
    previous: TxnOp | None = None
    committed_with: dict[tuple[int, int], list[int]] = field(default_factory=dict)  # marker -> ops it decided
    client_log: list[dict[str, Any]] = field(default_factory=list)
    kind: str | None = None
    cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (txn_explanation.json's `transactions[]`)."""
        op = self.op
        return {"index": op.index, "process": op.process, "invoke_s": op.invoke_s, "complete_s": op.complete_s,
                "outcome": op.outcome, "error": op.error, "anomalies": op.anomalies,
                "sends": [[s.key, s.value, s.partition, s.offset] for s in op.sends], "line": op.line,
                **self.fates.to_dict(),
                "previous": None if self.previous is None else {
                    "index": self.previous.index, "outcome": self.previous.outcome,
                    "complete_s": self.previous.complete_s, "line": self.previous.line},
                "committed_with": [[p, o, ops] for (p, o), ops in sorted(self.committed_with.items())],
                "client_log": self.client_log, "kind": self.kind, "cause": self.cause}
