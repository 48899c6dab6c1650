"""The queue workload's clients on Kafka's Java client (`--client java`), in one JVM.

`JavaQueueClients` starts `KchaosQueueClients` (workloads/java/), gives it the
run's `LoopSpec` and the processes of its assigned consumers, and reads its
counts. The JVM runs every producer instance on a thread of its own, with the
same slots, values and pacing as `ProducerLoop`, and every consumer as
`QueueWorkload`'s assigned consumers poll; it records each op's invocation and
completion in `history.parts/java-clients.jsonl` on the history's clock. The
harness merges that into history.jsonl after the run, as it merges the Python
workers' streams (`core.send_stream.merge_streams`). When the harness dies, the
JVM sees its stdin end, writes out what it recorded and exits.
"""
from __future__ import annotations

import json
import logging
import subprocess
import threading
from pathlib import Path

from kchaos.core.config import ProducerConfig
from kchaos.core.send_stream import PARTS_DIR
from kchaos.workloads.java_build import JavaProgram
from kchaos.workloads.java_client import consumer_props, end_jvm, producer_props
from kchaos.workloads.queue.producer_procs import COUNT_KEYS, LoopSpec

log = logging.getLogger("kchaos.workload")
PART = "java-clients.jsonl"
KEYS = (*COUNT_KEYS, "polled")
POLL_RECORDS = 500  # as many as the harness's own consumers take in one consume()


class JavaQueueClients:
    """Every producer instance of the run, and the assigned consumers `consumers` (their processes), in one JVM of
    the Java client; `counts()` and `stop()` as `ProducerProcesses`'s, with the records polled."""

    def __init__(self, program: JavaProgram, spec: LoopSpec, consumers: list[int], run_dir: Path, t0_ns: int):
        self.program = program
        self.spec = spec
        self.consumers = consumers
        self.parts = Path(run_dir) / PARTS_DIR
        self.t0 = t0_ns
        self._counts = dict.fromkeys(KEYS, 0)
        self._proc: subprocess.Popen[str] | None = None
        self._readers: list[threading.Thread] = []

    def start(self) -> None:
        """Start the JVM and hand it the spec; its producers start sending, and its consumers polling, at once."""
        self.parts.mkdir(exist_ok=True)
        p = ProducerConfig(**self.spec.producer)
        spec = {"producer": producer_props(self.spec.bootstrap, p, None), "topic": self.spec.topic,
                "partitions": self.spec.partitions, "instances": list(range(self.spec.instances)),
                "total": self.spec.instances, "in_flight": self.spec.in_flight,
                "rate": 0 if self.spec.rate == float("inf") else self.spec.rate, "seed": self.spec.seed,
                "t0_ns": self.t0, "path": str(self.parts / PART), "retries": p.retries,
                "delivery_timeout_ms": p.delivery_timeout_ms, "consumers": self.consumers,
                "consumer": {**consumer_props(self.spec.bootstrap, "", "read_committed", 10_000),
                             "max.poll.records": str(POLL_RECORDS)}}
        command = self.program.queue_command()
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, bufsize=1)
        log.info("Java clients started (pid %d, kafka-clients %s): %s", self._proc.pid,
                 self.program.clients_version, " ".join(command))
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(spec, separators=(",", ":")) + "\n")
        self._proc.stdin.flush()
        self._readers = [threading.Thread(target=f, name=f"java-clients-{n}", daemon=True)
                         for f, n in ((self._read_counts, "out"), (self._read_log, "err"))]
        for t in self._readers:
            t.start()

    def _read_counts(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                reply = json.loads(line)
                self._counts = {k: int(reply[k]) for k in KEYS}
            except (ValueError, KeyError, TypeError):
                log.warning("Java clients: not a count line: %r", line[:500])

    def _read_log(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            log.info("%s", line.rstrip())

    def counts(self) -> dict[str, int]:
        """Sends invoked and completed, and records polled, so far, as the JVM last printed them (at most 200 ms
        old)."""
        return dict(self._counts)

    def stop(self, timeout: float) -> None:
        """Ask the JVM to stop and wait for it to record its outstanding sends; after `timeout`, end it (it writes
        out what it recorded), and kill it if that takes longer than TERM_S."""
        if self._proc is None:
            return
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write("stop\n")
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        if not end_jvm(self._proc, timeout):
            log.warning("the Java clients did not stop in %g s; ended them", timeout)
        for t in self._readers:
            t.join(5)
        log.info("Java clients exited with %s", self._proc.returncode)
        self._proc = None

