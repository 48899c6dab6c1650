"""The share workload: producers send unique integers as the queue workload's do; the members of one share group
(KIP-932) are delivered them, each record under an acquisition lock, and acknowledge each with ACCEPT, RELEASE or
REJECT, or hold it past its lock (`ShareMembers`, on Kafka's Java client). At the end fresh members of the group
accept everything still available, and the group's state is recorded."""
from __future__ import annotations

import dataclasses
import logging
import random
import threading
from typing import Any

from kchaos.clusters import admin
from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.kafka_versions import line_of
from kchaos.core.protocols import Topology
from kchaos.workloads.java_build import JavaProgram
from kchaos.workloads.java_client import share_consumer_props
from kchaos.workloads.queue.producer_procs import LoopSpec
from kchaos.workloads.queue.workload import HistorySends
from kchaos.workloads.share.members import ShareMembers
from kchaos.workloads.share.options import parse_mix
from kchaos.workloads.threads import Tally, join_all

log = logging.getLogger("kchaos.workload")
DRAINERS = 2


def share_group(seed: int) -> str:
    """The run's share group."""
    return f"kchaos-share-{seed}"


class ShareWorkload:
    """Producer instances of `in_flight` slots (processes 0..P*N-1, as the queue's), share members P*N..P*N+C-1,
    and the drainers after them."""

    def __init__(self, cfg: TestConfig, java: JavaProgram | None = None):
        if java is None or not java.shares:
            raise ValueError("the share workload's members need the Kafka Java client 4.2 or later")
        self.cfg, self.java = cfg, java
        self.topic = cfg.topic.name
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._tally = Tally("send", "ok", "fail", "info")
        self._members: ShareMembers | None = None

    @property
    def counts(self) -> dict[str, int]:
        """Sends invoked and completed ok/fail/info, and records delivered to the members ("polled"), so far."""
        return {**self._tally.snapshot(), "polled": self._members.polled if self._members is not None else 0}

    def setup(self, cluster: Topology) -> None:
        """Create the test topic and wait until it is fully replicated on every broker."""
        admin.create_topic(cluster.bootstrap(), self.cfg.topic)
        cluster.wait_topic(self.topic, self.cfg.topic.replication_factor)

    def processes(self) -> tuple[list[int], list[int]]:
        """The members' processes and the drainers'."""
        w = self.cfg.workload
        first = w.producers * w.in_flight
        return list(range(first, first + w.consumers)), list(range(first + w.consumers, first + w.consumers + DRAINERS))

    def start(self, cluster: Topology, history: History) -> None:
        """Start the members (once the group is configured), then the producers."""
        self._stop.clear()
        w, o = self.cfg.workload, self.cfg.workload.options
        members, drainers = self.processes()
        spec: dict[str, Any] = {
            "consumer": share_consumer_props(cluster.bootstrap(), 10_000), "topic": self.topic,
            "group": share_group(self.cfg.seed), "members": members, "drainers": drainers,
            "mix": parse_mix(o.ack_mix), "lock_ms": o.lock_ms, "delivery_limit": o.delivery_limit,
            "commit": o.commit, "seed": self.cfg.seed, "t0_ns": history.t0_ns,
            "group_delivery_limit": line_of(self.cfg.cluster.kafka_version).share_group_delivery_limit}
        assert self.java is not None
        self._members = ShareMembers(self.java, spec, history.path.parent)
        self._members.start()
        loop = LoopSpec(cluster.bootstrap(), dataclasses.asdict(self.cfg.producer), self.topic,
                        self.cfg.topic.partitions, w.producers, w.in_flight,
                        float("inf") if w.rate == "max" else float(w.rate), self.cfg.seed)
        sends = HistorySends(history, self.topic, self._tally.add)
        for p in range(w.producers):
            t = threading.Thread(target=self._guard, args=(lambda p=p: loop.loop(p, sends).run(self._stop.is_set),),
                                 name=f"producer-{p}", daemon=True)
            t.start()
            self._threads.append(t)

    def crash_client(self, pick: int, restart_after: float) -> dict[str, Any]:
        """Crash the member `pick` chooses: at its next step it records a share-leave of type info and leaves its
        consumer unclosed (what it acquired stays acquired until the locks run out), and a new consumer of the same
        process joins `restart_after` seconds later. Returns `{"member": process, "restart_after": ...}`;
        ValueError when the members are not running."""
        members, _ = self.processes()
        process = random.Random(pick).choice(members)
        if self._members is None or not self._members.crash(process, restart_after):
            raise ValueError("the share members are not running")
        return {"member": process, "restart_after": restart_after}

    @staticmethod
    def _guard(fn) -> None:
        try:
            fn()
        except Exception:
            log.exception("client thread %s died", threading.current_thread().name)

    def stop(self) -> None:
        """Stop the producers, waiting for their outstanding sends, then the members, which leave the group."""
        self._stop.set()
        timeout = self.cfg.producer.delivery_timeout_ms / 1000 + 10
        join_all(self._threads, timeout, log)
        self._threads = []
        if self._members is not None:
            self._members.stop(timeout + self.cfg.workload.options.lock_ms / 1000)

    def final_read(self, cluster: Topology, history: History) -> dict[int, bool]:
        """Fresh members of the group accept everything still available until the group's lag is 0 on every
        partition; which partitions got there."""
        partitions = range(self.cfg.topic.partitions)
        if self._members is None:
            return dict.fromkeys(partitions, False)
        state = self._members.drain(self.cfg.workload.drain_timeout_s) or {}
        self._members = None
        return {p: (state.get(str(p)) or {}).get("lag") == 0 for p in partitions}
