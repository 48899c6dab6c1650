"""A labelled corpus of share-workload histories (Kafka share groups, KIP-932): a correct share group's run with
anomalies planted at known records.

`generate(seed, ...)` returns the ops, test.json, `planted[kind]` for every kind of checkers/share/reference.py
(SHARE_KINDS): the exact set of `(partition, offset, value)` the reference's `examples` list, and `causes`: the
allowed redeliveries the reference counts by cause. `write` stores a corpus as a run directory; `write_large`
streams a big one (about a given number of deliveries) to disk in bounded memory. Deterministic by seed.

The run (docs/history.md, "The share workload"), one op at a time on one clock (every invocation is followed at
once by its completion, so no process ever has two ops outstanding):

- main: producers (processes 0..producers-1) send to the partitions; members (the next `members` processes)
  poll batches of the available records (lowest offsets first; each acquisition adds 1 to the record's delivery
  count and locks it for lock_ms from the poll's completion), then acknowledge them with the ack mix
  accept=90, release=6, reject=2, none=2 (`commit: sync`: every acknowledgement of a partition in one commit
  shares its outcome; now and then it is `info`, unknown, applied or not). A released record is available again;
  an accepted or rejected one is archived. A `none` record is held past its lock: the member acknowledges it
  (ACCEPT) once the lock has run out, and is told `fail`; by then another member may have it already. With
  `crashes`, a member now and then crashes right after a poll (`share-leave` info `crashed (crash-client)`), at
  least once a run: what it held comes back when its locks expire. When every member waits out a lock and the
  backlog is long, time passes with no op (the producers are rate-limited), so the live records stay few. A
  record whose lock ends (release, expiry, failed commit) with its count at `limit` is archived, never delivered
  again. A poll now and then ends `info` (nothing acquired).
- wind-down: members acknowledge what they hold (the holders once their locks ran out) and close.
- drain: two drainer processes poll and ACCEPT everything left, waiting out the locks of crashed members; the
  first then reads `share-state`: lag 0 on every partition.

Each plant is a short block run atomically during the main phase, on a record of its own (sent by the block and
never handed to the simulated group), with two distinct members A and B:

- share_lost: the record is sent (ok) and never delivered; only planted when `crashes` is off, as the reference
  counts no loss in a run where a member crashed.
- redelivered_after_accept / _after_reject: A polls it (count 1), ACCEPTs (REJECTs) it, told ok; B polls it
  (count 2) and ACCEPTs it.
- over_delivery_limit: it is delivered `limit` times (counts 1..limit, A and B in turn), each RELEASEd, then once
  more with count limit+1, and ACCEPTed.
- delivery_count_regressed: A polls it (count 1) and RELEASEs it; B polls (nothing), then polls it with count 1
  again and ACCEPTs it.
- concurrent_acquisition: A polls (nothing), then polls it (count 1); B polls it (count 2) right after; A's ACCEPT
  is told fail, B's ok.

As often as each kind, an allowed block (`fetched_ahead`): A polls (nothing); a lock later B polls the record
(count 2) and ACCEPTs it, told ok; then A's poll returns it with count 1, fetched ahead before B had it, and A
ACCEPTs it: a lock timeout, not `redelivered_after_accept`.

Each causes exactly one anomalous delivery, of its own kind; their redeliveries count by cause as any other's.
Plants need `limit >= 2` (a count of 2 must be allowed) and `members >= 2`.
"""
from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kchaos.checkers.share.reference import CAUSES, SHARE_KINDS

__all__ = ["ACK_MIX", "KINDS", "ShareCorpus", "generate", "write", "write_large"]

TOPIC = "kchaos"
KINDS = tuple(SHARE_KINDS)
FETCHED_AHEAD = "fetched_ahead"  # a block planted as often as each kind, which the guarantee allows
ACK_MIX = "accept=90,release=6,reject=2,none=2"
_MIX = ((0.90, "accept"), (0.96, "release"), (0.98, "reject"), (1.0, "none"))  # cumulative
CRASHED = "crashed (crash-client)"
POLL_ERROR = "org.apache.kafka.common.errors.TimeoutException: Timeout expired while fetching"
COMMIT_ERROR = "org.apache.kafka.common.errors.TimeoutException: Timeout expired while committing"
MS = 1_000_000
BATCH = 20  # records per member poll, at most
DRAIN_BATCH = 50
BACKLOG = 200  # available records under which producers send more often
POLL_INFO_RATE = 0.005  # member polls that end info
COMMIT_INFO_RATE = 0.003  # share-ack completions of type info (every outcome unknown)
OUTCOME_INFO_RATE = 0.01  # partitions of a share-ack whose outcome is info
CRASH_RATE = 0.005  # member polls after which it crashes (crashes=True)
PLANT_WINDOW = 5000  # plants are placed within the first this many sends
RELEASE, FAILED, CRASH = 1, 2, 4  # what happened to a record since its last delivery, as the reference's _cause

Key = tuple[int, int]  # (partition, offset)
Label = tuple[int, int, int]  # (partition, offset, value)


@dataclass(frozen=True)
class ShareCorpus:
    """A history (`ops`, in history order), its test.json (`test`), `planted[kind]` for every kind of SHARE_KINDS
    (the `(partition, offset, value)` of each anomalous delivery; empty when none) and `causes[cause]`, the
    allowed redeliveries the reference counts by cause (CAUSES)."""

    ops: list[dict[str, Any]]
    test: dict[str, Any]
    planted: dict[str, set[Label]]
    causes: dict[str, int]


class _Rec:
    """A live record (sent and not yet archived): its value, delivery count, who holds it (and under which
    acquisition), who it was last delivered to and what happened to it since (RELEASE | FAILED | CRASH)."""

    __slots__ = ("acq", "count", "flags", "holder", "last", "value")

    def __init__(self, value: int) -> None:
        self.value = value
        self.count = 0
        self.holder: int | None = None
        self.acq = -1
        self.last: int | None = None  # None: never delivered
        self.flags = 0


class _Member:
    """A member process: `idle` (will poll), `polled` (holds `batch` unacknowledged) or `waiting` (holds `held`
    past their lock, acknowledging them at `wake`)."""

    __slots__ = ("acq", "batch", "held", "process", "state", "wake")

    def __init__(self, process: int) -> None:
        self.process = process
        self.state = "idle"
        self.batch: list[Key] = []
        self.acq = -1
        self.held: list[Key] = []
        self.wake = 0


class _Sim:
    """One seeded share run; iterate `ops()` once, then read `planted`, `causes`, `deliveries`."""

    def __init__(self, seed: int, *, records: int | None, deliveries: int | None, partitions: int, producers: int,
                 members: int, limit: int, lock_ms: int, per_kind: int, crashes: bool) -> None:
        if partitions < 1 or producers < 1 or members < 1 or lock_ms < 1 or limit < 1 or per_kind < 0:
            raise ValueError("need partitions, producers, members, lock_ms, limit >= 1 and per_kind >= 0")
        if per_kind and (members < 2 or limit < 2):
            raise ValueError("plants need members >= 2 and limit >= 2")
        self.rng = rng = random.Random(seed)
        self.records, self.target = records, deliveries
        self.partitions, self.producers, self.limit = partitions, producers, limit
        self.lock_ns = lock_ms * MS
        self.gap = max(2, min(10 * MS, self.lock_ns // 500))  # an op's time after the one before: below 2*gap
        self.members = [_Member(producers + i) for i in range(members)]
        self.drainers = (producers + members, producers + members + 1)
        self.crashes = crashes
        self.index = self.now = self.value = self.sent = self.deliveries = self.acqs = 0
        self.ends = [0] * partitions
        self.live: dict[Key, _Rec] = {}
        self.pool: list[list[int]] = [[] for _ in range(partitions)]  # min-heaps of available offsets
        self.available = 0
        self.locks: list[tuple[int, int, list[Key]]] = []  # heap: (expiry ns, acquisition, its records)
        self.out: list[dict[str, Any]] = []
        self.causes = dict.fromkeys(CAUSES, 0)
        self.planted: dict[str, set[Label]] = {k: set() for k in KINDS}
        planned = records if records is not None else (deliveries or 0) // 2
        window = max(1, min(planned, PLANT_WINDOW))
        kinds = [k for k in KINDS if k != "share_lost" or not crashes] + [FETCHED_AHEAD]
        self.plants = sorted(((rng.randrange(window), k) for k in kinds for _ in range(per_kind)), reverse=True)
        self.crash_at = rng.randrange(max(1, planned // 2)) if crashes else -1

    # -- emitting ops, and the reference's causes kept as they go -------------------------------------------------

    def _op(self, process: int, type_: str, f: str, **fields: Any) -> None:
        self.now += int(self.rng.random() * self.gap * 2)
        self.out.append({"index": self.index, "time": self.now, "process": process, "type": type_, "f": f,
                         "topic": TOPIC, **fields})
        self.index += 1

    def _send(self, live: bool = True) -> tuple[Key, _Rec]:
        r = self.rng.random
        proc, p = int(r() * self.producers), int(r() * self.partitions)
        self.value += 1
        o, rec = self.ends[p], _Rec(self.value)
        self.ends[p] += 1
        self._op(proc, "invoke", "send", partition=p, value=rec.value, producer=proc)
        self._op(proc, "ok", "send", partition=p, value=rec.value, producer=proc, offset=o)
        if live:
            self.live[(p, o)] = rec
            heapq.heappush(self.pool[p], o)
            self.available += 1
        return (p, o), rec

    def _delivered(self, rec: _Rec, process: int, allowed: bool = True) -> None:
        """A delivery of `rec` to `process` completed: a redelivery the guarantee allows counts by the first cause
        that applies (a wrongful one, a plant's, counts as its anomaly only)."""
        if rec.last is not None and allowed:
            f = rec.flags
            self.causes["release" if f & RELEASE else "failed_accept" if f & FAILED else
                        "crash" if f & CRASH else "lock_timeout"] += 1
        rec.flags, rec.last = 0, process
        self.deliveries += 1

    def _poll_ok(self, process: int, recs: list[tuple[Key, _Rec]], allowed: bool = True) -> None:
        self._op(process, "invoke", "share-poll")
        for _, rec in recs:
            self._delivered(rec, process, allowed)
        self._op(process, "ok", "share-poll", records=[[p, o, rec.value, rec.count] for (p, o), rec in recs])

    def _ack(self, process: int, acks: list[tuple[Key, str, str]], info: bool = False) -> None:
        """A share-ack of `acks` ((key, kind, outcome)); `info`: its completion is of type info, without acks."""
        self._op(process, "invoke", "share-ack", acks=[[p, o, kind] for (p, o), kind, _ in acks])
        for key, kind, outcome in acks:
            rec = self.live.get(key)
            if rec is not None:
                if kind == "release":
                    rec.flags |= RELEASE
                elif info or outcome != "ok":
                    rec.flags |= FAILED
        if info:
            self._op(process, "info", "share-ack", error=COMMIT_ERROR)
        else:
            self._op(process, "ok", "share-ack", acks=[[p, o, kind, out] for (p, o), kind, out in acks])

    def _leave(self, process: int, crashed: bool) -> None:
        self._op(process, "invoke", "share-leave")
        if crashed:
            self._op(process, "info", "share-leave", error=CRASHED)
        else:
            self._op(process, "ok", "share-leave")
        for rec in self.live.values():
            if rec.last == process:
                rec.flags |= CRASH

    # -- the group ---------------------------------------------------------------------------------------------

    def _free(self, key: Key, rec: _Rec) -> None:
        """`rec`'s acquisition ended without an applied ACCEPT or REJECT: available again, or archived at the
        delivery limit."""
        rec.holder = None
        if rec.count >= self.limit:
            del self.live[key]
        else:
            heapq.heappush(self.pool[key[0]], key[1])
            self.available += 1

    def _expire(self) -> None:
        while self.locks and self.locks[0][0] <= self.now:
            _, acq, keys = heapq.heappop(self.locks)
            for key in keys:
                rec = self.live.get(key)
                if rec is not None and rec.acq == acq and rec.holder is not None:
                    self._free(key, rec)

    def _poll(self, process: int, most: int, errors: bool = True) -> tuple[list[Key], int]:
        """A share-poll of up to `most` available records (lowest offsets first, from a random partition on);
        the records acquired and the acquisition's id (-1: the poll ended info)."""
        self._expire()
        rng = self.rng
        if errors and rng.random() < POLL_INFO_RATE:
            self._op(process, "invoke", "share-poll")
            self._op(process, "info", "share-poll", error=POLL_ERROR)
            return [], -1
        k, batch = rng.randint(1, most), list[Key]()
        start = rng.randrange(self.partitions)
        for i in range(self.partitions):
            p = (start + i) % self.partitions
            heap = self.pool[p]
            while heap and len(batch) < k:
                batch.append((p, heapq.heappop(heap)))
            if len(batch) >= k:
                break
        self.available -= len(batch)
        self.acqs += 1
        acq = self.acqs
        recs = []
        for key in batch:
            rec = self.live[key]
            rec.count += 1
            rec.holder, rec.acq = process, acq
            recs.append((key, rec))
        self._poll_ok(process, recs)
        if batch:
            heapq.heappush(self.locks, (self.now + self.lock_ns + 1, acq, batch))
        return batch, acq

    def _commit(self, process: int, acq: int, kinds: list[tuple[Key, str]]) -> None:
        """A sync commit of `kinds` (key, accept|release|reject) acquired under `acq`: one outcome per partition,
        `fail` when a record of it lost its lock, now and then `info` (applied or not, per partition)."""
        self._expire()
        rng = self.rng
        info = rng.random() < COMMIT_INFO_RATE
        outcome: dict[int, str] = {}
        applied: dict[int, bool] = {}
        for key, _ in kinds:
            p = key[0]
            rec = self.live.get(key)
            lost = rec is None or rec.acq != acq or rec.holder != process
            if lost:
                outcome[p], applied[p] = "fail", False
            elif p not in outcome:
                outcome[p] = "info" if info or rng.random() < OUTCOME_INFO_RATE else "ok"
                applied[p] = outcome[p] == "ok" or rng.random() < 0.5
        self._ack(process, [(key, kind, outcome[key[0]]) for key, kind in kinds], info=info)
        for key, kind in kinds:
            if not applied[key[0]]:
                continue  # still acquired until its lock expires
            rec = self.live[key]
            if kind == "release":
                self._free(key, rec)
            else:
                rec.holder = None
                del self.live[key]

    def _acknowledge(self, m: _Member, crash: bool) -> None:
        """Member `m` acknowledges its last poll's records (or crashes before it does)."""
        batch, m.batch = m.batch, []
        m.state = "idle"
        if crash:
            self._leave(m.process, crashed=True)
            return
        kinds, held = [], []
        for key in batch:
            r = self.rng.random()
            kind = next(k for c, k in _MIX if r < c)
            if kind == "none":
                held.append(key)
            else:
                kinds.append((key, kind))
        if kinds:
            self._commit(m.process, m.acq, kinds)
        if held:
            m.state, m.held = "waiting", held
            m.wake = self.now + self.lock_ns + 1 + int(self.rng.random() * self.lock_ns / 2)

    def _late_ack(self, m: _Member) -> None:
        """Member `m` ACCEPTs the records it held past their lock: every one is refused."""
        self._ack(m.process, [(key, "accept", "fail") for key in m.held])
        m.state, m.held = "idle", []

    def _member_step(self, m: _Member) -> bool:
        """One op pair of member `m`; False when it has none to do yet (waiting for its held records' locks)."""
        if m.state == "idle":
            m.batch, m.acq = self._poll(m.process, BATCH)
            if m.batch:
                m.state = "polled"
        elif m.state == "polled":
            crash = False
            if self.crashes:
                if 0 <= self.crash_at <= self.sent:
                    crash, self.crash_at = True, -1
                else:
                    crash = self.rng.random() < CRASH_RATE
            self._acknowledge(m, crash)
        elif self.now >= m.wake:
            self._late_ack(m)
        else:
            return False
        return True

    # -- plants ------------------------------------------------------------------------------------------------

    def _plant(self, kind: str) -> None:
        a, b = (m.process for m in self.rng.sample(self.members, 2))
        key, rec = self._send(live=False)

        def deliver(process: int, count: int, allowed: bool = True) -> None:
            rec.count = count
            self._poll_ok(process, [(key, rec)], allowed)

        def ack(process: int, kind: str, outcome: str = "ok") -> None:
            self._ack(process, [(key, kind, outcome)])

        self.live[key] = rec  # while the block runs, so that _ack keeps its causes; never in the pool
        if kind in ("redelivered_after_accept", "redelivered_after_reject"):
            deliver(a, 1)
            ack(a, "accept" if kind == "redelivered_after_accept" else "reject")
            deliver(b, 2, allowed=False)
            ack(b, "accept")
        elif kind == "over_delivery_limit":
            for count in range(1, self.limit + 1):
                deliver(a if count % 2 else b, count)
                ack(a if count % 2 else b, "release")
            deliver(b if self.limit % 2 else a, self.limit + 1, allowed=False)
            ack(b if self.limit % 2 else a, "accept")
        elif kind == "delivery_count_regressed":
            deliver(a, 1)
            ack(a, "release")
            self._poll_ok(b, [])  # B's client cannot have fetched it ahead before A had it
            deliver(b, 1)
            ack(b, "accept")
        elif kind == FETCHED_AHEAD:
            # A's client fetched it ahead (count 1), its lock expired, B got it (count 2) and accepted it; A's poll
            # then hands out A's own older copy: a lock timeout, not a redelivery after B's ACCEPT.
            self._poll_ok(a, [])
            self.now += self.lock_ns
            deliver(b, 2)
            ack(b, "accept")
            deliver(a, 1)
            ack(a, "accept")
        elif kind == "concurrent_acquisition":
            # A polls just before, so its client cannot have fetched the record ahead long ago: surely A's lock.
            self._poll_ok(a, [])
            deliver(a, 1)
            deliver(b, 2, allowed=False)
            ack(a, "accept", "fail")
            ack(b, "accept")
        del self.live[key]
        if kind in self.planted:
            self.planted[kind].add((key[0], key[1], rec.value))

    # -- the run -----------------------------------------------------------------------------------------------

    def _sending(self) -> bool:
        if self.records is not None:
            return self.sent < self.records
        return self.deliveries + self.available < (self.target or 0)

    def ops(self) -> Iterator[dict[str, Any]]:
        rng, out = self.rng, self.out
        while self._sending():
            while self.plants and self.plants[-1][0] <= self.sent:
                self._plant(self.plants.pop()[1])
            r = rng.random()
            if (r < 0.5 and self.available < BACKLOG) or (r < 0.1 and self.available < 10 * BACKLOG):
                self._send()
                self.sent += 1
            else:
                first = int(rng.random() * len(self.members))
                if not any(self._member_step(self.members[(first + i) % len(self.members)])
                           for i in range(len(self.members))):
                    # every member waits out a lock: the producers send only while the backlog is short
                    if self.available < BACKLOG:
                        self._send()
                        self.sent += 1
                    else:
                        self.now = max(self.now, min(m.wake for m in self.members))
            yield from out
            out.clear()
        while self.plants:  # a run too short for its plants' places
            self._plant(self.plants.pop()[1])
        yield from self._wind_down()
        yield from self._drain()

    def _wind_down(self) -> Iterator[dict[str, Any]]:
        if self.crash_at >= 0:  # the run's one sure crash has not come yet: now (on one more record if need be)
            m = next((m for m in self.members if m.state == "polled"), None)
            if m is None:
                m = next((m for m in self.members if m.state == "idle"), None) or \
                    min(self.members, key=lambda m: m.wake)
                if m.state == "waiting":
                    self.now = max(self.now, m.wake)
                    self._late_ack(m)
                self._expire()
                if not self.available:
                    self._send()
                m.batch, m.acq = self._poll(m.process, BATCH, errors=False)
            self._acknowledge(m, crash=True)
            self.crash_at = -1
        for m in self.members:
            if m.state == "polled":
                self._acknowledge(m, crash=False)
        for m in sorted(self.members, key=lambda m: m.wake):
            if m.state == "waiting":
                self.now = max(self.now, m.wake)
                self._late_ack(m)
        for m in self.members:
            self._leave(m.process, crashed=False)
        yield from self.out
        self.out.clear()

    def _drain(self) -> Iterator[dict[str, Any]]:
        turn = 0
        while self.live:
            self._expire()
            d = self.drainers[turn % 2]
            turn += 1
            if not self.available:  # all left is locked (a crashed member's, or an unknown commit's): wait it out
                if not self.locks:
                    raise AssertionError("live records neither available nor locked")
                self._op(d, "invoke", "share-poll")
                self._op(d, "ok", "share-poll", records=[])
                self.now = max(self.now, self.locks[0][0])
            else:
                batch, _ = self._poll(d, DRAIN_BATCH, errors=False)
                self._ack(d, [(key, "accept", "ok") for key in batch])
                for key in batch:
                    del self.live[key]
            yield from self.out
            self.out.clear()
        for d in self.drainers:
            self._op(d, "invoke", "share-poll")
            self._op(d, "ok", "share-poll", records=[])
        for d in self.drainers:
            self._leave(d, crashed=False)
        partitions = {str(p): {"start": end, "end": end, "lag": 0} for p, end in enumerate(self.ends)}
        self._op(self.drainers[0], "invoke", "share-state")
        self._op(self.drainers[0], "ok", "share-state", partitions=partitions)
        yield from self.out
        self.out.clear()


def _test(seed: int, partitions: int, producers: int, members: int, limit: int, lock_ms: int) -> dict[str, Any]:
    return {"name": "corpus", "seed": seed,
            "topic": {"name": TOPIC, "partitions": partitions, "replication_factor": 3, "min_insync": 2,
                      "unclean": False},
            "producer": {"acks": "all", "idempotence": True},
            "workload": {"kind": "share", "producers": producers, "consumers": members, "in_flight": 1,
                         "client": "java",
                         "options": {"ack_mix": ACK_MIX, "lock_ms": lock_ms, "delivery_limit": limit,
                                     "commit": "sync"}}}


def generate(seed: int, *, records: int, partitions: int = 3, producers: int = 2, members: int = 3, limit: int = 5,
             lock_ms: int = 5000, per_kind: int = 2, crashes: bool = False) -> ShareCorpus:
    """A share run of `records` sends (plus one per plant) by `producers` producers to `partitions` partitions,
    consumed by `members` members of one share group (delivery count limit `limit`, acquisition lock `lock_ms`),
    then drained, with `per_kind` plants of each kind of SHARE_KINDS (share_lost only without `crashes`: with
    `crashes`, at least one member crashes, on one more record if the run ended before its crash had any, and the
    reference counts no loss in such a run). ValueError for plants with members < 2 or limit < 2."""
    sim = _Sim(seed, records=records, deliveries=None, partitions=partitions, producers=producers, members=members,
               limit=limit, lock_ms=lock_ms, per_kind=per_kind, crashes=crashes)
    ops = list(sim.ops())
    return ShareCorpus(ops=ops, test=_test(seed, partitions, producers, members, limit, lock_ms),
                       planted=sim.planted, causes=sim.causes)


def write(corpus: ShareCorpus, run_dir: Path) -> Path:
    """Write `corpus` as run_dir/history.jsonl (compact JSON lines) and run_dir/test.json; return the history's
    path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "test.json").write_text(json.dumps(corpus.test, indent=2) + "\n", encoding="utf-8")
    history = run_dir / "history.jsonl"
    with open(history, "wb") as fh:
        for op in corpus.ops:
            fh.write(orjson.dumps(op, option=orjson.OPT_APPEND_NEWLINE))
    return history


def write_large(run_dir: Path, seed: int, deliveries: int, *, per_kind: int = 10, partitions: int = 6,
                producers: int = 4, members: int = 4, limit: int = 5, lock_ms: int = 5000,
                crashes: bool = False, chunk: int = 20_000) -> dict[str, Any]:
    """Stream a share run of about `deliveries` deliveries (records delivered, redeliveries included) to
    run_dir/history.jsonl, `chunk` lines at a time, with run_dir/test.json and run_dir/labels.json; return the
    labels: `planted` (kind -> sorted [partition, offset, value] lists), `causes`, `deliveries`, `lines`. The
    plants are placed within the first sends; memory holds only the records not yet archived."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    sim = _Sim(seed, records=None, deliveries=deliveries, partitions=partitions, producers=producers,
               members=members, limit=limit, lock_ms=lock_ms, per_kind=per_kind, crashes=crashes)
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    lines, buf = 0, []
    with open(run_dir / "history.jsonl", "wb") as fh:
        for op in sim.ops():
            buf.append(dumps(op, option=newline))
            if len(buf) >= chunk:
                fh.write(b"".join(buf))
                lines += len(buf)
                buf.clear()
        fh.write(b"".join(buf))
        lines += len(buf)
    test = _test(seed, partitions, producers, members, limit, lock_ms)
    (run_dir / "test.json").write_text(json.dumps(test, indent=2) + "\n", encoding="utf-8")
    labels = {"planted": {k: sorted([list(t) for t in v]) for k, v in sim.planted.items()},
              "causes": dict(sim.causes), "deliveries": sim.deliveries, "lines": lines}
    (run_dir / "labels.json").write_text(json.dumps(labels) + "\n", encoding="utf-8")
    return labels
