"""A copier session's clients on the Kafka Java client (`--client java` with `--workload copy`).

Each step of a copier's session is one request to the shared JVM (a `JavaProcess`), run by
the slot's thread there (the JVM's `KchaosCopier`): the consumer is a classic-protocol member of the copy
group at read_committed, the producer transactional (KIP-890's protocol with kafka-clients 4.x on 4.x brokers).
The session in the harness records the history and checks for a crash between the steps, as on librdkafka.
"""
from __future__ import annotations

import logging
from typing import Any

from kchaos.core.config import TestConfig
from kchaos.workloads.copy.copier import ClientError, TxnFailed, copy_group
from kchaos.workloads.java_client import JavaClientError, JavaProcess, group_consumer_props, producer_props
from kchaos.workloads.rebalance import Rebalance

log = logging.getLogger("kchaos.copier.java")


def rebalances(events: list[dict[str, Any]]) -> list[Rebalance]:
    """The poll reply's rebalance events as the session's Rebalance values, in order."""
    return [Rebalance(e["f"], sorted(e["partitions"]), e.get("generation"), bool(e.get("lost"))) for e in events]


class JavaCopierClient:
    """The `CopierClient` in the JVM. A new session replaces the slot's clients there; `abandon`
    keeps the crashed ones unclosed until the JVM exits. JavaClientError (the JVM died or went silent) ends the
    session."""

    def __init__(self, cfg: TestConfig, bootstrap: str, slot: int, input_topic: str, *, jvm: JavaProcess):
        self.cfg, self.bootstrap, self.slot, self.jvm = cfg, bootstrap, slot, jvm
        timeout_ms = cfg.producer.delivery_timeout_ms
        # A reply is due within the client's own timeouts (flush, send offsets, commit, abort: each the
        # delivery timeout).
        self.deadline = 5 * timeout_ms / 1000 + 30
        consumer = group_consumer_props(bootstrap, f"copy{slot}", copy_group(cfg.seed), cfg.workload.options.txn_size,
                                        timeout_ms)
        self._call("open", input=input_topic, timeout_ms=timeout_ms, consumer=consumer)

    def _call(self, step: str, **request: Any) -> dict[str, Any]:
        reply = self.jvm.call(self.slot, {"op": f"copier.{step}", **request}, self.deadline)
        if not reply.get("ok") and "aborted" not in reply:
            raise ClientError(reply.get("error") or f"copier.{step} failed")
        return reply

    def init(self, txn_id: str) -> None:
        """A fresh producer with `txn_id` in the JVM after initTransactions; ClientError if that failed."""
        self._call("init", producer=producer_props(self.bootstrap, self.cfg.producer, txn_id))

    def subscribe(self, topic: str) -> None:
        """Subscribe the JVM's consumer to the input (the topic `open` was given)."""
        self._call("subscribe")

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], list[Rebalance]]:
        """One poll (max.poll.records is --txn-size) and its rebalances; ClientError if it threw."""
        reply = self._call("poll", timeout_ms=int(timeout * 1000))
        if reply.get("error"):
            raise ClientError(reply["error"])
        return reply["records"][:max_records], rebalances(reply["events"])

    def produce(self, topic: str, sent: list[list[int]]) -> None:
        """Begin, send every value to its partition, flush, in the JVM; TxnFailed."""
        self._txn(self._call("produce", topic=topic, sent=sent))

    def commit(self) -> list[list[int]]:
        """Send the positions to the transaction and commit it, in the JVM; TxnFailed."""
        return self._txn(self._call("commit"))["offsets"]

    @staticmethod
    def _txn(reply: dict[str, Any]) -> dict[str, Any]:
        if not reply.get("ok"):
            raise TxnFailed(str(reply.get("error")), bool(reply.get("committing")), bool(reply.get("aborted")))
        return reply

    def rewind(self) -> list[list[int]]:
        """Seek to the group's committed offsets in the JVM; ClientError."""
        return self._call("rewind")["offsets"]

    def close(self) -> None:
        """Close the session's consumer (LeaveGroup) and producer in the JVM, if it still runs."""
        try:
            self._call("close")
        except (JavaClientError, ClientError) as e:
            log.info("copier %d: close: %s", self.slot, e)

    def abandon(self) -> None:
        """Leave the session's clients in the JVM unclosed (the JVM closes them as it exits)."""
        try:
            self._call("abandon")
        except (JavaClientError, ClientError) as e:
            log.info("copier %d: abandon: %s", self.slot, e)

    def close_abandoned(self) -> None:
        """Nothing: the JVM closes what crashes abandoned when the workload closes it."""
