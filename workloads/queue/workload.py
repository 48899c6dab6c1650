"""Queue workload: producers send unique integers to chosen partitions, consumers poll them back.

Each producer instance keeps up to `in_flight` sends outstanding, each slot its
own logical process (a `ProducerLoop`), at a share of the target
rate; the partition of every send is drawn from the instance's own seeded
generator. Producer instances run as threads of the harness, recording into
the history, or in `producer_processes` worker processes with their own send
streams (`ProducerProcesses`). Consumers are threads, one process each:
assigned every partition (`--consumer-mode assign`), or members of one consumer
group (`subscribe`, each a `Member`). With the Java client the producer
instances and the assigned consumers are threads of one JVM instead
(`JavaQueueClients`); group members stay the harness's.
"""
from __future__ import annotations

import dataclasses
import logging
import random
import threading

from confluent_kafka import KafkaException, TopicPartition

from kchaos.clusters import admin
from kchaos.core.config import TestConfig
from kchaos.core.history import History, Op
from kchaos.core.protocols import Topology
from kchaos.workloads.clients import make_consumer, make_group_consumer, to_records
from kchaos.workloads.drain import drain_all
from kchaos.workloads.java_build import JavaProgram
from kchaos.workloads.queue.group import Member, group_id
from kchaos.workloads.queue.java_clients import JavaQueueClients
from kchaos.workloads.queue.producer_procs import LoopSpec, ProducerProcesses
from kchaos.workloads.threads import join_all

log = logging.getLogger("kchaos.workload")


class QueueWorkload:
    """P producer instances of N slots (processes 0..P*N-1, instance p owning p*N..p*N+N-1), consumers
    P*N..P*N+C-1, and processes P*N+C.. draining at the end (P*N+C+p reads partition p), on the test topic."""

    def __init__(self, cfg: TestConfig, java: JavaProgram | None = None):
        self.cfg = cfg
        self.java = java
        self.topic = cfg.topic.name
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._procs: ProducerProcesses | JavaQueueClients | None = None
        self._counts = {"send": 0, "ok": 0, "fail": 0, "info": 0, "polled": 0}
        self._counts_lock = threading.Lock()
        self._members: dict[int, Member] = {}  # subscribe mode: process -> member

    @property
    def counts(self) -> dict[str, int]:
        """Sends invoked, completed ok/fail/info, and records polled so far (worker processes included)."""
        with self._counts_lock:
            c = dict(self._counts)
        if self._procs is not None:
            for k, v in self._procs.counts().items():
                c[k] += v
        return c

    def setup(self, cluster: Topology) -> None:
        """Create the test topic and wait until it is fully replicated on every broker."""
        admin.create_topic(cluster.bootstrap(), self.cfg.topic)
        cluster.wait_topic(self.topic, self.cfg.topic.replication_factor)

    def start(self, cluster: Topology, history: History) -> None:
        """Start every producer (thread or worker process) and consumer thread."""
        self._stop.clear()
        w = self.cfg.workload
        spec = LoopSpec(cluster.bootstrap(), dataclasses.asdict(self.cfg.producer), self.topic,
                        self.cfg.topic.partitions, w.producers, w.in_flight,
                        float("inf") if w.rate == "max" else float(w.rate), self.cfg.seed)
        first = w.producers * w.in_flight
        jvm_reads = self.java is not None and w.consumer_mode == "assign"
        if self.java is not None:
            consumers = list(range(first, first + w.consumers)) if jvm_reads else []
            self._procs = JavaQueueClients(self.java, spec, consumers, history.path.parent, history.t0_ns)
            self._procs.start()
        elif w.producer_processes:
            self._procs = ProducerProcesses(spec, w.producer_processes, history.path.parent, history.t0_ns)
            self._procs.start()
        else:
            sends = HistorySends(history, self.topic, self._count)
            for p in range(w.producers):
                self._spawn(f"producer-{p}", lambda p=p: spec.loop(p, sends).run(self._stop.is_set))
        for c in range(0 if jvm_reads else w.consumers):
            if w.consumer_mode == "subscribe":
                m = Member(cluster.bootstrap(), history, first + c, self.topic, self.cfg.seed,
                           w.options.group_commit, w.group_protocol, self._count)
                self._members[first + c] = m
                self._spawn(f"consumer-{c}", m.run, self._stop.is_set)
            else:
                self._spawn(f"consumer-{c}", self._consume, cluster.bootstrap(), history, first + c)

    def crash_client(self, pick: int, restart_after: float) -> dict[str, object]:
        """Crash one group member, chosen by `pick` among those holding partitions (among all when none does: a
        member with nothing assigned has nothing to lose): it abandons its consumer at its next return from the
        client and starts a new one, as the same process, `restart_after` seconds later (`Member.crash`).
        Returns `{"member": process, "restart_after": ...}`; ValueError when no consumer is a group member."""
        if not self._members:
            raise ValueError("crash-client needs --consumer-mode subscribe: no consumer is a group member")
        holders = [p for p, m in sorted(self._members.items()) if m.held]
        process = random.Random(pick).choice(holders or sorted(self._members))
        self._members[process].crash(restart_after)
        return {"member": process, "restart_after": restart_after}

    def _spawn(self, name: str, fn, *args) -> None:
        t = threading.Thread(target=self._guard, args=(fn, *args), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _guard(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("client thread %s died", threading.current_thread().name)

    def stop(self) -> None:
        """Ask every client to stop and wait for its outstanding operations to complete."""
        self._stop.set()
        timeout = self.cfg.producer.delivery_timeout_ms / 1000 + 10
        if self._procs is not None:
            self._procs.stop(timeout)
        join_all(self._threads, timeout, log)
        self._threads = []  # those still running are stuck: never waited for again
        for m in self._members.values():
            m.close_abandoned()

    def final_read(self, cluster: Topology, history: History) -> dict[int, bool]:
        """Drain every partition from its start to its high watermark; return which completed."""
        w = self.cfg.workload
        process = w.producers * w.in_flight + w.consumers
        if w.consumer_mode == "subscribe":
            record_committed(cluster.bootstrap(), history, self.topic, self.cfg.topic.partitions, process,
                             group_id(self.cfg.seed))
        return drain_all(cluster, history, self.topic, self.cfg.topic.partitions,
                         process=process, timeout=w.drain_timeout_s)

    def _count(self, key: str, n: int = 1) -> None:
        with self._counts_lock:
            self._counts[key] += n

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

    def _poll_one(self, consumer, history: History, process: int) -> None:
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


def record_committed(bootstrap: str, history: History, topic: str, partitions: int, process: int,
                     group: str) -> None:
    """One `committed` op per partition, in turn: the group's committed offset of it (`offset`, absent when
    the group has none there), or info when it could not be read."""
    consumer = make_group_consumer(bootstrap, f"committed{process}", group, auto_commit=False)
    try:
        for p in range(partitions):
            op = history.invoke(process, "committed", topic=topic, partition=p)
            try:
                tp = consumer.committed([TopicPartition(topic, p)], timeout=10)[0]
            except KafkaException as e:
                history.complete(op, "info", topic=topic, partition=p, error=str(e.args[0] if e.args else e))
                continue
            if tp.error is not None:
                history.complete(op, "info", topic=topic, partition=p, error=str(tp.error))
            else:
                history.complete(op, "ok", topic=topic, partition=p,
                                 **({"offset": tp.offset} if tp.offset >= 0 else {}))
    finally:
        consumer.close()


class HistorySends:
    """A `SendRecorder` writing sends into the history, for producer threads."""

    def __init__(self, history: History, topic: str, count):
        self.history = history
        self.topic = topic
        self.count = count

    def sent(self, process: int, producer: int, partition: int, value: int) -> None:
        """Record the invocation."""
        self.history.append(Op(process, "invoke", "send", {"topic": self.topic, "partition": partition,
                                                           "value": value, "producer": producer}))
        self.count("send")

    def done(self, process: int, producer: int, partition: int, value: int, type_: str,
             offset: int | None, error: str | None) -> None:
        """Record the completion: `offset` on ok, `error` otherwise."""
        extra = {"offset": offset} if type_ == "ok" else {"error": error}
        self.history.append(Op(process, type_, "send", {"topic": self.topic, "partition": partition,
                                                        "value": value, "producer": producer, **extra}))
        self.count(type_)
