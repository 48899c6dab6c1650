"""Consumers of one consumer group (`--consumer-mode subscribe`): they subscribe, rebalance and commit.

Each member is one process. It records, in this order (docs/history.md):

- `subscribe` once per consumer it starts;
- `poll` ops: what the client returned, each completed when it is recorded (that is "processing"), and
  carrying `generation`, the group generation of the assignment it read under;
- with `--group-commit sync`, after each poll that returned records, a `commit` op of the next offset of
  every partition it returned (`offsets`: `[[partition, offset], ...]`), ok, fail (the coordinator refused
  it) or info (the outcome is unknown);
- every rebalance callback, as it happens: `assign` (partitions added, `generation`) or `revoke`
  (partitions revoked, or `"lost": true` when the assignment was lost), each an invocation and its
  completion. A callback runs inside the client's poll, so the poll op open at that moment is completed
  first (and, with sync commits, committed: the usual commit-on-revoke), and a new one opened after it:
  records returned before a rebalance and after it are never in one poll op, and an `assign` ends the
  consumer's stream for the checkers as a manual assignment does.

The generation comes from `kchaos.workloads.rebalance`, which turns the callbacks into events.

`crash()` models a client crash: at its next return from the client, the member records its open poll
as `info` (the records it held were never processed) and abandons its consumer without closing it (no
commit of its own, no LeaveGroup: the coordinator evicts it when max.poll.interval.ms or the session
runs out, and with auto-commit its background commits go on until then). The process then starts a
new consumer, same client.id, after `restart_after` seconds.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kchaos.core.history import History, Op
from kchaos.workloads.clients import make_group_consumer, to_records
from kchaos.workloads.rebalance import Rebalance, drop, group_id, leave, subscribe

log = logging.getLogger("kchaos.group")

BATCH = 500  # records a poll op holds at most
POLL_S = 1.0  # how long a poll op collects records at most
# Commit errors by which the coordinator refused the commit: it certainly did not happen.
REFUSED = frozenset({KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS,
                     KafkaError.FENCED_INSTANCE_ID, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._ASSIGNMENT_LOST,
                     KafkaError.STALE_MEMBER_EPOCH if hasattr(KafkaError, "STALE_MEMBER_EPOCH") else -1})


def commit_outcome(err: KafkaError) -> str:
    """"fail" when the coordinator refused the commit, else "info" (it may have happened)."""
    return "fail" if err.code() in REFUSED else "info"


class Member:
    """One process of the group: consumers started in turn (a new one after each crash) until stopped."""

    def __init__(self, bootstrap: str, history: History, process: int, topic: str, seed: int,
                 commit: str, protocol: str, count: Callable[[str, int], None]):
        self.bootstrap, self.history, self.process, self.topic = bootstrap, history, process, topic
        self.seed, self.commit, self.protocol, self.count = seed, commit, protocol, count
        self._crash = threading.Event()
        self.restart_after = 0.0
        self.abandoned: list[Consumer] = []  # crashed consumers, closed only at the end of the run
        self.held: set[int] = set()  # the partitions its live consumer was last assigned

    def crash(self, restart_after: float) -> None:
        """Crash this member's consumer at its next return from the client (see the module doc)."""
        self.restart_after = restart_after
        self._crash.set()

    def run(self, stopped: Callable[[], bool]) -> None:
        """Run consumers until `stopped()`: each until it crashes, the next after `restart_after` seconds."""
        while not stopped():
            session = _Session(self)
            session.run(stopped, self._crash)
            if self._crash.is_set():
                self._crash.clear()
                deadline = time.monotonic() + self.restart_after
                while not stopped() and time.monotonic() < deadline:
                    time.sleep(0.1)

    def close_abandoned(self) -> None:
        """Let go of the consumers crashes abandoned, unclosed (`drop`): their callbacks record nothing."""
        drop(self.abandoned)


class _Session:
    """One consumer of a member, from subscribe to close or crash."""

    def __init__(self, member: Member):
        self.m = member
        self.dead = False  # crashed: its callbacks record nothing from then on
        self.poll_op: Op | None = None
        self.batch: list[list[int]] = []
        self.errors: list[str] = []
        self.generation: int | None = None
        self.consumer = make_group_consumer(member.bootstrap, f"c{member.process}", group_id(member.seed),
                                            auto_commit=member.commit == "auto", protocol=member.protocol)

    def run(self, stopped: Callable[[], bool], crashed: threading.Event) -> None:
        m, h = self.m, self.m.history
        op = h.invoke(m.process, "subscribe", topic=m.topic)
        subscribe(self.consumer, m.topic, self._rebalance, live=lambda: not self.dead)
        h.complete(op, "ok", topic=m.topic)
        try:
            while not stopped():
                self._open()
                deadline = time.monotonic() + POLL_S
                while len(self.batch) < BATCH and (left := deadline - time.monotonic()) > 0 and not stopped():
                    try:
                        msg = self.consumer.poll(min(left, 0.2))
                    except KafkaException as e:
                        # What was returned before the error is still processed (and committed): dropping
                        # it while later records get committed would skip it for the whole group.
                        self.errors.append(str(e.args[0] if e.args else e))
                        break
                    if msg is not None:
                        records, errors = to_records([msg])
                        self.batch += records
                        self.errors += errors
                    if crashed.is_set():
                        self._crash_now()
                        return
                self._process()
        finally:
            if not self.dead:
                self._process()
                leave(self.consumer)

    # --- poll ops ---------------------------------------------------------------------
    def _open(self) -> None:
        if self.poll_op is None:
            self.poll_op = self.m.history.invoke(self.m.process, "poll", topic=self.m.topic)
            self.batch, self.errors = [], []

    def _close(self, type_: str, **extra: Any) -> list[list[int]]:
        """Complete the open poll op (if any); return the records it recorded."""
        if self.poll_op is None:
            return []
        gen = {"generation": self.generation} if self.generation is not None else {}
        records = self.batch if type_ == "ok" else []
        if type_ == "ok":
            extra = {"records": records, **({"errors": self.errors} if self.errors else {}), **extra}
        self.m.history.complete(self.poll_op, type_, **gen, **extra)
        self.m.count("polled", len(records))
        self.poll_op, self.batch, self.errors = None, [], []
        return records

    def _process(self, commit: bool = True) -> None:
        """Record the open poll (processing it), then, with sync commits, commit what it returned."""
        records = self._close("ok")
        if commit and records and self.m.commit == "sync":
            self._commit(records)

    def _commit(self, records: list[list[int]]) -> None:
        nxt: dict[int, int] = {}
        for p, o, _ in records:
            nxt[p] = max(nxt.get(p, 0), o + 1)
        offsets = sorted(nxt.items())
        h = self.m.history
        op = h.invoke(self.m.process, "commit", offsets=[list(x) for x in offsets])
        try:
            done = self.consumer.commit(offsets=[TopicPartition(self.m.topic, p, o) for p, o in offsets],
                                        asynchronous=False)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            outcome = commit_outcome(err) if isinstance(err, KafkaError) else "info"
            h.complete(op, outcome, offsets=[list(x) for x in offsets], error=str(err if err is not None else e))
            return
        bad = [tp.error for tp in done or [] if tp.error is not None]
        if bad:
            h.complete(op, commit_outcome(bad[0]) if isinstance(bad[0], KafkaError) else "info",
                       offsets=[list(x) for x in offsets], error=str(bad[0]))
        else:
            h.complete(op, "ok", offsets=[list(x) for x in offsets])

    def _crash_now(self) -> None:
        self.dead = True
        self.m.held = set()
        lost = len(self.batch)
        self._close("info", error=f"crashed (crash-client): {lost} records returned but never processed")
        self.m.abandoned.append(self.consumer)
        # The consumer's rebalance callbacks hold this session; without this reference back, dropping the
        # abandoned consumer frees it at once, outside a garbage collection that its destroy could block for good.
        self.consumer = None  # type: ignore[assignment]

    # --- rebalance callbacks (run inside poll or close, on this thread) ----------------
    def _rebalance(self, r: Rebalance) -> None:
        was_open = self.poll_op is not None
        # A lost assignment cannot be committed: its partitions may already be someone else's.
        self._process(commit=not r.lost)
        if r.f == "assign":
            self.generation = r.generation
            self.m.held |= set(r.partitions)
        else:
            self.m.held -= set(r.partitions)
        extra = {"generation": r.generation, **({"lost": True} if r.lost else {})}
        op = self.m.history.invoke(self.m.process, r.f, topic=self.m.topic, partitions=r.partitions, **extra)
        self.m.history.complete(op, "ok", topic=self.m.topic, partitions=r.partitions, **extra)
        if was_open:
            self._open()
