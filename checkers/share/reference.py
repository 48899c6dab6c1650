"""The share-group checker's reference: what each anomaly of a share run means, one history at a time, in Python.

A share history (docs/history.md) holds the producers' `send` ops, and per member process:

- `share-poll`: invoked, then `ok` with `records`: `[partition, offset, value, delivery_count]` each, the records
  the poll acquired for this member (or `info` with `error`, nothing acquired that the member saw);
- `share-ack`: invoked with `acks`: `[partition, offset, "accept"|"release"|"reject"]` each; its completion's
  `acks` add the outcome the client was told for each: `"ok"` (committed), `"fail"` (refused: not applied) or
  `"info"` (unknown); a completion of type `info` says the commit's outcome is unknown for all of them. An
  asynchronous commit (`--share-commit async` or `implicit`) completes when Kafka's callback has told each
  outcome, which may be while the member's next poll is outstanding, and a member may have several open: a
  completion belongs to the oldest open share-ack of its process that holds any of its records;
- `share-leave`: the member's consumer closed (`ok`) or abandoned (`info`, a crash: what it held is released
  when its locks expire);
- `share-state`, once, after the final drain: `partitions`, `{partition: {"start", "end", "lag"}}`, the group's
  share-partition start offset, the partition's high watermark, and the group's lag there (records not yet
  acknowledged or archived). A partition is drained when its lag is 0: Kafka may report a start offset below
  records already acknowledged (the share coordinator persists it later), so the start offset alone does not say.

A delivery is the pair (a record, the ok `share-poll` that returned it). "Before" is real time: an op completed
before another was invoked. The kinds (docs/checkers.md has each with an example):

- `share_lost`: an acknowledged send whose record no member was ever delivered, in a partition the final drain
  completed (its lag was 0), in a run where no member crashed. Fails the run.
- `redelivered_after_accept`: a delivery of a record that Kafka acquired after an ACCEPT of it whose commit the
  client was told succeeded: the ACCEPT completed before the client may have fetched the delivery (see
  `concurrent_acquisition`), or before its poll was invoked while the delivery carries a higher delivery count
  than the one the ACCEPT acknowledged. Fails the run.
- `redelivered_after_reject`: the same after a REJECT. Fails the run.
- `over_delivery_limit`: a delivery whose delivery count is above `delivery.count.limit`. Fails the run.
- `delivery_count_regressed`: a delivery whose count is at most the count of a delivery of the same record
  that completed before this one's client may have fetched it (see `concurrent_acquisition`). Fails the run.
- `concurrent_acquisition`: a delivery to one member while another surely held the record: the other, which
  Kafka gave it first (a lower delivery count), may have acquired it no earlier than the invocation of its last
  poll that returned nothing, or of its first (KafkaShareConsumer fetches ahead from each poll's invocation and
  keeps what a fetch acquired beyond one poll for the next); that was before this poll completed, by less than
  the lock duration, and the other had neither acknowledged the record nor left the group by then. Fails the run.

A redelivery the guarantee allows (at-least-once; not one of the kinds above but `delivery_count_regressed`, whose
delivery may be allowed while its count is wrong) is counted by its cause, the first that applies: `release`
(a RELEASE of the record before it), `failed_accept` (an ACCEPT or REJECT whose commit failed or is unknown),
`crash` (the member holding it crashed or left), `lock_timeout` (the lock of the last delivery expired with no
acknowledgement). A run whose final drain did not complete leaves the undelivered records of those partitions
`unseen`: the run is unknown.

`accepted_twice` counts the records two of whose ACCEPTs were each told committed: two members, or one member
twice, processed the record and were told it was done. At-least-once allows the duplicate (Kafka may answer the
ACCEPT of a delivery whose lock had already expired with success), and nothing tells the application it was one.

`consume_counts`, per member, as Jepsen's Kafka workload keeps them: `{member: {n: records}}`, how many records
that member was delivered exactly n times; `member_duplicates` counts the (member, record) pairs with n > 1.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SHARE_KINDS = {
    "share_lost": "an acknowledged record no member was ever delivered, though the final drain completed",
    "redelivered_after_accept": "a record was delivered again after an ACCEPT the client was told committed",
    "redelivered_after_reject": "a record was delivered again after a REJECT the client was told committed",
    "over_delivery_limit": "a record was delivered more times than group.share.delivery.count.limit",
    "delivery_count_regressed": "a later delivery of a record carried a delivery count no higher than an earlier",
    "concurrent_acquisition": "two members held the same record at once, within its acquisition lock",
}
CAUSES = ("release", "failed_accept", "crash", "lock_timeout")
# The kinds whose delivery should not have happened at all: such a redelivery is the anomaly, not an allowed one.
# (A count that went back is wrong in the delivery's count; the delivery itself may be allowed.)
WRONGFUL = ("over_delivery_limit", "redelivered_after_accept", "redelivered_after_reject", "concurrent_acquisition")
MAX_EXAMPLES = 10
MAX_MARKS = 1000  # anomalous deliveries per kind whose times the result lists (for the report's plot)
ACK_KINDS = ("accept", "release", "reject")
NS_PER_S = 1_000_000_000


@dataclass(slots=True)
class Delivery:
    """One record as one ok `share-poll` returned it."""

    partition: int
    offset: int
    value: int
    count: int
    process: int
    invoked: int  # the poll's invocation: its history index
    completed: int  # the poll's completion: its history index
    acquired_from: int  # the history index from which the client may have acquired the record (`collect`)
    acquired_from_ns: int  # and its time
    completed_ns: int


@dataclass(slots=True)
class Ack:
    """One acknowledgement of one record, and what the client was told of its commit."""

    partition: int
    offset: int
    kind: str  # accept, release, reject
    outcome: str  # ok, fail, info
    process: int
    invoked: int
    completed: int | None  # None: never completed


@dataclass(slots=True)
class Record:
    """Everything the history says of one record (partition, offset)."""

    deliveries: list[Delivery] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)


@dataclass
class Collected:
    """What a share history's ops say, before any record is judged: the acknowledged sends (value -> partition,
    offset), every record's deliveries and acknowledgements, each process's leaves ([(index, crashed)]), the final
    `share-state` and the per-second tallies. Every field can be gathered process by process and merged."""

    acked: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    records: dict[tuple[int, int], Record] = field(default_factory=lambda: defaultdict(Record))
    left: dict[Any, list[tuple[int, bool]]] = field(default_factory=lambda: defaultdict(list))
    state: dict[int, Mapping[str, int]] | None = None
    seconds: dict[int, dict[str, Any]] = field(default_factory=dict)


def new_second() -> dict[str, Any]:
    """An empty per-second tally."""
    return {"delivered": 0, **dict.fromkeys(ACK_KINDS, 0), "redelivered": dict.fromkeys(CAUSES, 0)}


def add_seconds(into: dict[int, dict[str, Any]], more: Mapping[int, Mapping[str, Any]]) -> None:
    """Add the per-second tallies `more` into `into`."""
    for sec, row in more.items():
        mine = into.setdefault(sec, new_second())
        for k, v in row.items():
            if k == "redelivered":
                for cause, n in v.items():
                    mine[k][cause] += n
            else:
                mine[k] += v


def collect(ops: Iterable[Mapping[str, Any]], delivery: Callable[..., Any] = Delivery,
            ack: Callable[..., Any] = Ack) -> Collected:
    """Pair each process's invocations with their completions (ops in history order; the ops of some processes
    only give those processes' part, to be merged with `add_seconds` and the dicts' union). `delivery` and `ack`
    make each record's rows from Delivery's and Ack's fields, in order (the Spark tasks take plain tuples)."""
    c = Collected()
    open_polls: dict[int, tuple[int, int, tuple[int, int]]] = {}  # process -> its open share-poll: index, time, floor
    # process -> the earliest the records its next polls return may have been acquired, (history index, time).
    # KafkaShareConsumer sends its next ShareFetch as soon as a poll is invoked, while the application still works
    # on what that poll returned, and keeps what a fetch acquired beyond what one poll returns for the next: a
    # poll's records may have been acquired at any time since the invocation of the member's last poll that
    # returned nothing (its buffer was empty then), or of its first poll.
    floor: dict[int, tuple[int, int]] = {}
    open_acks: dict[int, list[tuple[int, list[Any]]]] = defaultdict(list)  # process -> its open share-acks

    def second(ns: int) -> dict[str, Any]:
        row = c.seconds.get(ns // NS_PER_S)
        if row is None:
            row = c.seconds[ns // NS_PER_S] = new_second()
        return row
    for n, op in enumerate(ops):
        f, t = op.get("f"), op.get("type")
        p: Any = op.get("process")
        index = int(op.get("index", n))
        if f == "send" and t == "ok":
            c.acked[int(op["value"])] = (int(op["partition"]), op.get("offset"))
        elif f == "share-poll":
            if t == "invoke":
                at = int(op.get("time", 0))
                open_polls[p] = (index, at, floor.get(p, (index, at)))
            elif p in open_polls:
                inv, inv_ns, (since, since_ns) = open_polls.pop(p)
                records = (op.get("records") or []) if t == "ok" else []
                if t == "ok" and not records:
                    floor[p] = (inv, inv_ns)
                if records:
                    second(int(op.get("time", 0)))["delivered"] += len(records)
                for part, off, value, count in records:
                    c.records[(part, off)].deliveries.append(
                        delivery(part, off, value, count, p, inv, index, since, since_ns, int(op.get("time", 0))))
        elif f == "share-ack":
            if t == "invoke":
                open_acks[p].append((index, op.get("acks") or []))
            elif open_acks.get(p):
                inv, invoked = open_acks[p].pop(_owner(open_acks[p], op.get("acks") or ()))
                told = op.get("acks") or [[*a, "info"] for a in invoked]  # an info without acks: all unknown
                for part, off, kind, outcome in told:
                    if kind in ACK_KINDS:
                        second(int(op.get("time", 0)))[kind] += 1
                    c.records[(part, off)].acks.append(ack(part, off, kind, outcome if t == "ok" else "info", p, inv,
                                                           index))
        elif f == "share-leave" and t in ("ok", "info"):
            c.left[p].append((index, t == "info"))
        elif f == "share-state" and t == "ok":
            c.state = {int(k): v for k, v in (op.get("partitions") or {}).items()}
    for p, still in open_acks.items():  # never completed: unknown
        for inv, acks in still:
            for part, off, kind in acks:
                c.records[(part, off)].acks.append(ack(part, off, kind, "info", p, inv, None))
    return c


def judge_record(part: int, off: int, rec: Record, left: Mapping[Any, list[tuple[int, bool]]], limit: int,
                 lock_ns: int) -> tuple[list[tuple[str, list[int], int]], list[tuple[str, int]]]:
    """One record's anomalous deliveries, `(kind, [partition, offset, value], completion ns)`, and its allowed
    redeliveries, `(cause, completion ns)`: those not WRONGFUL; `left` holds every process's leaves."""
    found: list[tuple[str, list[int], int]] = []
    redelivered: list[tuple[str, int]] = []
    ds = sorted(rec.deliveries, key=lambda d: d.completed)
    for i, d in enumerate(ds):
        # Deliveries surely acquired before d: returned before d's client may have fetched it (a record fetched ahead
        # is returned late, after a later acquisition of it was returned elsewhere: Kafka counts acquisitions in order).
        before = [e for e in ds[:i] if e.completed < d.acquired_from]
        done = [a for a in rec.acks if a.outcome == "ok" and _acquired_after(d, a, ds)]
        wrongful = False
        for kind, here in (
                ("over_delivery_limit", d.count > limit),
                ("delivery_count_regressed", any(e.count >= d.count for e in before)),
                ("redelivered_after_accept", any(a.kind == "accept" for a in done)),
                ("redelivered_after_reject", any(a.kind == "reject" for a in done)),
                ("concurrent_acquisition", _concurrent(d, ds, rec.acks, left, lock_ns))):
            if here:
                found.append((kind, [part, off, d.value], d.completed_ns))
                wrongful = wrongful or kind in WRONGFUL
        if i and not wrongful:
            redelivered.append((_cause(ds[i - 1], rec.acks, left, d), d.completed_ns))
    return found, redelivered


def check_share_ops(ops: Iterable[Mapping[str, Any]], limit: int, lock_ms: int) -> dict[str, Any]:
    """The reference result of a share history's ops (in history order): `valid` (False if any kind was found,
    "unknown" if the final drain left records unseen, else True), `counts` (each kind, `acked`, `delivered`,
    `unseen`, `redelivered`, `accepted_twice`), `redeliveries` by cause, `examples` of each kind (up to MAX_EXAMPLES
    `[partition, offset, value]`), with `limit` the delivery count limit and `lock_ms` the acquisition lock;
    `per_second`, a row per second of history time with records delivered, acknowledgements told by kind and
    redeliveries by cause (`{"second", "delivered", "accept", "release", "reject", "redelivered": {cause: n}}`, by
    completion time), and `marks`, the times (s) of the first MAX_MARKS anomalous deliveries of each kind."""
    c = collect(ops)
    found: dict[str, list[list[int]]] = {k: [] for k in SHARE_KINDS}
    marks: dict[str, list[int]] = {k: [] for k in SHARE_KINDS}
    causes = dict.fromkeys(CAUSES, 0)
    for (part, off), rec in c.records.items():
        anomalies, redelivered = judge_record(part, off, rec, c.left, limit, lock_ms * 1_000_000)
        for kind, where, ns in anomalies:
            found[kind].append(where)
            marks[kind].append(ns)
        for cause, ns in redelivered:
            causes[cause] += 1
            c.seconds.setdefault(ns // NS_PER_S, new_second())["redelivered"][cause] += 1
    delivered = {d.value for rec in c.records.values() for d in rec.deliveries}
    twice = sum(1 for rec in c.records.values() if accepted_twice(rec.acks))
    per_member = consume_tallies((member, n, 1) for rec in c.records.values()
                                 for member, n in Counter(d.process for d in rec.deliveries).items())
    crashed = any(crash for events in c.left.values() for _, crash in events)
    complete = {p for p, s in (c.state or {}).items() if s.get("lag") == 0}
    missing = [(value, where) for value, where in c.acked.items() if value not in delivered]
    for value, (part, offset) in sorted(missing):
        if part in complete and not crashed:
            found["share_lost"].append([part, -1 if offset is None else offset, value])
    unseen = len(missing) - len(found["share_lost"])
    return summary(found, marks, causes, c.seconds, len(c.acked), len(delivered), unseen, twice, per_member)


def consume_tallies(rows: Iterable[tuple[Any, int, int]]) -> dict[Any, dict[int, int]]:
    """Rows (member, n, records delivered to it n times) added up into `{member: {n: records}}`."""
    out: dict[Any, dict[int, int]] = {}
    for member, n, records in rows:
        tally = out.setdefault(member, {})
        tally[n] = tally.get(n, 0) + records
    return out


def accepted_twice(acks: Iterable[Ack]) -> bool:
    """Whether two or more of a record's acknowledgements are ACCEPTs the client was told committed."""
    return sum(1 for a in acks if a.kind == "accept" and a.outcome == "ok") > 1


def summary(found: Mapping[str, list[list[int]]], marks: Mapping[str, list[int]], causes: Mapping[str, int],
            seconds: Mapping[int, Mapping[str, Any]], acked: int, delivered: int, unseen: int,
            twice: int, per_member: Mapping[Any, Mapping[int, int]]) -> dict[str, Any]:
    """The result from what was found: each kind's anomalous deliveries (all of them: the examples are the
    smallest MAX_EXAMPLES) and their completion times in ns (the marks are the earliest MAX_MARKS), the
    redeliveries by cause, the per-second tallies and the counts (`twice`: the records `accepted_twice`), and
    the `consume_counts` of each member (`per_member`: `{member: {n: records delivered to it n times}}`)."""
    counts = {k: len(found.get(k) or ()) for k in SHARE_KINDS}
    bad = any(counts.values())
    consume = {str(m): {str(n): k for n, k in sorted(t.items())} for m, t in sorted(per_member.items(), key=str)}
    return {"valid": False if bad else ("unknown" if unseen else True),
            "counts": {**counts, "acked": acked, "delivered": delivered, "unseen": unseen,
                       "redelivered": sum(causes.values()), "accepted_twice": twice,
                       "member_duplicates": sum(k for t in per_member.values() for n, k in t.items() if n > 1)},
            "consume_counts": consume,
            "redeliveries": dict(causes),
            "examples": {k: sorted(v)[:MAX_EXAMPLES] for k, v in found.items() if v},
            "per_second": [{"second": sec, **row} for sec, row in sorted(seconds.items())],
            "marks": {k: [round(ns / NS_PER_S, 3) for ns in sorted(v)[:MAX_MARKS]] for k, v in marks.items() if v}}


def _owner(open_acks: list[tuple[int, list[Any]]], told: Iterable[Any]) -> int:
    """The position in a process's open share-acks (oldest first) of the one a completion telling `told` belongs
    to: the oldest holding any of its records; the oldest when none does."""
    mine = {(a[0], a[1]) for a in told}
    return next((i for i, (_, acks) in enumerate(open_acks) if any((a[0], a[1]) in mine for a in acks)), 0)


def _left_between(process: int, after: int, before: int, left: Mapping[int, list[tuple[int, bool]]]) -> bool:
    """Whether `process` left the group (closed or crashed) between history indexes `after` and `before`."""
    return any(after < i < before for i, _ in left.get(process, ()))


def _concurrent(d: Delivery, others: list[Delivery], acks: list[Ack], left: Mapping[int, list[tuple[int, bool]]],
                lock_ns: int) -> bool:
    """Whether another member surely still held the record when `d` acquired it: Kafka gave it the record before `d`
    (a lower delivery count), it may have acquired it no earlier than its `acquired_from_ns`, and that was before
    `d`'s poll completed, by less than a lock duration; and by then it had neither acknowledged the record (an ack
    invoked, whatever came of it) nor left the group."""
    for e in others:
        # A lower count orders the acquisitions only if e may have been acquired before d's poll completed: one
        # whose client fetched it only afterwards was acquired later, whatever its count says (a count that went
        # back is `delivery_count_regressed`).
        if (e.process == d.process or e.count >= d.count or e.acquired_from >= d.completed
                or d.completed_ns - e.acquired_from_ns >= lock_ns):
            continue
        released = any(a.process == e.process and e.completed < a.invoked < d.completed for a in acks)
        if not released and not _left_between(e.process, e.completed, d.completed, left):
            return True
    return False


def _acquired_after(d: Delivery, a: Ack, ds: list[Delivery]) -> bool:
    """Whether Kafka surely acquired `d` for its member after the acknowledgement `a` completed: `a` completed before
    the earliest moment `d`'s client may have fetched it (its `acquired_from`), or before `d`'s poll was invoked
    while `d` carries a higher delivery count than the delivery `a` acknowledged (its member's last of the record
    before `a`; Kafka counts acquisitions in order). A record fetched ahead and handed to the application after
    another member's ACCEPT, with a lower count, was acquired before that ACCEPT: its lock expired, an allowed
    redelivery."""
    if a.completed is None or a.completed >= d.invoked:
        return False
    if a.completed < d.acquired_from:
        return True
    acked = [e.count for e in ds if e.process == a.process and e.completed < a.invoked]
    return not acked or d.count > acked[-1]


def _cause(prev: Delivery, acks: list[Ack], left: Mapping[int, list[tuple[int, bool]]], d: Delivery) -> str:
    """Why the record came back after `prev`: the first of CAUSES that applies."""
    between = [a for a in acks if prev.completed < a.invoked < d.completed]
    if any(a.kind == "release" for a in between):
        return "release"
    if any(a.kind in ("accept", "reject") and a.outcome != "ok" for a in between):
        return "failed_accept"
    if _left_between(prev.process, prev.completed, d.completed, left):
        return "crash"
    return "lock_timeout"
