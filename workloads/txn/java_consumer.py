"""A txn process's consumer on the Kafka Java client: `TxnConsumer`, its client in the JVM.

The state that decides the history's lines stays here, as on librdkafka: which partitions are assigned by hand,
whether the consumer is a group member, whether a transaction commits its positions. The consumer itself is the
JVM's (`KchaosTxnConsumer`): `assign` and `subscribe` replace it there, and every rebalance
callback of the current member (inside a poll, or the close of a leaving member) comes back as an event with
the reply of the request it ran in; `record` writes each as the `rebalance` line librdkafka's callback writes
(TxnConsumer._on_rebalance), before the op that request belongs to completes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.workloads.java_client import consumer_props, group_consumer_props
from kchaos.workloads.rebalance import Rebalance
from kchaos.workloads.txn.consumer import BATCH, TxnConsumer

Call = Callable[..., dict[str, Any]]  # (op, **request) -> reply, the process's request to the JVM


class JavaConsumerError(RuntimeError):
    """The JVM could not replace the process's consumer (its reply's error)."""


def rebalances(events: list[dict[str, Any]]) -> list[Rebalance]:
    """A reply's rebalance events as Rebalance values, in order."""
    return [Rebalance(e["f"], sorted(e["partitions"]), e.get("generation"), bool(e.get("lost"))) for e in events]


class JavaTxnConsumer(TxnConsumer):
    """TxnConsumer with its consumer in the JVM, reached through `call`: the same lines, the same offsets committed.
    `assign` and `subscribe` raise JavaConsumerError (or JavaClientError: the JVM is gone)."""

    ERRORS = (JavaConsumerError,)

    def __init__(self, cfg: TestConfig, bootstrap: str, history: History, process: int, *, call: Call):
        super().__init__(cfg, bootstrap, history, process)
        self.call = call
        timeout_ms = cfg.producer.delivery_timeout_ms
        w = cfg.workload
        self.manual_props = {**consumer_props(bootstrap, f"txn{process}", w.options.isolation, timeout_ms),
                             "group.id": self.group}
        self.member_props = group_consumer_props(bootstrap, f"txn{process}", self.group, BATCH, timeout_ms,
                                                 protocol=w.group_protocol, isolation=w.options.isolation)

    def start(self, again: bool = False) -> None:
        """The process's consumer as its mode says (TxnConsumer.start), in the JVM."""
        if self.subscribe_mode or again:
            super().start(again)
            return
        everything = list(range(self.partitions))
        self._replace("assign", consumer=self.manual_props, partitions=everything, from_start=True)
        self.manual = everything

    def assign(self, partitions: list[int]) -> None:
        """Replace the consumer by one assigned `partitions` by hand, resuming from the group's committed offsets
        (else the log start); record the old manual assignment's end, a leaving member's revocation, and the new
        assignment."""
        self._end_manual()
        self._replace("assign", consumer=self.manual_props, partitions=sorted(partitions), from_start=False)
        self.manual = sorted(partitions)
        self._line(revoked=[], assigned=self.manual)

    def subscribe(self) -> None:
        """Replace the consumer by a member of the group; its rebalances come back with the replies."""
        self._end_manual()
        self._replace("subscribe", consumer=self.member_props)
        self.member = True

    def _end_manual(self) -> None:
        if self.manual:
            self._line(revoked=self.manual, assigned=[])
        self.member, self.manual = False, []

    def _replace(self, op: str, **request: Any) -> None:
        reply = self.call(op, **request)
        self.record(reply.get("events") or [])
        if not reply.get("ok"):
            raise JavaConsumerError(f"{op}: {reply.get('error')}")

    def record(self, events: list[dict[str, Any]]) -> None:
        """Write each rebalance event of a reply as the process's `rebalance` line."""
        for r in rebalances(events):
            self._on_rebalance(r)

    def abandon(self) -> None:
        """Forget the consumer: the JVM keeps it unclosed (the process's `abandon` request) and records nothing
        more of it."""
        self.consumer, self.member, self.manual = None, False, []

    def close(self) -> None:
        """Close the process's consumer and producer in the JVM, recording a leaving member's revocation."""
        reply = self.call("close")
        self.record(reply.get("events") or [])
        self.member, self.manual = False, []
