"""The transactional workload: P processes run transactions (`TxnClient`, or the Kafka Java
client's `JavaTxnClient` with `--client java`), one at a time each, then one more drains every
partition read_committed."""
from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kchaos.clusters import admin
from kchaos.core.config import TestConfig
from kchaos.core.history import History
from kchaos.core.protocols import Topology
from kchaos.workloads.drain import drain_all
from kchaos.workloads.threads import Tally, await_ready, join_all
from kchaos.workloads.txn.client import TxnClient

if TYPE_CHECKING:
    from kchaos.workloads.java_build import JavaProgram
    from kchaos.workloads.java_client import JavaProcess

log = logging.getLogger("kchaos.txn")

FINAL_ISOLATION = "read_committed"  # the final read sees what was committed, whatever the polls' isolation


class TxnWorkload:
    """Processes 0..P-1 (P = `--producers`) run transactions one at a time; processes P.. drain at the end
    (P+p reads partition p). With `java` (`--client java`), the transactions run on the Kafka Java client
    (`JavaTxnClient`)."""

    def __init__(self, cfg: TestConfig, java: JavaProgram | None = None):
        self.cfg, self.java = cfg, java
        self._jvm: JavaProcess | None = None
        self.topic = cfg.topic.name
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: dict[int, TxnClient] = {}
        self._tally = Tally("send", "ok", "fail", "info", "polled")
        self.count = self._tally.add

    @property
    def counts(self) -> dict[str, int]:
        """Transactions invoked ("send"), completed ok/fail/info, and records polled so far."""
        return self._tally.snapshot()

    def setup(self, cluster: Topology) -> None:
        """Create the test topic and wait until it is fully replicated on every broker."""
        admin.create_topic(cluster.bootstrap(), self.cfg.topic)
        cluster.wait_topic(self.topic, self.cfg.topic.replication_factor)

    def start(self, cluster: Topology, history: History) -> None:
        """Start one client thread per process; with the Java client, its JVM first, shared by every process.
        Return once every process holds its first transactional producer (`await_producers`), so that the
        faults and the time limit count from when transactions can begin."""
        self._stop.clear()
        make: Callable[..., TxnClient] = TxnClient
        if self.java is not None:
            from kchaos.workloads.java_client import JavaProcess
            from kchaos.workloads.txn.java import JavaTxnClient
            jvm = self._jvm = JavaProcess(self.java)
            jvm.features(cluster.bootstrap())
            make = lambda *a: JavaTxnClient(*a, jvm=jvm)  # noqa: E731
        for p in range(self.cfg.workload.producers):
            client = make(self.cfg, cluster.bootstrap(), history, p, self.count)
            self._clients[p] = client
            t = threading.Thread(target=self._guard, args=(client,), name=f"txn-{p}", daemon=True)
            t.start()
            self._threads.append(t)
        self.await_producers(3 * self.cfg.producer.delivery_timeout_ms / 1000)

    def await_producers(self, timeout: float) -> None:
        """Wait until every process's first init_transactions has answered, at most `timeout` seconds. The first one
        in a cluster creates `__transaction_state` and waits for its coordinators to load: seconds on a loaded
        machine, which faults must not fall into before a transaction could begin."""
        await_ready([c.ready for c in self._clients.values()], self._threads, timeout, log, "transactional producer")

    def crash_client(self, pick: int, restart_after: float) -> dict[str, Any]:
        """Crash one process, chosen by `pick`: at its next return from the client it abandons its producer
        and consumer and, `restart_after` seconds later, starts new ones with the same identity (the module
        doc; on the Java client, `JavaTxnClient`). Returns `{"member": process, "restart_after": ...}`;
        ValueError before the processes started."""
        if not self._clients:
            raise ValueError("crash-client has no txn process to crash yet")
        process = random.Random(pick).choice(sorted(self._clients))
        self._clients[process].crash(restart_after)
        return {"member": process, "restart_after": restart_after}

    def _guard(self, client: TxnClient) -> None:
        try:
            client.run(self._stop.is_set)
        except Exception:
            log.exception("client thread %s died", threading.current_thread().name)

    def stop(self) -> None:
        """Ask every client to stop and wait for its transaction in progress to end."""
        self._stop.set()
        timeout = 3 * self.cfg.producer.delivery_timeout_ms / 1000 + 10
        join_all(self._threads, timeout, log)
        self._threads = []  # those still running are stuck: never waited for again
        if self._jvm is not None:
            self._jvm.close()
            self._jvm = None

    def final_read(self, cluster: Topology, history: History) -> dict[int, bool]:
        """Drain every partition, read_committed, from its start to its high watermark; return which completed."""
        return drain_all(cluster, history, self.topic, self.cfg.topic.partitions, process=self.cfg.workload.producers,
                         timeout=self.cfg.workload.drain_timeout_s, isolation=FINAL_ISOLATION)


