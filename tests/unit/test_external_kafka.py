"""An operator's own Kafka (`kafka: external`): kchaos runs their commands, and takes a node's Kafka to be running
when something listens on its port, or when kchaos started it moments ago (a KRaft broker cut off from the
controllers does not listen until the cut heals)."""
from __future__ import annotations

from kchaos.clusters import kafka_external
from kchaos.clusters.kafka_external import ExternalKafkaNode
from kchaos.clusters.kafka_node import NodeLayout
from kchaos.clusters.kraft import NodeSpec
from kchaos.clusters.remote import Result
from kchaos.core.hosts import ExternalKafka


class Host:
    """A host whose Kafka port listens or not, as the test says; it records the command lines it was given."""

    name, address = "n1", "10.0.0.1"

    def __init__(self) -> None:
        self.listening = False
        self.ran: list[str] = []

    def run(self, cmd, *, timeout, check=False, sudo=False, stdin=None) -> Result:
        line = cmd if isinstance(cmd, str) else " ".join(cmd)
        self.ran.append(line)
        out = "LISTEN 0 50 *:9092 *:*" if line.startswith("ss ") and self.listening else ""
        return Result(self.name, line, 0, out, "", 0.0)


def node(host: Host) -> ExternalKafkaNode:
    ext = ExternalKafka(start="theirs start", stop="theirs stop", kill="theirs kill", node_id=1, data_dir="/d")
    return ExternalKafkaNode(NodeSpec("n1", 1, "10.0.0.1", ("broker", "controller")), host, NodeLayout(), ext,
                             sudo=False)


def test_a_started_node_counts_as_running_until_it_had_time_to_listen(monkeypatch):
    host = Host()
    n = node(host)
    assert not n.is_running()
    n.start()  # returns at once: a broker cut off from the quorum listens only once the cut heals
    assert "theirs start" in host.ran and n.is_running()
    n.start()
    assert host.ran.count("theirs start") == 1  # running: not started twice
    monkeypatch.setattr(kafka_external, "LISTEN_TIMEOUT_S", 0.0)
    assert not n.is_running()  # never listened within the grace: taken to have exited
    host.listening = True
    assert n.is_running()


def test_a_killed_node_is_down_at_once_and_its_start_runs_again():
    host = Host()
    n = node(host)
    n.start()
    n.kill()  # within the grace: the kill command still runs
    assert "theirs kill" in host.ran and not n.is_running()
    n.start()
    assert host.ran.count("theirs start") == 2
