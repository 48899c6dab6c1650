"""An operator's own Kafka on a host (`kafka: external` in the hosts file), driven by their commands.

kchaos installs nothing of Kafka and writes no config there: it starts, stops, kills, pauses and
resumes the operator's Kafka with the command lines the hosts file gives, reads the partition logs
in the operator's `data_dir`, and puts only its node scripts (for the network and slow faults) in
the directory it owns. At teardown the operator's Kafka is left running.
"""
from __future__ import annotations

import time
from pathlib import Path

from kchaos.clusters.kafka_node import KafkaNode, NodeError, NodeLayout
from kchaos.clusters.kraft import NodeSpec
from kchaos.clusters.remote import Remote
from kchaos.core.hosts import ExternalKafka

LISTEN_TIMEOUT_S = 60.0


class ExternalKafkaNode(KafkaNode):
    """The operator's Kafka on one host. Whether it runs is whether something listens on its Kafka port, or
    kchaos started it moments ago."""

    owns_kafka = False

    def __init__(self, spec: NodeSpec, remote: Remote, layout: NodeLayout, ext: ExternalKafka, *, sudo: bool):
        super().__init__(spec, remote, layout, sudo=sudo)
        self.ext = ext
        self._started: float | None = None  # when kchaos's start command last returned (monotonic)

    @property
    def data_dir(self) -> str:
        """The operator's log.dirs."""
        return self.ext.data_dir

    def _command(self, what: str, line: str | None, ok_if_down: bool = False) -> None:
        if line is None:
            raise NodeError(f"{self.name}: the hosts file gives no {what} command")
        if ok_if_down and not self.is_running():
            return
        code, out = self.exec(line, 120)
        if code != 0:
            raise NodeError(f"{self.name}: {what} command `{line}` failed ({code}): {out.strip()[-300:]}")

    def install(self, dist: object, lazyfs_bin: Path | None) -> bool:
        """Only the node scripts (for the faults); the operator's Kafka is theirs."""
        self.run(["mkdir", "-p", self.layout.bin, self.layout.conf, self.layout.run], check=True)
        self._install_scripts(lazyfs_bin=None)
        return False

    def configure(self, properties: str, env: dict[str, str]) -> None:
        """The scripts' node.env only: the operator's server.properties stays as it is."""
        self.write(f"{self.layout.bin}/node.env", self.layout.env(env))

    def format(self, cluster_id: str, features: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> None:
        """Nothing: the operator's cluster is formatted already (a run asking for features is refused)."""

    def start(self) -> None:
        """The operator's start command, unless Kafka already listens. A JVM listens only seconds after its start
        command returned, and a KRaft broker cut off from the controllers not until the cut heals and it has
        caught up with the metadata log: so the node counts as running from the command's return for
        LISTEN_TIMEOUT_S (`is_running`), and a cluster waiting for its brokers takes one that never listens by
        then for one that exited."""
        if self.is_running():
            return
        self._command("start", self.ext.start)
        self._started = time.monotonic()

    def stop(self) -> None:
        """The operator's stop command (a clean shutdown)."""
        self._command("stop", self.ext.stop, ok_if_down=True)
        self._started = None

    def kill(self) -> None:
        """The operator's kill command (SIGKILL)."""
        self._command("kill", self.ext.kill, ok_if_down=True)
        self._started = None

    def pause(self) -> None:
        """The operator's pause command."""
        self._command("pause", self.ext.pause)

    def resume(self) -> None:
        """The operator's resume command; nothing without one (then nothing was paused) or when Kafka is down."""
        if self.ext.resume is not None:
            self._command("resume", self.ext.resume, ok_if_down=True)

    def is_running(self) -> bool:
        """Whether a process listens on the Kafka port (a paused one still does), or kchaos's start command
        returned less than LISTEN_TIMEOUT_S ago (see `start`)."""
        if self._started is not None and time.monotonic() - self._started < LISTEN_TIMEOUT_S:
            return True
        code, out = self.exec(["ss", "-Hltn", f"sport = :{self.ext.kafka_port}"], 20)
        return code == 0 and bool(out.strip())

    def log_tail(self, lines: int = 15) -> str:
        """kchaos does not know where the operator's Kafka logs."""
        return "(an external Kafka: its logs are wherever the operator's setup writes them)"

    def log_lines(self, pattern: str) -> str:
        """None to read: kchaos does not know where the operator's Kafka logs."""
        return ""

    def fetch_conf(self, dest: Path) -> int:
        """Nothing: kchaos wrote no config and keeps no logs for an external Kafka."""
        return 0
