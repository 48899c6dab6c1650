"""A copier session's clients on librdkafka (confluent-kafka), the copy workload's default (`--client python`).

The consumer joins the copy group (auto-commit off, read_committed, librdkafka's classic protocol); its rebalance
callbacks, which run inside `consume`, are kept and handed to the session with the poll's records.
"""
from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kchaos.core.config import TestConfig, txn_timeout_ms
from kchaos.workloads.clients import make_group_consumer, make_producer, to_records
from kchaos.workloads.copy.copier import ClientError, TxnFailed, copy_group
from kchaos.workloads.rebalance import Rebalance, drop, leave, subscribe
from kchaos.workloads.threads import timed


def _text(e: Exception) -> str:
    return str(e.args[0] if isinstance(e, KafkaException) and e.args else e)


class RdkafkaCopierClient:
    """The `CopierClient` on librdkafka: one consumer, and a producer per successful init."""

    def __init__(self, cfg: TestConfig, bootstrap: str, slot: int):
        self.cfg, self.bootstrap, self.slot = cfg, bootstrap, slot
        self.timeout = cfg.producer.delivery_timeout_ms / 1000
        # None once abandoned: the session makes no call after that
        self.consumer: Consumer | None = make_group_consumer(bootstrap, f"copy{slot}", copy_group(cfg.seed),
                                                             auto_commit=False)
        self.producer: Producer | None = None
        self._events: list[Rebalance] | None = None  # the callbacks of the consume in progress; close's are none

    def init(self, txn_id: str) -> None:
        """A fresh producer with `txn_id` after init_transactions; ClientError if that failed."""
        producer = make_producer(self.bootstrap, self.cfg.producer, txn_id, extra={
            "transactional.id": txn_id, "transaction.timeout.ms": txn_timeout_ms(self.cfg.producer)})
        try:
            timed(self.timeout, producer.init_transactions)
        except KafkaException as e:
            raise ClientError(_text(e)) from None
        self.producer = producer

    def subscribe(self, topic: str) -> None:
        """Subscribe to `topic`; the rebalance callbacks a consume serves are kept for its poll (`rebalance.subscribe`),
        those its close serves are not."""
        assert self.consumer is not None
        subscribe(self.consumer, topic, self._seen, live=lambda: self._events is not None)

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], list[Rebalance]]:
        """One consume of up to `max_records` within `timeout` seconds, and its rebalances."""
        assert self.consumer is not None
        events: list[Rebalance] = []
        self._events = events
        try:
            msgs = self.consumer.consume(num_messages=max_records, timeout=timeout)
        except KafkaException as e:
            raise ClientError(_text(e)) from None
        finally:
            self._events = None
        return to_records(msgs)[0], events

    def produce(self, topic: str, sent: list[list[int]]) -> None:
        """Begin, produce every value to its partition, flush; TxnFailed (aborted if it could be)."""
        assert self.producer is not None
        try:
            self.producer.begin_transaction()
            for out, v in sent:
                self.producer.produce(topic, value=str(v), partition=out)
            timed(self.timeout, self.producer.flush)
        except (KafkaException, BufferError) as e:
            raise self._failed(e, committing=False) from None

    def commit(self) -> list[list[int]]:
        """Send the consumer's positions with its group metadata, then commit; TxnFailed."""
        assert self.producer is not None and self.consumer is not None
        committing = False
        try:
            positions = [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]
            timed(self.timeout, self.producer.send_offsets_to_transaction, positions,
                  self.consumer.consumer_group_metadata())
            committing = True
            timed(self.timeout, self.producer.commit_transaction)
        except KafkaException as e:
            raise self._failed(e, committing) from None
        return [[tp.partition, tp.offset] for tp in positions]

    def _failed(self, e: Exception, committing: bool) -> TxnFailed:
        err: KafkaError | None = e.args[0] if isinstance(e, KafkaException) and e.args else None
        return TxnFailed(_text(e), committing, self._abort(err))

    def _abort(self, err: KafkaError | None) -> bool:
        """Abort after an abortable error; True if the abort was confirmed."""
        if err is None or not err.txn_requires_abort() or self.producer is None:
            return False
        try:
            timed(self.timeout, self.producer.abort_transaction)
            return True
        except KafkaException:
            return False

    def rewind(self) -> list[list[int]]:
        """Seek every assigned partition to its committed offset, or the log start; ClientError."""
        assert self.consumer is not None
        try:
            to = []
            for tp in self.consumer.committed(self.consumer.assignment(), timeout=self.timeout):
                tp = TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                self.consumer.seek(tp)
                to.append([tp.partition, tp.offset])
            return to
        except KafkaException as e:
            raise ClientError(_text(e)) from None

    def close(self) -> None:
        """Close the consumer, its revocation served first (`leave`; its callbacks record nothing); the producer
        goes with this object."""
        assert self.consumer is not None
        leave(self.consumer)

    def abandon(self) -> None:
        """Let go of the consumer now, unclosed (`drop`), as a killed process's is gone: it stops heartbeating and
        its group evicts it after session.timeout.ms. Kept alive instead, a consumer abandoned before its first
        poll of a new assignment was never evicted (librdkafka enforces max.poll.interval.ms only from a poll), and
        held an input partition for good (exactly-once-copy, 2026-11-26: partition 1 never copied after 110 of
        1667). The producer stays referenced, unclosed, until the end of the run: the replacement fences it."""
        consumers = [self.consumer]
        self.consumer = None  # the client is never used again: leave the list the only reference
        drop(consumers)

    def close_abandoned(self) -> None:
        """Let go of the abandoned producer unclosed, as a killed process's is gone (the consumer went at the
        crash)."""
        self.producer = None

    def _seen(self, r: Rebalance) -> None:
        if self._events is not None:
            self._events.append(r)
