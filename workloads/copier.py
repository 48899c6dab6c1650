"""One copier slot of the copy workload (workloads/copy.py): a group consumer of the input and a transactional
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
`revoke` ops; a batch polled across a rebalance is dropped and the copier seeks back to the committed offsets.

`crash()` models a crashed copier process: at its next return from the client, mid-transaction if it holds a
batch (after producing it, before the commit), the session records its open copy op as `fail` and abandons its
consumer and producer without closing them: no abort, no LeaveGroup. A new session starts `restart_after`
seconds later.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from core.config import TestConfig, txn_timeout_ms
from core.history import History
from workloads.clients import make_group_consumer, make_producer, to_records
from workloads.rebalance import drop, generation_of, leave

log = logging.getLogger("kchaos.copier")

POLL_S = 1.0  # how long one poll for a batch waits at most


def copy_group(seed: int) -> str:
    """The consumer group every copier joins."""
    return f"kchaos-{seed}-copy"


def copy_txn_id(seed: int, slot: int) -> str:
    """The transactional.id of a copier slot, the same for every session of the slot."""
    return f"kchaos-{seed}-copy-{slot}"


class Crashed(Exception):
    """The session was crashed (crash-client) at a return from the client."""


class Copier:
    """One copier slot: sessions started in turn (a new one after a crash or a fatal error) until stopped."""

    def __init__(self, cfg: TestConfig, bootstrap: str, history: History, slot: int, input_topic: str,
                 interval: float, count: Callable[..., None]):
        self.cfg, self.bootstrap, self.history, self.slot = cfg, bootstrap, history, slot
        self.input_topic, self.interval, self.count = input_topic, interval, count
        self._crash = threading.Event()
        self.restart_after = 0.0
        self.abandoned: list[Any] = []  # crashed sessions' consumers and producers, dropped at the end of the run
        self.sessions = 0

    def crash(self, restart_after: float) -> None:
        """Crash this slot's session at its next return from the client (see the module doc)."""
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
            except Exception:  # noqa: BLE001 - librdkafka's wrapper can raise anything (SystemError on close): the
                # slot goes on with a new session, as a restarted process would
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
        """Let go of what crashes abandoned, unclosed (`drop`): their consumers' callbacks record nothing."""
        drop(self.abandoned)


class _Session:
    """One consumer and one producer of a copier slot, from init to close, error or crash."""

    def __init__(self, copier: Copier, after_crash: bool):
        c, cfg = copier, copier.cfg
        self.c, self.h, self.p = c, c.history, c.slot
        self.after_crash = after_crash
        self.out_topic, self.out_parts = cfg.topic.name, cfg.topic.partitions
        self.size = cfg.workload.txn_size
        self.timeout = cfg.producer.delivery_timeout_ms / 1000
        self.dead = False
        self.rebalanced = False
        self.generation: int | None = None
        self.consumer = make_group_consumer(c.bootstrap, f"copy{c.slot}", copy_group(cfg.seed), auto_commit=False)
        self.producer: Producer | None = None

    def run(self, stopped: Callable[[], bool], crashed: threading.Event) -> None:
        try:
            if not self._init(stopped, crashed):
                return
            op = self.h.invoke(self.p, "subscribe", topic=self.c.input_topic)
            self.consumer.subscribe([self.c.input_topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                                    on_lost=self._on_lost)
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
            self.c.abandoned += [self.consumer, self.producer]
        finally:
            if not self.dead:
                self._close()

    def _init(self, stopped: Callable[[], bool], crashed: threading.Event) -> bool:
        """A producer with the slot's transactional.id, init_transactions retried until it succeeds; False if
        stopped first."""
        txn_id = copy_txn_id(self.c.cfg.seed, self.p)
        while not stopped():
            self._check_crash(crashed)
            producer = make_producer(self.c.bootstrap, self.c.cfg.producer, txn_id, extra={
                "transactional.id": txn_id, "transaction.timeout.ms": txn_timeout_ms(self.c.cfg.producer)})
            op = self.h.invoke(self.p, "init", transactional_id=txn_id, after_crash=self.after_crash)
            try:
                producer.init_transactions(self.timeout)
                self.h.complete(op, "ok", transactional_id=txn_id, after_crash=self.after_crash)
                self.producer = producer
                return True
            except KafkaException as e:
                self.h.complete(op, "fail", transactional_id=txn_id, error=str(e.args[0] if e.args else e))
                time.sleep(1)
        return False

    def _check_crash(self, crashed: threading.Event) -> None:
        if crashed.is_set():
            raise Crashed()

    def _step(self, crashed: threading.Event) -> bool:
        """Poll a batch and copy it in one transaction; False when the session must end."""
        self.rebalanced = False
        try:
            msgs = self.consumer.consume(num_messages=self.size, timeout=POLL_S)
        except KafkaException as e:
            log.info("copier %d: consume failed: %s", self.p, e)
            return True
        records, _ = to_records(msgs)
        self.c.count("polled", len(records))
        if not records:
            self._check_crash(crashed)
            return True
        if self.rebalanced:
            # Some of the batch may come from partitions this copier no longer owns: copy none of it.
            self._check_crash(crashed)
            return self._rewind()
        return self._copy(records, crashed)  # a crash now comes mid-transaction, after the batch is produced

    def _copy(self, records: list[list[int]], crashed: threading.Event) -> bool:
        producer = self.producer
        assert producer is not None
        op = self.h.invoke(self.p, "copy", value=records)
        self.c.count("send")
        sent = [[p % self.out_parts, v] for p, _, v in records]
        committing = False
        try:
            producer.begin_transaction()
            for out, v in sent:
                producer.produce(self.out_topic, value=str(v), partition=out)
            producer.flush(self.timeout)
            if crashed.is_set():
                self.h.complete(op, "fail", value=records, sent=sent,
                                error="crashed (crash-client) before the commit: the transaction stays open")
                self.c.count("fail")
                raise Crashed()
            positions = [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(), self.timeout)
            committing = True
            producer.commit_transaction(self.timeout)
        except (KafkaException, BufferError) as e:
            err = e.args[0] if isinstance(e, KafkaException) and e.args else None
            text = str(err if err is not None else e)
            aborted = self._abort(err)
            type_ = "fail" if not committing or aborted else "info"
            self.h.complete(op, type_, value=records, sent=sent, error=text)
            self.c.count(type_)
            return self._rewind() if aborted else False
        self.h.complete(op, "ok", value=records, sent=sent, offsets=[[tp.partition, tp.offset] for tp in positions],
                        **({"generation": self.generation} if self.generation is not None else {}))
        self.c.count("ok")
        self.c.count("copied", len(records))
        return True

    def _abort(self, err: KafkaError | None) -> bool:
        """Abort after an abortable error; True if the abort was confirmed."""
        if err is None or not err.txn_requires_abort():
            return False
        try:
            assert self.producer is not None
            self.producer.abort_transaction(self.timeout)
            return True
        except KafkaException as e:
            log.info("copier %d: abort failed: %s", self.p, e)
            return False

    def _rewind(self) -> bool:
        """Seek every assigned partition back to the group's committed offset; False (end the session) if that
        cannot be done."""
        op = self.h.invoke(self.p, "rewind", topic=self.c.input_topic)
        try:
            committed = self.consumer.committed(self.consumer.assignment(), timeout=self.timeout)
            to = []
            for tp in committed:
                tp = TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                self.consumer.seek(tp)
                to.append([tp.partition, tp.offset])
        except KafkaException as e:
            self.h.complete(op, "fail", topic=self.c.input_topic, error=str(e.args[0] if e.args else e))
            return False
        self.h.complete(op, "ok", topic=self.c.input_topic, offsets=to)
        return True

    def _close(self) -> None:
        self.dead = True
        leave(self.consumer)

    # --- rebalance callbacks (run inside consume or close, on this thread) --------------
    def _rebalance(self, f: str, partitions: list[TopicPartition], **extra: Any) -> None:
        if self.dead:
            return
        self.rebalanced = True
        if f == "assign":
            self.generation = generation_of(self.consumer)
        parts = sorted(tp.partition for tp in partitions)
        gen = {"generation": self.generation if f == "assign" else generation_of(self.consumer)}
        op = self.h.invoke(self.p, f, topic=self.c.input_topic, partitions=parts, **gen, **extra)
        self.h.complete(op, "ok", topic=self.c.input_topic, partitions=parts, **gen, **extra)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance("assign", partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance("revoke", partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalance("revoke", partitions, lost=True)
