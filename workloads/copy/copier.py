"""One copier slot of the copy workload: a group consumer of the input and a transactional
producer of the output, replaced after a fatal error or a crash.

A copier session subscribes to the input (group `kchaos-<seed>-copy`, auto-commit off, read_committed), makes a
producer with the slot's transactional.id `kchaos-<seed>-copy-<slot>` and calls init_transactions (an `init` op:
this fences every earlier producer of the slot and aborts its open transaction). Then, in a loop: poll up to
`--txn-size` records; begin; produce each value to the output partition `input partition mod output partitions`;
`send_offsets_to_transaction` of the consumer's position with its group metadata; commit. Each transaction is
one `copy` op (docs/history.md): `ok` committed, `fail` certainly not committed (aborted, or never asked to
commit), `info` unknown (the commit ended in an error). After an abortable error the copier aborts and seeks
back to the group's committed offsets; after any other error, or a failed abort, the session ends and a new
one (new consumer, new producer, same transactional.id) takes over. Rebalances are recorded as `assign` and
`revoke` ops (the callbacks a poll ran, in order, when it returns); a batch polled across a rebalance is dropped
and the copier seeks back to the committed offsets.

The session's steps run on a CopierClient: librdkafka's (`RdkafkaCopierClient`) or, with `--client java`,
the Kafka Java client's in the JVM (`JavaCopierClient`). The session here records the history and applies
the rules, so a history does not say which client ran.

`crash()` models a copier process that crashes mid-transaction: at its next return from the client holding a
batch (after producing it, before the commit), the session records its open copy op as `fail` and abandons its
consumer and producer without closing them: no abort, no LeaveGroup. A new session starts `restart_after`
seconds later. The crash waits out a rebalance and a session's init for that batch. Only when the slot's polls
find nothing `IDLE_POLLS` times running (the input read to its end) does it land between transactions.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.workloads.rebalance import Rebalance

log = logging.getLogger("kchaos.copier")

POLL_S = 1.0  # how long one poll for a batch waits at most
IDLE_POLLS = 3  # empty polls running after which a pending crash stops waiting for a batch


def copy_group(seed: int) -> str:
    """The consumer group every copier joins."""
    return f"kchaos-{seed}-copy"


def copy_txn_id(seed: int, slot: int) -> str:
    """The transactional.id of a copier slot, the same for every session of the slot."""
    return f"kchaos-{seed}-copy-{slot}"


class Crashed(Exception):
    """The session was crashed (crash-client) at a return from the client."""


class ClientError(Exception):
    """A client call that failed outright (init, poll, rewind); its text is the error recorded."""


class TxnFailed(Exception):
    """A transaction's step that failed: `committing` if the commit had been asked for, `aborted` if the
    transaction's abort was confirmed (the copier then rewinds; otherwise its session ends)."""

    def __init__(self, error: str, committing: bool, aborted: bool):
        super().__init__(error)
        self.committing, self.aborted = committing, aborted


class CopierClient(Protocol):
    """One session's consumer (a member of the copy group) and transactional producer. Each call returns when
    the client does; none records history."""

    def init(self, txn_id: str) -> None:
        """A fresh producer with `txn_id` after init_transactions (fencing earlier ones); ClientError if not."""

    def subscribe(self, topic: str) -> None:
        """Join the group, subscribed to `topic`; rebalances then show in `poll`."""

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], list[Rebalance]]:
        """Up to `max_records` input records `[partition, offset, value]` and the rebalances seen meanwhile, in
        order; ClientError if the poll failed."""

    def produce(self, topic: str, sent: list[list[int]]) -> None:
        """Begin a transaction, produce each `[partition, value]` of `sent` to `topic`, flush; TxnFailed."""

    def commit(self) -> list[list[int]]:
        """Send the consumer's positions to the transaction and commit it; the `[partition, offset]` committed, or
        TxnFailed."""

    def rewind(self) -> list[list[int]]:
        """Seek every assigned partition to the group's committed offset (-2: the log start); the
        `[partition, offset]` sought to, or ClientError."""

    def close(self) -> None:
        """End the session: close the consumer (leaving the group) and drop the producer."""

    def abandon(self) -> None:
        """A crash: let the consumer and producer go unclosed, with no abort and no LeaveGroup (librdkafka's consumer is
        destroyed at once, as a killed process's; the JVM keeps the Java client's until it exits)."""

    def close_abandoned(self) -> None:
        """At the end of the run, close what `abandon` left (a consumer's close may hang: the caller bounds it)."""


class Copier:
    """One copier slot: sessions started in turn (a new one after a crash or a fatal error) until stopped."""

    def __init__(self, cfg: TestConfig, history: History, slot: int, input_topic: str, interval: float,
                 count: Callable[..., None], make_client: Callable[[int], CopierClient]):
        self.cfg, self.history, self.slot = cfg, history, slot
        self.input_topic, self.interval, self.count = input_topic, interval, count
        self.make_client = make_client  # a new session's client, given the slot
        self._crash = threading.Event()
        self.restart_after = 0.0
        self.abandoned: list[CopierClient] = []  # crashed sessions' clients, let go of at the end of the run
        self.sessions = 0
        self.initialized = threading.Event()  # set once a session's init_transactions has succeeded

    def crash(self, restart_after: float) -> None:
        """Crash this slot's session mid-transaction, at its next return from the client holding a batch (see the
        module doc)."""
        self.restart_after = restart_after
        self._crash.set()

    def run(self, stopped: Callable[[], bool]) -> None:
        """Run sessions until `stopped()`; after a crash the next starts `restart_after` seconds later."""
        after_crash = False
        while not stopped():
            self.sessions += 1
            try:
                session = _Session(self, after_crash=after_crash)
                session.run(stopped, self._crash)
            except Exception:
                # Java client's pipe can fail: the slot goes on with a new session, as a restarted process would
                log.exception("copier %d: session ended by an error", self.slot)
            after_crash = self._crash.is_set()  # else the session ended on an error, or the run is stopping
            if after_crash:
                self._crash.clear()
                wait = self.restart_after
            else:
                wait = 1.0 if not stopped() else 0.0  # a session that ended on an error: a short pause
            deadline = time.monotonic() + wait
            while not stopped() and time.monotonic() < deadline:
                time.sleep(0.1)

    def close_abandoned(self) -> None:
        """Let go of what crashes abandoned (each client's `close_abandoned`: their callbacks record nothing)."""
        clients, self.abandoned = self.abandoned, []
        for c in clients:
            try:
                c.close_abandoned()
            except Exception as e:
                log.info("copier %d: letting go of an abandoned client: %s", self.slot, e)


class _Session:
    """One client (consumer and producer) of a copier slot, from init to close, error or crash."""

    def __init__(self, copier: Copier, after_crash: bool):
        c, cfg = copier, copier.cfg
        self.c, self.h, self.p = c, c.history, c.slot
        self.after_crash = after_crash
        self.out_topic, self.out_parts = cfg.topic.name, cfg.topic.partitions
        self.size = cfg.workload.options.txn_size
        self.dead = False
        self.idle = 0  # polls running that found nothing
        self.generation: int | None = None
        self.client = c.make_client(c.slot)

    def run(self, stopped: Callable[[], bool], crashed: threading.Event) -> None:
        try:
            if not self._init(stopped, crashed):
                return
            op = self.h.invoke(self.p, "subscribe", topic=self.c.input_topic)
            self.client.subscribe(self.c.input_topic)
            self.h.complete(op, "ok", topic=self.c.input_topic)
            due = time.monotonic()
            while not stopped():
                if not self._step(crashed):
                    return
                if self.c.interval:
                    due = max(due + self.c.interval, time.monotonic() - self.c.interval)
                    while not stopped() and time.monotonic() < due:
                        time.sleep(min(0.05, due - time.monotonic()))
        except Crashed:
            self.dead = True
            self.client.abandon()
            self.c.abandoned.append(self.client)
        finally:
            if not self.dead:
                self._close()

    def _init(self, stopped: Callable[[], bool], crashed: threading.Event) -> bool:
        """A producer with the slot's transactional.id, init_transactions retried until it succeeds; False if
        stopped first."""
        txn_id = copy_txn_id(self.c.cfg.seed, self.p)
        while not stopped():
            op = self.h.invoke(self.p, "init", transactional_id=txn_id, after_crash=self.after_crash)
            try:
                self.client.init(txn_id)
            except ClientError as e:
                self.h.complete(op, "fail", transactional_id=txn_id, error=str(e))
                time.sleep(1)
                continue
            self.h.complete(op, "ok", transactional_id=txn_id, after_crash=self.after_crash)
            self.c.initialized.set()
            return True
        return False

    def _check_crash(self, crashed: threading.Event) -> None:
        if crashed.is_set():
            raise Crashed()

    def _step(self, crashed: threading.Event) -> bool:
        """Poll a batch and copy it in one transaction; False when the session must end."""
        try:
            records, events = self.client.poll(self.size, POLL_S)
        except ClientError as e:
            log.info("copier %d: consume failed: %s", self.p, e)
            return True
        for ev in events:
            self._rebalance(ev)
        self.c.count("polled", len(records))
        self.idle = 0 if records else self.idle + 1
        if not records:
            if self.idle >= IDLE_POLLS:
                self._check_crash(crashed)  # nothing left to hold: the crash lands between transactions
            return True
        if events:
            # Some of the batch may come from partitions this copier no longer owns: copy none of it. A pending
            # crash waits for the next batch.
            return self._rewind()
        return self._copy(records, crashed)  # a crash now comes mid-transaction, after the batch is produced

    def _copy(self, records: list[list[int]], crashed: threading.Event) -> bool:
        op = self.h.invoke(self.p, "copy", value=records)
        self.c.count("send")
        sent = [[p % self.out_parts, v] for p, _, v in records]
        try:
            self.client.produce(self.out_topic, sent)
            if crashed.is_set():
                self.h.complete(op, "fail", value=records, sent=sent,
                                error="crashed (crash-client) before the commit: the transaction stays open")
                self.c.count("fail")
                raise Crashed()
            offsets = self.client.commit()
        except TxnFailed as e:
            type_ = "fail" if not e.committing or e.aborted else "info"
            self.h.complete(op, type_, value=records, sent=sent, error=str(e))
            self.c.count(type_)
            return self._rewind() if e.aborted else False
        self.h.complete(op, "ok", value=records, sent=sent, offsets=offsets,
                        **({"generation": self.generation} if self.generation is not None else {}))
        self.c.count("ok")
        self.c.count("copied", len(records))
        return True

    def _rewind(self) -> bool:
        """Seek every assigned partition back to the group's committed offset; False (end the session) if that
        cannot be done."""
        op = self.h.invoke(self.p, "rewind", topic=self.c.input_topic)
        try:
            to = self.client.rewind()
        except ClientError as e:
            self.h.complete(op, "fail", topic=self.c.input_topic, error=str(e))
            return False
        self.h.complete(op, "ok", topic=self.c.input_topic, offsets=to)
        return True

    def _close(self) -> None:
        self.dead = True
        try:
            self.client.close()
        except Exception as e:
            log.info("copier %d: closing the consumer: %s", self.p, e)

    def _rebalance(self, ev: Rebalance) -> None:
        if ev.f == "assign":
            self.generation = ev.generation
        fields = {"topic": self.c.input_topic, "partitions": ev.partitions, "generation": ev.generation,
                  **({"lost": True} if ev.lost else {})}
        op = self.h.invoke(self.p, ev.f, **fields)
        self.h.complete(op, "ok", **fields)
