"""An operator's own Kafka on a host (`kafka: external` in the hosts file), driven by their commands.

kchaos installs nothing of Kafka and writes no config there: it starts, stops, kills, pauses and
resumes the operator's Kafka with the command lines the hosts file gives, reads the partition logs
in the operator's `data_dir`, and puts only its node scripts (for the network and slow faults) in
the directory it owns. At teardown the operator's Kafka is left running.
"""
from __future__ import annotations

from pathlib import Path

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from kchaos.clusters.kafka_node import KafkaNode, NodeError, NodeLayout
from kchaos.clusters.kraft import NodeSpec
from kchaos.clusters.remote import Remote
from kchaos.core.hosts import ExternalKafka

LISTEN_TIMEOUT_S = 60.0
LISTEN_POLL_S = 0.5


class ExternalKafkaNode(KafkaNode):
    """The operator's Kafka on one host. Whether it runs is whether something listens on its Kafka port."""

    owns_kafka = False

    def __init__(self, spec: NodeSpec, remote: Remote, layout: NodeLayout, ext: ExternalKafka, *, sudo: bool):
        super().__init__(spec, remote, layout, sudo=sudo)
        self.ext = ext

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

    def format(self, cluster_id: str, features: tuple[str, ...] = ()) -> None:
        """Nothing: the operator's cluster is formatted already (a run asking for features is refused)."""

    def start(self) -> None:
        """The operator's start command, unless Kafka already listens; then wait until it listens (at most
        LISTEN_TIMEOUT_S). Whether it runs is whether it listens, and a JVM listens only seconds after its start
        command returned: without the wait, a cluster waiting for its brokers would take the one starting for
        one that exited."""
        if self.is_running():
            return
        self._command("start", self.ext.start)
        try:
            Retrying(stop=stop_after_delay(LISTEN_TIMEOUT_S), wait=wait_fixed(LISTEN_POLL_S),
                     retry=retry_if_result(lambda listening: not listening))(self.is_running)
        except RetryError:
            raise NodeError(f"{self.name}: the start command returned, but nothing listens on port "
                            f"{self.ext.kafka_port} after {LISTEN_TIMEOUT_S:.0f} s") from None

    def stop(self) -> None:
        """The operator's stop command (a clean shutdown)."""
        self._command("stop", self.ext.stop, ok_if_down=True)

    def kill(self) -> None:
        """The operator's kill command (SIGKILL)."""
        self._command("kill", self.ext.kill, ok_if_down=True)

    def pause(self) -> None:
        """The operator's pause command."""
        self._command("pause", self.ext.pause)

    def resume(self) -> None:
        """The operator's resume command; nothing without one (then nothing was paused) or when Kafka is down."""
        if self.ext.resume is not None:
            self._command("resume", self.ext.resume, ok_if_down=True)

    def is_running(self) -> bool:
        """Whether a process listens on the Kafka port (a paused one still does)."""
        code, out = self.exec(["ss", "-Hltn", f"sport = :{self.ext.kafka_port}"], 20)
        return code == 0 and bool(out.strip())

    def log_tail(self, lines: int = 15) -> str:
        """kchaos does not know where the operator's Kafka logs."""
        return "(an external Kafka: its logs are wherever the operator's setup writes them)"

    def fetch_conf(self, dest: Path) -> int:
        """Nothing: kchaos wrote no config and keeps no logs for an external Kafka."""
        return 0
