"""The txn workload on the Kafka Java client (`--client java`): one JVM runs every process's transactions.

Each process's thread (TxnClient's loop) draws its transactions and sub-p ops
from --seed and records invoke and completion in the history as it does on
librdkafka; only the client calls run in the JVM (a `JavaProcess`'s
pipe). The JVM applies TxnClient.transact's rules for ok, fail and info, and
the consumer's rebalances come back as events the harness records as the same
`rebalance` lines (`JavaTxnConsumer`), so a history does not say
which client ran.

crash-client: `crash` tells the JVM at once (a request it reads as it
arrives, not queued behind the transaction in progress), and the JVM cuts the
transaction at its next return from the client (between two micro-ops, before
the commit, or as the commit returns) with TxnClient's outcomes. The process
then has the JVM abandon its producer and consumer: kept unclosed until the
JVM exits, no abort, no LeaveGroup. Unlike librdkafka's, the Java producer
cannot purge what it holds: it is simply never used again, so sends of the
cut transaction still queued in it may reach a broker after the crash, inside
a transaction that never commits (the next producer's initTransactions fences
its epoch and aborts it). After `restart_after` seconds a new consumer and,
at the next op, a new producer with the same transactional.id start in the
JVM.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.workloads.java_client import JavaClientError, JavaProcess, producer_props
from kchaos.workloads.txn.client import TxnClient
from kchaos.workloads.txn.java_consumer import JavaTxnConsumer

log = logging.getLogger("kchaos.txn.java")


class JavaTxnClient(TxnClient):
    """TxnClient's process with its producer and consumer in the JVM: the same seeded ops, the same history."""

    def __init__(self, cfg: TestConfig, bootstrap: str, history: History, process: int,
                 count: Callable[..., None], *, jvm: JavaProcess):
        super().__init__(cfg, bootstrap, history, process, count)
        self.jvm = jvm
        self.has_producer = False
        # A reply is due within the client's own timeouts (init, flush, commit, abort: each the delivery timeout).
        self.deadline = 5 * self.timeout + 30
        self.reader: JavaTxnConsumer = JavaTxnConsumer(cfg, bootstrap, history, process, call=self._call)
        self._crashing = threading.Lock()  # a crash's notice to the JVM and its event, as one

    def _call(self, op: str, **request: Any) -> dict[str, Any]:
        return self.jvm.call(self.process, {"op": op, **request}, self.deadline)

    def open(self) -> None:
        """Open this process in the JVM, then its consumer (assigned every partition from offset 0, or a member
        of the run's group)."""
        reply = self._call("open", topic=self.topic, partitions=self.partitions,
                           timeout_ms=self.cfg.producer.delivery_timeout_ms,
                           producer=producer_props(self.bootstrap, self.cfg.producer, self.txn_id))
        if not reply.get("ok"):
            raise JavaClientError(f"process {self.process}: open failed: {reply.get('error')}")
        self.reader.start()

    def close(self) -> None:
        """Close this process's producer and consumer in the JVM (if it still runs), recording a member's
        revocation."""
        try:
            self.reader.close()
        except JavaClientError as e:
            log.info("process %d: close: %s", self.process, e)

    def crash(self, restart_after: float) -> None:
        """Crash this process at its next return from the client (the module doc)."""
        # The JVM first: once the loop sees the crash, its `abandon` must reach the JVM after this.
        with self._crashing:
            try:
                self.jvm.notify(self.process, {"op": "crash"})
            except JavaClientError as e:
                log.info("process %d: crash: %s", self.process, e)
            super().crash(restart_after)

    def abandon(self) -> None:
        """Have the JVM keep the producer and consumer unclosed until it exits (no purge: the module doc)."""
        self._call("abandon")
        self.has_producer = False
        self.reader.abandon()

    def ready(self) -> bool:
        """Whether the JVM holds a producer for the next transaction."""
        return self.has_producer

    def init(self) -> bool:
        """One attempt at a fresh transactional producer in the JVM (initTransactions fences the earlier one)."""
        reply = self._call("init")
        self.has_producer = bool(reply.get("ok"))
        if not self.has_producer:
            log.info("process %d: initTransactions failed: %s", self.process, reply.get("error"))
        return self.has_producer

    def transact(self, mops: list[list[Any]], abort: bool) -> tuple[str, list[list[Any]], str | None]:
        """Run `mops` in one transaction in the JVM, its rebalances recorded; return the op's type, its completed
        micro-ops and the error."""
        reply = self._call("txn", mops=mops, abort=abort, offsets=self.reader.commits_offsets())
        self.reader.record(reply.get("events") or [])
        if "type" not in reply:
            raise JavaClientError(f"process {self.process}: txn failed: {reply.get('error')}")
        self.has_producer = bool(reply.get("producer"))
        if reply.get("polled"):
            self.count("polled", int(reply["polled"]))
        if reply.get("crashed"):
            with self._crashing:  # the JVM may reply before `crash` has set the event: wait for it (a no-op then)
                self._crash.set()
        return reply["type"], reply["value"], reply.get("error")
