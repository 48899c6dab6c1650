"""The txn workload on the Kafka Java client (`--client java`): one JVM runs every process's transactions.

Each process's thread (TxnClient's loop) draws its transactions from --seed
and records invoke and completion in the history as it does on librdkafka;
only the transaction itself runs in the JVM (workloads/java_client.py's
pipe). The JVM applies TxnClient.transact's rules for ok, fail and info, so a
history does not say which client ran.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from core.config import TestConfig
from core.history import History
from workloads.java_client import JavaClientError, JavaProcess, consumer_props, producer_props
from workloads.txn import TxnClient

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

    def _call(self, op: str, **request: Any) -> dict[str, Any]:
        return self.jvm.call(self.process, {"op": op, **request}, self.deadline)

    def open(self) -> None:
        """Open this process in the JVM: its consumer, assigned every partition from offset 0."""
        timeout_ms = self.cfg.producer.delivery_timeout_ms
        reply = self._call("open", topic=self.topic, partitions=self.partitions, timeout_ms=timeout_ms,
                           producer=producer_props(self.bootstrap, self.cfg.producer, self.txn_id),
                           consumer=consumer_props(self.bootstrap, f"txn{self.process}",
                                                   self.cfg.workload.txn_isolation, timeout_ms))
        if not reply.get("ok"):
            raise JavaClientError(f"process {self.process}: open failed: {reply.get('error')}")

    def close(self) -> None:
        """Close this process's producer and consumer in the JVM (if it still runs)."""
        try:
            self._call("close")
        except JavaClientError as e:
            log.info("process %d: close: %s", self.process, e)

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
        """Run `mops` in one transaction in the JVM; return the op's type, its completed micro-ops and the error."""
        reply = self._call("txn", mops=mops, abort=abort)
        if "type" not in reply:
            raise JavaClientError(f"process {self.process}: txn failed: {reply.get('error')}")
        self.has_producer = bool(reply.get("producer"))
        if reply.get("polled"):
            self.count("polled", int(reply["polled"]))
        return reply["type"], reply["value"], reply.get("error")
