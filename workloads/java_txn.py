"""The txn workload on the Kafka Java client (`--client java`): one JVM runs every process's transactions.

The harness stays the driver. Each process's thread (TxnClient's loop) draws
its transactions from --seed and records invoke and completion in the history
as it does on librdkafka; only the transaction itself runs in the JVM
(workloads/java/KchaosTxnClient.java): a JSON request per line on its stdin,
a JSON reply per line on its stdout. The JVM applies TxnClient.transact's
rules for ok, fail and info, so a history does not say which client ran. The
clients' settings are made here, from the same options as librdkafka's.
"""
from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
from typing import Any, Callable

from core.config import ProducerConfig, TestConfig, txn_timeout_ms
from core.history import History
from workloads.java_build import JavaProgram
from workloads.txn import TxnClient

log = logging.getLogger("kchaos.txn.java")
CLOSED = None  # what a process's queue gets when the JVM's stdout ends


class JavaClientError(RuntimeError):
    """The Java client's JVM died, or did not answer a request in time."""


def producer_props(bootstrap: str, p: ProducerConfig, txn_id: str) -> dict[str, str]:
    """The Java producer's settings: workloads/clients.py's make_producer, in the Java client's names."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in {
        "bootstrap.servers": bootstrap,
        "client.id": txn_id,
        "transactional.id": txn_id,
        "transaction.timeout.ms": txn_timeout_ms(p),
        "acks": p.acks,
        "enable.idempotence": p.idempotence,
        "retries": p.retries,
        "linger.ms": p.linger_ms,
        "max.in.flight.requests.per.connection": p.max_in_flight,
        "delivery.timeout.ms": p.delivery_timeout_ms,
        "request.timeout.ms": p.request_timeout_ms,
        # librdkafka's calls take a timeout (the delivery timeout); the Java client's blocking calls take this.
        "max.block.ms": p.delivery_timeout_ms,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 500,
        "reconnect.backoff.max.ms": 1000,
        "socket.connection.setup.timeout.ms": 3000,
        "metadata.max.age.ms": 2000,
    }.items()}


def consumer_props(bootstrap: str, client_id: str, isolation: str, timeout_ms: int) -> dict[str, str]:
    """The Java consumer's settings: workloads/clients.py's make_consumer, in the Java client's names."""
    return {k: str(v) for k, v in {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "group.id": f"kchaos-{client_id}",
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "isolation.level": isolation,  # the Java client's default is read_uncommitted, librdkafka's read_committed
        "max.poll.records": 100,  # librdkafka's consume(num_messages=100)
        "fetch.max.wait.ms": 200,
        "request.timeout.ms": 5000,
        "session.timeout.ms": 6000,
        "default.api.timeout.ms": timeout_ms,
        "reconnect.backoff.max.ms": 1000,
        "socket.connection.setup.timeout.ms": 3000,
        "metadata.max.age.ms": 2000,
    }.items()}


class JavaTxnProcess:
    """The JVM of the Java client: requests go in on stdin, replies come back per process; its stderr (Kafka's
    warnings) goes into harness.log."""

    def __init__(self, program: JavaProgram):
        self.program = program
        self.proc = subprocess.Popen(program.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._replies: dict[int, queue.Queue[dict[str, Any] | None]] = {}
        self._lock = threading.Lock()  # the table of queues
        self._write = threading.Lock()  # stdin, one request line at a time
        self._readers = [threading.Thread(target=f, name=f"java-{n}", daemon=True)
                         for f, n in ((self._read_replies, "out"), (self._read_log, "err"))]
        for t in self._readers:
            t.start()
        log.info("Java client started (pid %d, kafka-clients %s): %s", self.proc.pid, program.clients_version,
                 " ".join(program.command()))

    def _queue(self, process: int) -> queue.Queue[dict[str, Any] | None]:
        with self._lock:
            return self._replies.setdefault(process, queue.Queue())

    def _read_replies(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                reply = json.loads(line)
                self._queue(int(reply["p"])).put(reply)
            except (ValueError, KeyError, TypeError):
                log.warning("Java client: not a reply: %r", line[:500])
        with self._lock:
            queues = list(self._replies.values())
        for q in queues:
            q.put(CLOSED)

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            log.info("%s", line.rstrip())

    def call(self, process: int, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send `request` for `process` and wait for its reply; JavaClientError when the JVM is gone or silent for
        `timeout` seconds."""
        q = self._queue(process)
        line = json.dumps({"p": process, **request}, separators=(",", ":")) + "\n"
        try:
            with self._write:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            raise JavaClientError(f"the Java client is gone (exit {self.proc.poll()}): {e}") from None
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise JavaClientError(f"no reply from the Java client in {timeout:g} s to {request['op']}") from None
        if reply is CLOSED:
            q.put(CLOSED)  # every later call of this process sees it too
            raise JavaClientError(f"the Java client exited ({self.proc.poll()})")
        return reply

    def features(self, bootstrap: str) -> dict[str, int] | None:
        """The cluster's finalized feature levels (transaction.version 2: KIP-890's transactions), None if the
        Admin call failed; logged either way."""
        reply = self.call(-1, {"op": "features", "bootstrap": bootstrap}, 60)
        log.info("cluster features for the Java client: %s", reply.get("finalized") or reply.get("error"))
        return reply.get("finalized") if reply.get("ok") else None

    def close(self, timeout: float = 60) -> None:
        """End stdin (the JVM closes every client and exits); kill it if it has not exited within `timeout`."""
        try:
            with self._write:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("Java client did not exit in %g s; killing it", timeout)
            self.proc.kill()
            self.proc.wait()
        for t in self._readers:
            t.join(5)
        log.info("Java client exited with %s", self.proc.returncode)


class JavaTxnClient(TxnClient):
    """TxnClient's process with its producer and consumer in the JVM: the same seeded ops, the same history."""

    def __init__(self, cfg: TestConfig, bootstrap: str, history: History, process: int,
                 count: Callable[..., None], *, jvm: JavaTxnProcess):
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
