"""Queue workload: producers send unique integers to chosen partitions, consumers poll them back.

Each producer or consumer is a logical process (a thread with an integer id,
as in Jepsen) with at most one operation outstanding. Producers send
synchronously, one record per `send` op, at a share of the target rate; the
partition of every send is drawn from the process's own seeded generator.
"""
from __future__ import annotations

import itertools
import logging
import random
import threading
import time

from confluent_kafka import KafkaException, TopicPartition

from clusters import admin
from harness.config import TestConfig
from harness.history import History
from harness.protocols import Cluster
from workloads.clients import make_consumer, make_producer, send_outcome, to_records
from workloads.drain import drain_all

log = logging.getLogger("kchaos.workload")


class QueueWorkload:
    """Producers 0..P-1 and consumers P..P+C-1 on the test topic; process P+C drains at the end."""

    def __init__(self, cfg: TestConfig):
        self.cfg = cfg
        self.topic = cfg.topic.name
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._values = itertools.count(1)
        self._values_lock = threading.Lock()
        self.counts = {"send": 0, "ok": 0, "fail": 0, "info": 0, "polled": 0}
        self._counts_lock = threading.Lock()

    def setup(self, cluster: Cluster) -> None:
        """Create the test topic and wait until it is fully replicated on every broker."""
        admin.create_topic(cluster.bootstrap(), self.cfg.topic)
        cluster.wait_topic(self.topic, self.cfg.topic.replication_factor)

    def start(self, cluster: Cluster, history: History) -> None:
        """Start every producer and consumer thread."""
        self._stop.clear()
        w = self.cfg.workload
        for p in range(w.producers):
            self._spawn(f"producer-{p}", self._produce, cluster.bootstrap(), history, p)
        for c in range(w.consumers):
            self._spawn(f"consumer-{c}", self._consume, cluster.bootstrap(), history, w.producers + c)

    def _spawn(self, name: str, fn, *args) -> None:  # noqa: ANN001
        t = threading.Thread(target=self._guard, args=(fn, *args), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _guard(self, fn, *args) -> None:  # noqa: ANN001
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a dying client must not take the run down silently
            log.exception("client thread %s died", threading.current_thread().name)

    def stop(self) -> None:
        """Ask every client to stop and wait for its outstanding operation to complete."""
        self._stop.set()
        timeout = self.cfg.producer.delivery_timeout_ms / 1000 + 10
        for t in self._threads:
            t.join(timeout)
        self._threads = [t for t in self._threads if t.is_alive()]
        if self._threads:
            log.warning("client threads still running: %s", [t.name for t in self._threads])

    def final_read(self, cluster: Cluster, history: History) -> dict[int, bool]:
        """Drain every partition from its start to its high watermark; return which completed."""
        w = self.cfg.workload
        return drain_all(cluster, history, self.topic, self.cfg.topic.partitions,
                         process=w.producers + w.consumers, timeout=w.drain_timeout_s)

    def _next_value(self) -> int:
        with self._values_lock:
            return next(self._values)

    def _count(self, key: str, n: int = 1) -> None:
        with self._counts_lock:
            self.counts[key] += n

    # --- producers -------------------------------------------------------------------
    def _produce(self, bootstrap: str, history: History, process: int) -> None:
        pcfg = self.cfg.producer
        producer = make_producer(bootstrap, pcfg, f"p{process}")
        rng = random.Random(f"{self.cfg.seed}/producer/{process}")
        period = self.cfg.workload.producers / self.cfg.workload.rate
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                delay = next_at - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    break
                # After a long stall (leader failover), resume the rate instead of bursting to catch up.
                next_at = max(next_at + period, time.monotonic() - 1.0)
                self._send_one(producer, history, process, rng.randrange(self.cfg.topic.partitions))
        finally:
            producer.flush(0)

    def _send_one(self, producer, history: History, process: int, partition: int) -> None:  # noqa: ANN001
        value = self._next_value()
        op = history.invoke(process, "send", topic=self.topic, partition=partition, value=value)
        self._count("send")
        done: list = []
        try:
            producer.produce(self.topic, value=str(value).encode(), partition=partition,
                             on_delivery=lambda err, msg: done.append((err, msg)))
        except (BufferError, KafkaException) as e:
            history.complete(op, "fail", error=f"produce: {e}")
            self._count("fail")
            return
        deadline = time.monotonic() + self.cfg.producer.delivery_timeout_ms / 1000 + 5
        while not done and time.monotonic() < deadline:
            producer.poll(0.05)
        if not done:
            history.complete(op, "info", error="no delivery report")
            self._count("info")
            return
        err, msg = done[0]
        if err is None:
            offset = msg.offset()
            history.complete(op, "ok", offset=offset if offset is not None and offset >= 0 else None)
            self._count("ok")
        else:
            outcome = send_outcome(err, self.cfg.producer)
            history.complete(op, outcome, error=err.name() or str(err))
            self._count(outcome)

    # --- consumers -------------------------------------------------------------------
    def _consume(self, bootstrap: str, history: History, process: int) -> None:
        consumer = make_consumer(bootstrap, f"c{process}")
        parts = list(range(self.cfg.topic.partitions))
        op = history.invoke(process, "assign", topic=self.topic, partitions=parts)
        consumer.assign([TopicPartition(self.topic, p, 0) for p in parts])
        history.complete(op, "ok", topic=self.topic, partitions=parts)
        try:
            while not self._stop.is_set():
                self._poll_one(consumer, history, process)
        finally:
            consumer.close()

    def _poll_one(self, consumer, history: History, process: int) -> None:  # noqa: ANN001
        op = history.invoke(process, "poll", topic=self.topic)
        try:
            msgs = consumer.consume(num_messages=500, timeout=1.0)
        except KafkaException as e:
            history.complete(op, "info", error=str(e))
            return
        records, errors = to_records(msgs)
        extra = {"errors": errors} if errors else {}
        history.complete(op, "ok", records=records, **extra)
        self._count("polled", len(records))
