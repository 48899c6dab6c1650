"""The Kafka Java client's JVM (`--client java`) and the pipe to it, shared by the txn and copy workloads.

The harness stays the driver: its threads draw the ops from --seed and record
the history as they do on librdkafka; only the client calls run in one JVM
(`KchaosTxnClient`'s main): a JSON request per line on its stdin,
a JSON reply per line on its stdout, each tagged with the logical process
(`p`) whose own thread in the JVM runs it. The clients' settings are made
here, from the same options as librdkafka's. `JavaTxnClient` and
`JavaCopierClient` are the two workloads' clients.
"""
from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
from typing import Any

from kchaos.core.config import ProducerConfig, txn_timeout_ms
from kchaos.workloads.clients import MAX_POLL_INTERVAL_MS
from kchaos.workloads.java_build import JavaProgram

log = logging.getLogger("kchaos.java")
CLOSED = None  # what a process's queue gets when the JVM's stdout ends


class JavaClientError(RuntimeError):
    """The Java client's JVM died, or did not answer a request in time."""


def producer_props(bootstrap: str, p: ProducerConfig, txn_id: str | None) -> dict[str, str]:
    """The Java producer's settings: `clients.make_producer`, in the Java client's names; with `txn_id`, a
    transactional producer of that transactional.id (and client.id)."""
    txn = {} if txn_id is None else {"client.id": txn_id, "transactional.id": txn_id,
                                     "transaction.timeout.ms": txn_timeout_ms(p)}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in {
        "bootstrap.servers": bootstrap,
        **txn,
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
    """The Java consumer's settings: `clients.make_consumer`, in the Java client's names."""
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


TERM_S = 10  # how long a JVM told to end (SIGTERM) may take to write out what it recorded


def end_jvm(proc: subprocess.Popen[str], wait_s: float) -> bool:
    """Wait up to `wait_s` for `proc` to exit; then SIGTERM it (a kchaos JVM's shutdown hook writes out what it
    recorded) and wait TERM_S more; then kill it. Whether it exited within `wait_s`."""
    try:
        proc.wait(wait_s)
        return True
    except subprocess.TimeoutExpired:
        proc.terminate()
    try:
        proc.wait(TERM_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return False


# What a share consumer refuses to be given: the group's settings (share.auto.offset.reset, share.isolation.level,
# share.session.timeout.ms) are the group's own configuration, and acknowledgements replace offset commits.
SHARE_REFUSED = ("group.id", "enable.auto.commit", "auto.offset.reset", "isolation.level", "session.timeout.ms")


def share_consumer_props(bootstrap: str, timeout_ms: int) -> dict[str, str]:
    """A share group member's settings: `consumer_props` without what KafkaShareConsumer refuses (SHARE_REFUSED)."""
    return {k: v for k, v in consumer_props(bootstrap, "", "read_committed", timeout_ms).items()
            if k not in SHARE_REFUSED}


def group_consumer_props(bootstrap: str, client_id: str, group: str, max_records: int, timeout_ms: int, *,
                         protocol: str = "classic", isolation: str = "read_committed") -> dict[str, str]:
    """The settings of a Java group member: `clients.make_group_consumer` without auto-commit, at
    `isolation`, each poll returning at most `max_records` records. `protocol` is group.protocol: classic, or
    consumer (KIP-848), whose timeouts the broker sets (the Java client refuses them set)."""
    props = {**consumer_props(bootstrap, client_id, isolation, timeout_ms), **{k: str(v) for k, v in {
        "group.id": group,
        "group.protocol": protocol,
        "max.poll.records": max_records,
        "heartbeat.interval.ms": 1000,
        # A member that stops polling (a crashed client) leaves the group within seconds, as librdkafka's does.
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
    }.items()}}
    if protocol != "classic":
        del props["heartbeat.interval.ms"], props["session.timeout.ms"]
    return props


class JavaProcess:
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
        self._send({"p": process, **request})
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise JavaClientError(f"no reply from the Java client in {timeout:g} s to {request['op']}") from None
        if reply is CLOSED:
            q.put(CLOSED)  # every later call of this process sees it too
            raise JavaClientError(f"the Java client exited ({self.proc.poll()})")
        return reply

    def notify(self, process: int, request: dict[str, Any]) -> None:
        """Send `request` for `process` without waiting, for one the JVM does not answer (a "crash");
        JavaClientError when the JVM is gone."""
        self._send({"p": process, **request})

    def _send(self, request: dict[str, Any]) -> None:
        line = json.dumps(request, separators=(",", ":")) + "\n"
        try:
            with self._write:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            raise JavaClientError(f"the Java client is gone (exit {self.proc.poll()}): {e}") from None

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
