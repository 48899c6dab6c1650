"""Exactly-once consume-transform-produce, after Kafka's own transactions_test and its TransactionalMessageCopier.

Before the faults, `start` creates the input topic `<topic>-in` (one partition with `--copy-order`, else
`--partitions`) and fills it with the values 0..N-1 (N = `--copy-records`, else `--rate` x `--time-limit`), value
i to input partition i mod partitions, each chunk of sends one `fill` op. The output is the test topic itself, so
the nemeses' targets (a partition's leader), the ISR monitor and the evidence are the output's. Then `--consumers`
copiers (`Copier`) copy the input to the output inside transactions that commit their input offsets,
`--txn-size` records at a time, together at `--rate` records per second. After the heal, `stop` lets them finish
the copy at full speed: until the group's committed offsets reach the end of the input (the `copied` op), at
most --drain-timeout. The final read drains the output from
its start to its high watermarks at `--txn-isolation` (read_committed by default). The history shapes are in
docs/history.md; the copy checker compares the output read with the input. With `--client java` the copiers'
consumers and producers are the Kafka Java client's, in one JVM; the fill, the
progress reads and the final read stay on librdkafka.

Processes: copiers 0..C-1 (C = `--consumers`), the fill C, the final read C+1.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from kchaos.clusters import admin
from kchaos.clusters.admin import CLIENT_LOG
from kchaos.core.config import TestConfig, TopicConfig
from kchaos.core.history import History
from kchaos.core.protocols import Topology
from kchaos.workloads.clients import keep_report, make_producer
from kchaos.workloads.copy.copier import Copier, CopierClient, copy_group
from kchaos.workloads.copy.copier_rdkafka import RdkafkaCopierClient
from kchaos.workloads.drain import drain_all
from kchaos.workloads.threads import Tally, await_ready, join_all

if TYPE_CHECKING:
    from kchaos.workloads.java_build import JavaProgram
    from kchaos.workloads.java_client import JavaProcess

log = logging.getLogger("kchaos.copy")

FILL_CHUNK = 1000  # values per fill op
MAX_RATE_RECORDS = 100_000  # the input with --rate max and no --copy-records (validate refuses that)


def input_topic(cfg: TestConfig) -> TopicConfig:
    """The input topic: `<topic>-in`, one partition with --copy-order, else --partitions; the test topic's
    durability settings."""
    return dataclasses.replace(cfg.topic, name=f"{cfg.topic.name}-in",
                               partitions=1 if cfg.workload.options.order else cfg.topic.partitions)


def input_records(cfg: TestConfig) -> int:
    """How many values the input is filled with: --copy-records, else --rate x --time-limit."""
    w = cfg.workload
    if w.options.records:
        return w.options.records
    return MAX_RATE_RECORDS if w.rate == "max" else max(1, int(float(w.rate) * cfg.time_limit))


class CopyWorkload:
    """The copy workload: fill, then copiers, then the output's final read (see the module doc). Its copiers can
    be crashed (CrashableClients, `crash-client`). With `java` (`--client java`) they run on the Kafka Java
    client."""

    def __init__(self, cfg: TestConfig, java: JavaProgram | None = None):
        self.cfg, self.java = cfg, java
        self._jvm: JavaProcess | None = None
        self.input = input_topic(cfg)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._copiers: dict[int, Copier] = {}
        self._tally = Tally("send", "ok", "fail", "info", "polled", "copied", "filled")
        self.count = self._tally.add
        self.history: History | None = None
        self.bootstrap = ""

    @property
    def counts(self) -> dict[str, int]:
        """Values filled, copy transactions invoked ("send"), completed ok/fail/info, input records polled, and
        values copied (ok)."""
        return self._tally.snapshot()

    def setup(self, cluster: Topology) -> None:
        """Create the output (the test topic) and the input topic; wait until both are fully replicated."""
        admin.create_topic(cluster.bootstrap(), self.cfg.topic)
        admin.create_topic(cluster.bootstrap(), self.input)
        cluster.wait_topic(self.cfg.topic.name, self.cfg.topic.replication_factor)
        cluster.wait_topic(self.input.name, self.input.replication_factor)

    def start(self, cluster: Topology, history: History) -> None:
        """Fill the input (before returning, so before the faults start), then start one thread per copier; with
        the Java client, its JVM first, shared by every copier. Return once every copier's first init_transactions
        has succeeded (at most 3 x the delivery timeout): the faults and the time limit count from there."""
        self._stop.clear()
        self.history, self.bootstrap = history, cluster.bootstrap()
        fill(cluster.bootstrap(), self.cfg, self.input, history, self.cfg.workload.consumers, self.count)
        w = self.cfg.workload
        interval = 0.0 if w.rate == "max" else w.options.txn_size * w.consumers / float(w.rate)
        make = self._client_maker(cluster.bootstrap())
        for slot in range(w.consumers):
            copier = Copier(self.cfg, history, slot, self.input.name, interval, self.count, make)
            self._copiers[slot] = copier
            t = threading.Thread(target=self._guard, args=(copier,), name=f"copier-{slot}", daemon=True)
            t.start()
            self._threads.append(t)
        # As the txn workload: the first init_transactions creates `__transaction_state`, seconds on a loaded machine.
        await_ready([c.initialized.is_set for c in self._copiers.values()], self._threads,
                    3 * self.cfg.producer.delivery_timeout_ms / 1000, log, "transactional producer")

    def _client_maker(self, bootstrap: str) -> Callable[[int], CopierClient]:
        if self.java is None:
            return lambda slot: RdkafkaCopierClient(self.cfg, bootstrap, slot)
        from kchaos.workloads.copy.java_copier import JavaCopierClient
        from kchaos.workloads.java_client import JavaProcess
        jvm = self._jvm = JavaProcess(self.java)
        jvm.features(bootstrap)
        return lambda slot: JavaCopierClient(self.cfg, bootstrap, slot, self.input.name, jvm=jvm)

    def _guard(self, copier: Copier) -> None:
        try:
            copier.run(self._stop.is_set)
        except Exception:
            log.exception("copier thread %s died", threading.current_thread().name)

    def crash_client(self, pick: int, restart_after: float) -> dict[str, Any]:
        """Crash the copier `pick` chooses mid-transaction: at its next return from the client holding a batch
        (copier.py's module doc) it abandons its consumer and producer unclosed, with no abort and no LeaveGroup,
        and a new copier with the same transactional.id and group starts `restart_after` seconds later. Returns
        `{"member": slot, "restart_after": ...}`; ValueError before the copiers run."""
        if not self._copiers:
            raise ValueError("no copier is running yet")
        slot = random.Random(pick).choice(sorted(self._copiers))
        self._copiers[slot].crash(restart_after)
        return {"member": slot, "restart_after": restart_after}

    def stop(self) -> None:
        """Let the copiers finish the copy at full speed (until the group's committed offsets reach the end of
        every input partition, at most --drain-timeout), recorded as one `copied` op; then ask every copier to
        stop, wait for its transaction in progress, and let go of what crashes abandoned (and the Java client's JVM)."""
        if self._copiers and self.bootstrap and not self._stop.is_set():  # the runner may stop it twice
            self._finish()
        self._stop.set()
        timeout = 3 * self.cfg.producer.delivery_timeout_ms / 1000 + 10
        join_all(self._threads, timeout, log)
        self._threads = []  # those still running are stuck: never waited for again
        for copier in self._copiers.values():
            copier.close_abandoned()
        if self._jvm is not None:
            self._jvm.close()
            self._jvm = None

    def _finish(self) -> None:
        for copier in self._copiers.values():
            copier.interval = 0.0
        w = self.cfg.workload
        history = self.history
        assert history is not None  # start set it, with the bootstrap that stop checks
        op = history.invoke(w.consumers + 1, "copied", topic=self.input.name)
        deadline = time.monotonic() + w.drain_timeout_s
        lag: list[list[int]] = []
        while time.monotonic() < deadline:
            try:
                lag = copy_lag(self.bootstrap, copy_group(self.cfg.seed), self.input)
            except KafkaException as e:
                log.info("reading the copy's progress: %s", e)
                lag = [[-1, -1, -1]]
            if not lag:
                break
            time.sleep(1)
        history.complete(op, "ok" if not lag else "info", topic=self.input.name, complete=not lag,
                         **({"behind": lag} if lag else {}))

    def final_read(self, cluster: Topology, history: History) -> dict[int, bool]:
        """Drain every output partition from its start to its high watermark at --txn-isolation; return which
        completed."""
        w = self.cfg.workload
        return drain_all(cluster, history, self.cfg.topic.name, self.cfg.topic.partitions, process=w.consumers + 1,
                         timeout=w.drain_timeout_s, isolation=w.options.isolation)


def copy_lag(bootstrap: str, group: str, topic: TopicConfig) -> list[list[int]]:
    """`[partition, committed offset, end offset]` of every input partition the group has not yet copied to its
    end (the input is not transactional: its high watermark is its end)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "logger": CLIENT_LOG})
    try:
        tps = [TopicPartition(topic.name, p) for p in range(topic.partitions)]
        committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
        lag = []
        for p in range(topic.partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic.name, p), timeout=10, cached=False)
            if committed.get(p, -1) < high:
                lag.append([p, committed.get(p, -1), high])
        return lag
    finally:
        consumer.close()


def fill(bootstrap: str, cfg: TestConfig, topic: TopicConfig, history: History, process: int,
         count: Any = None) -> None:
    """Write the values 0..N-1 to `topic` with an idempotent producer, value i to partition i mod partitions, in
    `fill` ops of FILL_CHUNK values: `ok` with every value's `[partition, offset, value]`, or `info` with those
    acknowledged and `unacked` (values whose send failed: they may or may not be in the input)."""
    producer = make_producer(bootstrap, cfg.producer, f"copy-fill-{cfg.seed}")
    total = input_records(cfg)
    timeout = cfg.producer.delivery_timeout_ms / 1000 + 5
    for start in range(0, total, FILL_CHUNK):
        values = list(range(start, min(total, start + FILL_CHUNK)))
        op = history.invoke(process, "fill", topic=topic.name, values=len(values))
        acks: dict[int, tuple[KafkaError | None, Message]] = {}
        for v in values:
            while True:
                try:
                    producer.produce(topic.name, value=str(v), partition=v % topic.partitions,
                                     on_delivery=keep_report(acks, v))
                    break
                except BufferError:
                    producer.poll(0.1)
        deadline = time.monotonic() + timeout
        while len(acks) < len(values) and time.monotonic() < deadline:
            producer.flush(max(0.0, deadline - time.monotonic()))
        records = [[msg.partition(), msg.offset(), v] for v, (err, msg) in sorted(acks.items()) if err is None]
        unacked = [v for v in values if v not in acks or acks[v][0] is not None]
        extra = {"unacked": unacked, "error": "sends not acknowledged"} if unacked else {}
        history.complete(op, "info" if unacked else "ok", topic=topic.name, records=records, **extra)
        if count is not None:
            count("filled", len(records))
