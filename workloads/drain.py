"""The final read: every partition from its log start to its high watermark, retried until complete.

The high watermark is asked for at read_uncommitted: a read_committed consumer's watermark query answers
the last stable offset, which an open transaction holds back, and a read that stopped there would call
itself complete with committed records after it unread. A read_committed read waits instead, until the
transaction ends (at worst the coordinator aborts it after transaction.timeout.ms) or the deadline.

Every partition is read at once, each by a process of its own (one op outstanding per process, as
everywhere in the history). Each consumed batch is one `drain` op; the op that reaches the high
watermark carries `"complete": true`. A failed attempt is recorded as `info`
and the read resumes after the last offset received, with a fresh consumer,
until the partition is complete or the deadline passes.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kchaos.core.history import History
from kchaos.core.protocols import Topology
from kchaos.workloads.clients import make_consumer, to_records

log = logging.getLogger("kchaos.drain")
MAX_DRAINERS = 16  # partitions read at once; each reader is one consumer
BATCH = 1000  # records a drain op asks for at most


def drain_all(cluster: Topology, history: History, topic: str, partitions: int, *,
              process: int, timeout: float, isolation: str | None = None) -> dict[int, bool]:
    """Drain partitions 0..partitions-1 at once, partition p by process `process + p`, sharing one deadline;
    return {partition: complete}. `isolation` is the consumers' isolation.level (None: librdkafka's default,
    read_committed)."""
    deadline = time.monotonic() + timeout
    bootstrap = cluster.bootstrap()
    with ThreadPoolExecutor(max(1, min(partitions, MAX_DRAINERS)), thread_name_prefix="drain") as pool:
        done = {p: pool.submit(drain_partition, bootstrap, history, topic, p, process=process + p, deadline=deadline,
                               isolation=isolation)
                for p in range(partitions)}
        return {p: f.result() for p, f in done.items()}


def drain_partition(bootstrap: str, history: History, topic: str, partition: int, *,
                    process: int, deadline: float, isolation: str | None = None) -> bool:
    """Read `partition` up to its high watermark; True once the whole range was read."""
    next_offset: int | None = None
    attempt = 0
    while time.monotonic() < deadline:
        attempt += 1
        consumer = make_consumer(bootstrap, f"drain{process}-{partition}-{attempt}", isolation)
        try:
            high = high_watermark(bootstrap, TopicPartition(topic, partition), f"drain{process}-{partition}-hw")
            next_offset, done = _read_to_hw(consumer, history, topic, partition, process, next_offset, deadline,
                                            high)
            if done:
                return True
        except KafkaException as e:
            op = history.invoke(process, "drain", topic=topic, partition=partition)
            history.complete(op, "info", error=str(e.args[0] if e.args else e), complete=False)
            log.info("drain of partition %d attempt %d failed: %s", partition, attempt, e)
            time.sleep(1)
        finally:
            consumer.close()
    return False


def high_watermark(bootstrap: str, tp: TopicPartition, client_id: str) -> int:
    """`tp`'s high watermark, whatever transactions are open in it (a read_uncommitted watermark query)."""
    consumer = make_consumer(bootstrap, client_id, "read_uncommitted")
    try:
        return consumer.get_watermark_offsets(tp, timeout=5, cached=False)[1]
    finally:
        consumer.close()


def _read_to_hw(consumer, history: History, topic: str, partition: int, process: int,
                start: int | None, deadline: float, high: int) -> tuple[int | None, bool]:
    tp = TopicPartition(topic, partition)
    low, _ = consumer.get_watermark_offsets(tp, timeout=5, cached=False)
    pos = low if start is None else max(start, low)
    if pos >= high:
        op = history.invoke(process, "drain", topic=topic, partition=partition)
        history.complete(op, "ok", records=[], complete=True, low=low, high_watermark=high)
        return pos, True
    consumer.assign([TopicPartition(topic, partition, pos)])
    idle_since = time.monotonic()
    while time.monotonic() < deadline:
        op = history.invoke(process, "drain", topic=topic, partition=partition)
        msgs = _batch(consumer, tp, min(BATCH, high - pos), high)
        records, errors = to_records(msgs, below=high)
        pos = max([pos] + [o + 1 for _, o, _ in records])
        # The consumer's position also moves past offsets that hold no record (control batches).
        fetched = consumer.position([TopicPartition(topic, partition)])[0].offset
        pos = max(pos, fetched if fetched is not None and fetched >= 0 else pos)
        done = pos >= high
        extra = {"errors": errors} if errors else {}
        history.complete(op, "ok", records=records, complete=done, high_watermark=high, **extra)
        if done:
            return pos, True
        if records:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > 10:
            # Nothing for 10 s below a known high watermark: start over with a fresh consumer and a fresh HW.
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no progress at offset {pos} < hw {high}"))
    return pos, False


def _batch(consumer, tp: TopicPartition, want: int, high: int, wait: float = 1.0, step: float = 0.05) -> list:
    """Up to `want` messages of `tp`, returned as soon as there are `want`, or the consumer's position has reached
    `high`, or `wait` seconds have passed. consume() alone waits until it has all it asked for or its timeout
    passes, and a range that ends in offsets holding no record (a transaction's markers) never fills the ask:
    its last batch would wait the whole `wait`."""
    msgs: list = []
    end = time.monotonic() + wait
    while True:
        left = end - time.monotonic()
        msgs += consumer.consume(num_messages=want - len(msgs), timeout=max(0.0, min(step, left)))
        if len(msgs) >= want or left <= 0:
            return msgs
        fetched = consumer.position([tp])[0].offset
        if fetched is not None and fetched >= high:
            return msgs
