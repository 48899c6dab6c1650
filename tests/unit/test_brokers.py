"""The add-broker and decommission nemeses, against a stand-in cluster with a spare and a stand-in reassignment
tool."""
from __future__ import annotations

import pytest

from kchaos.clusters import admin
from kchaos.clusters.admin import PartitionState
from kchaos.core.config import TestConfig
from kchaos.core.protocols import FaultSkipped
from kchaos.nemesis import brokers


class Topics:
    """list_topics' answer: topics with their partitions' replicas."""

    class T:
        def __init__(self, parts: dict[int, list[int]]):
            self.error = None
            self.partitions = {p: type("P", (), {"id": p, "replicas": r})() for p, r in parts.items()}

    def __init__(self, topics: dict[str, dict[int, list[int]]]):
        self.topics = {name: self.T(parts) for name, parts in topics.items()}


class Spared:
    """Brokers n1..n3 running, n4 a spare; the moves it was asked for, and what joined and retired."""

    nodes, controllers, spares = ["n1", "n2", "n3", "n4"], ["n1", "n2", "n3"], ["n4"]

    def __init__(self):
        self.members = {"n1", "n2", "n3"}
        self.moves: list[dict] = []
        self.joined: list[str] = []
        self.retired: list[str] = []

    def bootstrap(self):
        return "b:9092"

    def node_of(self, i):
        return f"n{i}"

    def id_of(self, node):
        return int(node[1:])

    def is_running(self, node):
        return node in self.members

    def join(self, node, timeout=60.0):
        self.members.add(node)
        self.joined.append(node)

    def retire(self, node):
        self.members.discard(node)
        self.retired.append(node)
        return f"Broker {node[1:]} is no longer registered."


@pytest.fixture
def tool(monkeypatch):
    """The reassignment tool: every move started completes at once."""
    started: list[dict] = []
    monkeypatch.setattr(brokers.Reassignments, "start", lambda self, moves: (started.append(moves),
                                                                           self.pending.update(moves), "ok")[2])
    monkeypatch.setattr(brokers.Reassignments, "settle", lambda self, s: not self.pending.clear())
    monkeypatch.setattr(brokers.Reassignments, "cancel", lambda self: self.pending.clear())
    return started


def test_decommissioning_a_broker_moves_every_replica_it_holds_then_unregisters_it(tool, monkeypatch):
    c = Spared()
    monkeypatch.setattr(admin, "registered_brokers", lambda *a, **k: {int(n[1:]) for n in c.members})
    topics = Topics({"kchaos": {0: [1, 2, 3], 1: [2, 3, 1]}, "__consumer_offsets": {0: [3, 1, 2]}})
    monkeypatch.setattr(admin, "admin_client", lambda *a, **k: type("A", (), {"list_topics": lambda s, **k: topics})())
    out = brokers.Decommission(c, TestConfig()).begin(["n1"], {"pick": 0})
    # no running broker lacked a replica of any of n1's partitions: the spare was added to take them
    assert c.joined == ["n4"] and out["added"] == ["n4"] and c.retired == ["n1"]
    (moves,) = tool
    assert moves == {("kchaos", 0): [4, 2, 3], ("kchaos", 1): [2, 3, 4], ("__consumer_offsets", 0): [3, 4, 2]}
    assert out["moved"] == {"kchaos-0": ["n4", "n2", "n3"], "kchaos-1": ["n2", "n3", "n4"],
                            "__consumer_offsets-0": ["n3", "n4", "n2"]}
    assert out["drained"] is True and out["unregistered"] == "Broker 1 is no longer registered."


def test_a_decommission_with_no_broker_to_take_the_replicas_and_no_spare_left_is_skipped(tool, monkeypatch):
    c = Spared()
    c.spares = []
    monkeypatch.setattr(admin, "registered_brokers", lambda *a, **k: {1, 2, 3})
    topics = Topics({"kchaos": {0: [1, 2, 3]}})
    monkeypatch.setattr(admin, "admin_client", lambda *a, **k: type("A", (), {"list_topics": lambda s, **k: topics})())
    with pytest.raises(FaultSkipped, match="no spare broker is left"):
        brokers.Decommission(c, TestConfig()).begin(["n1"], {})
    assert c.retired == [] and tool == []


def test_a_drain_that_does_not_complete_is_cancelled_and_the_broker_stays(tool, monkeypatch):
    c = Spared()
    c.members.add("n4")
    monkeypatch.setattr(admin, "registered_brokers", lambda *a, **k: {1, 2, 3, 4})
    topics = Topics({"kchaos": {0: [1, 2, 3]}})
    monkeypatch.setattr(admin, "admin_client", lambda *a, **k: type("A", (), {"list_topics": lambda s, **k: topics})())
    monkeypatch.setattr(brokers.Reassignments, "settle", lambda self, s: False)
    out = brokers.Decommission(c, TestConfig()).begin(["n1"], {})
    assert out["drained"] is False and out["nodes"] == [] and c.retired == [] and c.joined == []


def test_adding_a_broker_moves_a_follower_of_each_partition_onto_it(tool, monkeypatch):
    c = Spared()
    monkeypatch.setattr(admin, "partitions", lambda *a, **k: {
        0: PartitionState(0, 1, (1, 2, 3), (1, 2, 3)), 1: PartitionState(1, 2, (2, 3, 1), (2, 3, 1))})
    nem = brokers.AddBroker(c, TestConfig())
    out = nem.invoke({"f": "add-broker", "pick": 5})
    (moves,) = tool
    assert c.joined == ["n4"] and out["nodes"] == ["n4"]
    for (topic, p), to in moves.items():
        leader = {0: 1, 1: 2}[p]
        assert topic == "kchaos" and 4 in to and leader in to and len(to) == 3
    with pytest.raises(FaultSkipped, match="no spare broker is left"):
        nem.invoke({"f": "add-broker"})
