"""The transactional client, after Jepsen's Kafka test: each op is a transaction of up to 4 micro-ops.

A micro-op is `["send", key, value]` or `["poll"]`. Every process has a
transactional producer of its own (its own `transactional.id`) and a consumer
of its own (a `TxnConsumer`): assigned every partition from offset 0,
or with `--consumer-mode subscribe` a member of the run's group. With
`--txn-sub-p`, an op is instead, as Jepsen's `sub-p`, an `assign` (a seeded
subset of partitions) or a `subscribe`. An op runs its micro-ops
inside one transaction: begin, the sends and polls in order,
`send_offsets_to_transaction` for what the polls consumed, then commit, or
abort for a seeded share of ops. Keys map to partitions (key mod partitions).
The history shapes are in docs/history.md.

Outcomes: `ok` committed; `fail` certainly not committed (aborted, or an error
before the commit was asked for); `info` unknown (the commit timed out or
ended in any other error). After an error the producer cannot vouch for, a
new one with the same `transactional.id` fences the old one.

`crash-client` (`crash`) kills a process's clients as a killed process would
lose them: at its next return from the client (between two micro-ops, before
the commit, or as the commit returns) the process abandons its producer and
consumer, closing neither. The producer's queued sends are purged and it is
never polled again, so nothing it still held reaches a broker after the
crash (requests already on the wire may); it is destroyed at the end of the
run. The process records a `crash` line and, `restart_after` seconds later,
starts a new producer with the same `transactional.id`, whose
init_transactions fences the old one and aborts its open transaction, and a
new consumer (in subscribe mode a new member: a real rebalance). The
transaction the crash cut ends `fail` if its commit was never asked for (the
fencing aborts it), else `info`.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from kchaos.core.config import TestConfig, txn_timeout_ms
from kchaos.core.history import History, Op
from kchaos.workloads.clients import keep_report, make_producer
from kchaos.workloads.threads import timed
from kchaos.workloads.txn.consumer import TxnConsumer

if TYPE_CHECKING:
    pass

log = logging.getLogger("kchaos.txn")

MAX_MICRO_OPS = 4
KEYS_PER_PARTITION = 4


def draw_txn(rng: random.Random, partitions: int, next_value: Callable[[], int]) -> list[list[Any]]:
    """1..MAX_MICRO_OPS micro-ops, each a send (a fresh value from `next_value`, to a key of
    KEYS_PER_PARTITION * partitions) or a poll, with equal odds; deterministic for `rng`'s state."""
    ops: list[list[Any]] = []
    for _ in range(rng.randint(1, MAX_MICRO_OPS)):
        if rng.random() < 0.5:
            ops.append(["send", rng.randrange(KEYS_PER_PARTITION * partitions), next_value()])
        else:
            ops.append(["poll"])
    return ops


def draw_sub(rng: random.Random, partitions: int) -> tuple[str, list[int]]:
    """Jepsen's sub-p op: `("assign", a non-empty random subset of the partitions)` or `("subscribe", [])`,
    with equal odds."""
    if rng.random() < 0.5:
        return "subscribe", []
    return "assign", sorted(rng.sample(range(partitions), rng.randint(1, partitions)))



def txn_id(seed: int, process: int) -> str:
    """The transactional.id of a process, the same for each of its producers."""
    return f"kchaos-{seed}-txn-{process}"

class Crashed(Exception):
    """The process was crashed (crash-client) at this return from the client."""


def partition_of(key: int, partitions: int) -> int:
    """The partition a key's sends go to."""
    return key % partitions


class TxnClient:
    """One process: a transactional producer and a consumer (librdkafka's), running transactions until told to
    stop. The seeded draw and the history are here; JavaTxnClient runs the same loop on the Java client."""

    def __init__(self, cfg: TestConfig, bootstrap: str, history: History, process: int,
                 count: Callable[..., None]):
        self.cfg, self.bootstrap, self.history, self.process, self.count = cfg, bootstrap, history, process, count
        self.topic, self.partitions = cfg.topic.name, cfg.topic.partitions
        w = cfg.workload
        self.rng = random.Random(f"{cfg.seed}/txn/{process}")
        self._values = (process + w.producers * i for i in range(1 << 62))  # unique across processes
        self.interval = 0.0 if w.rate == "max" else w.producers / float(w.rate)
        self.timeout = cfg.producer.delivery_timeout_ms / 1000
        self.txn_id = txn_id(cfg.seed, process)
        self.producer: Producer | None = None
        self.reader = TxnConsumer(cfg, bootstrap, history, process)
        # a stream of its own: with --txn-sub-p 0 the other draws are the same
        self.sub_rng = random.Random(f"{cfg.seed}/txn-sub/{process}")
        self._crash = threading.Event()
        self.restart_after = 0.0
        self.abandoned: list[Producer] = []

    def run(self, stopped: Callable[[], bool]) -> None:
        """Run transactions at this process's share of the rate until `stopped()`."""
        self.open()
        try:
            due = time.monotonic()
            while not stopped():
                if not self.ready() and not self._init_producer(stopped):
                    break
                due = max(due + self.interval, time.monotonic()) if self.interval else due
                if self.cfg.workload.options.sub_p and self.sub_rng.random() < self.cfg.workload.options.sub_p:
                    self.resubscribe(*draw_sub(self.sub_rng, self.partitions))
                    continue
                mops = draw_txn(self.rng, self.partitions, lambda: next(self._values))
                abort = self.rng.random() < self.cfg.workload.options.abort_p
                op = self.history.invoke(self.process, "txn", value=mops)
                self.count("send")
                type_, done, error = self.transact(mops, abort)
                self.history.complete(op, type_, value=done, **({"error": error} if error else {}))
                self.count(type_)
                if self._crash.is_set():
                    self._die(stopped)
                if self.interval:
                    time.sleep(max(0.0, due - time.monotonic()))
        finally:
            self.close()

    def open(self) -> None:
        """Start this process's consumer (its `TxnConsumer`)."""
        self.reader.start()

    def close(self) -> None:
        """Close the consumers; the producers go with the client."""
        self.reader.close()
        self.abandoned.clear()

    def resubscribe(self, f: str, partitions: list[int]) -> None:
        """A sub-p op: `assign` `partitions` by hand, or `subscribe`; recorded with its rebalance lines inside."""
        op = self.history.invoke(self.process, f, value=partitions if f == "assign" else self.topic)
        try:
            self.reader.assign(partitions) if f == "assign" else self.reader.subscribe()
        except self.reader.ERRORS as e:
            self.history.complete(op, "info", error=str(e.args[0] if e.args else e))
            return
        self.history.complete(op, "ok")

    def crash(self, restart_after: float) -> None:
        """Crash this process at its next return from the client (the module doc)."""
        self.restart_after = restart_after
        self._crash.set()

    def _die(self, stopped: Callable[[], bool]) -> None:
        """Abandon the producer and consumer, record the crash, wait `restart_after`, start a new consumer (the
        next op's producer is new too)."""
        self._crash.clear()
        self.abandon()
        self.history.append(Op(self.process, "info", "crash", {"restart_after": self.restart_after,
                                                               "error": "crashed (crash-client)"}))
        deadline = time.monotonic() + self.restart_after
        while not stopped() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.reader.start(again=True)

    def abandon(self) -> None:
        """Leave the producer and consumer as a crash does: unclosed, the producer's queued sends purged."""
        if self.producer is not None:
            # Nothing queued may leave after the "kill"; a killed process would not send it.
            self.producer.purge(in_queue=True, in_flight=True, blocking=False)
            self.abandoned.append(self.producer)
            self.producer = None
        self.reader.abandon()

    def ready(self) -> bool:
        """Whether a producer can run the next transaction (else `init` makes one)."""
        return self.producer is not None

    def _init_producer(self, stopped: Callable[[], bool]) -> bool:
        """A fresh producer with this process's transactional.id (fencing any earlier one); False if stopped
        before one could be had."""
        while not stopped():
            if self.init():
                return True
            time.sleep(1)
        return False

    def init(self) -> bool:
        """One attempt at a fresh transactional producer; True if `init_transactions` succeeded."""
        producer = make_producer(self.bootstrap, self.cfg.producer, self.txn_id, extra={
            "transactional.id": self.txn_id,
            "transaction.timeout.ms": txn_timeout_ms(self.cfg.producer)})
        try:
            timed(self.timeout, producer.init_transactions)
            self.producer = producer
            return True
        except KafkaException as e:
            log.info("process %d: init_transactions failed: %s", self.process, e)
            return False

    def transact(self, mops: list[list[Any]], abort: bool) -> tuple[str, list[list[Any]], str | None]:
        """Run `mops` in one transaction; return the op's type, its completed micro-ops and the error."""
        producer, reader = self.producer, self.reader
        assert producer is not None
        acks: dict[int, tuple[KafkaError | None, Message]] = {}
        done: list[list[Any]] = [["send", m[1], m[2], partition_of(m[1], self.partitions), None] if m[0] == "send"
                                 else ["poll", None] for m in mops]
        committing = False
        try:
            producer.begin_transaction()
            for i, (f, *args) in enumerate(mops):
                self._crash_point()
                if f == "send":
                    k, v = args
                    producer.produce(self.topic, key=str(k), value=str(v), partition=done[i][3],
                                     on_delivery=keep_report(acks, i))
                else:
                    records = reader.poll()
                    done[i][1] = records
                    self.count("polled", len(records))
            self._crash_point()
            positions = reader.positions() if reader.commits_offsets() else []
            if positions and any(m[0] == "poll" for m in mops):
                timed(self.timeout, producer.send_offsets_to_transaction, positions, reader.group_metadata())
            if abort:
                timed(self.timeout, producer.abort_transaction)
                return "fail", self._offsets(done, acks), "aborted on purpose"
            timed(self.timeout, producer.flush)  # serves the delivery reports: each send's offset
            self._crash_point()
            committing = True
            timed(self.timeout, producer.commit_transaction)
            if self._crash.is_set():  # it died as the commit returned, never learning the outcome
                return "info", self._offsets(done, acks), "crashed (crash-client) during the commit"
            return "ok", self._offsets(done, acks), None
        except Crashed:
            # The commit was never asked for: the next producer's init_transactions aborts the transaction.
            return "fail", self._offsets(done, acks), "crashed (crash-client) before the commit"
        except (KafkaException, BufferError, SystemError) as e:
            if isinstance(e, SystemError):
                # A fatal error raised while librdkafka served a delivery report surfaces as a SystemError
                # caused by the KafkaException; anything else is not the client's error to classify.
                if not isinstance(e.__cause__, KafkaException):
                    raise
                e = e.__cause__
            err = e.args[0] if isinstance(e, KafkaException) and e.args else None
            text = str(err if err is not None else e)
            aborted = self._abort(err)
            # Without a commit request the transaction can never commit: the abort, the coordinator's timeout
            # or the next producer's fencing ends it.
            if not committing or aborted:
                return "fail", self._offsets(done, acks), text
            return "info", self._offsets(done, acks), text

    def _crash_point(self) -> None:
        if self._crash.is_set():
            raise Crashed()

    def _abort(self, err: KafkaError | None) -> bool:
        """Abort after an error; True if the abort was confirmed. Otherwise the producer is dropped, and the
        next op's producer (same transactional.id) fences it."""
        producer = self.producer
        if err is not None and err.txn_requires_abort() and producer is not None:
            try:
                timed(self.timeout, producer.abort_transaction)
                return True
            except KafkaException as e:
                log.info("process %d: abort failed: %s", self.process, e)
        self.producer = None
        return False

    def _offsets(self, done: list[list[Any]], acks: dict[int, tuple[KafkaError | None, Message]]) -> list[list[Any]]:
        if self.producer is not None:
            self.producer.poll(0)  # reports of purged sends
        for i, (err, msg) in acks.items():
            if err is None and (offset := msg.offset()) is not None and offset >= 0:
                done[i][4] = offset
        return done
