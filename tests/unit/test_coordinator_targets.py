"""Coordinator targets: the broker leading the internal topic partition that holds one of the run's transactional
ids or consumer groups, found as Kafka finds it, drawn from the seed, recorded, and refused where a run has none."""
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest

from kchaos import nemesis
from kchaos.clusters import admin
from kchaos.core.config import ConfigError, NemesisConfig, TestConfig, WorkloadConfig
from kchaos.core.workload_kind import kind_of
from kchaos.nemesis.base import TargetedNemesis
from kchaos.nemesis.targets import FaultSkipped, Target, java_hash, key_partition, resolve_recorded

# Each string's String.hashCode() as a JVM computed it (OpenJDK 17), and Kafka's partition of it among 50.
JAVA = [("hello", 99162322, 22), ("", 0, 0), ("kchaos-42-group", -728547512, 12),
        ("kchaos-1-txn-0", 1808974105, 5), ("é€𝄞x", 519296651, 1),
        ("polygenelubricants", -2**31, 0)]  # the one int whose abs is itself: Kafka's Utils.abs makes it 0


@pytest.mark.parametrize("text, hashed, partition", JAVA)
def test_keys_land_in_the_partition_kafka_puts_them_in(text, hashed, partition):
    assert java_hash(text) == hashed
    assert key_partition(text, 50) == partition


class Cluster:
    """Three brokers; partition p of every internal topic is led by broker p % 3 + 1."""

    nodes, controllers = ["n1", "n2", "n3"], []

    def bootstrap(self):
        return "n1:9092"

    def node_of(self, broker_id):
        return f"n{broker_id}" if broker_id in (1, 2, 3) else None


@pytest.fixture
def internal(monkeypatch):
    """admin.partitions of a 50-partition internal topic; the topics it was asked for."""
    asked = []

    def partitions(bootstrap, topic, timeout=5.0, client=None):
        asked.append(topic)
        return {p: SimpleNamespace(leader=p % 3 + 1) for p in range(50)}
    monkeypatch.setattr(admin, "partitions", partitions)
    return asked


def test_a_coordinator_target_is_the_leader_of_its_keys_partition_and_is_recorded(internal):
    keys = {"group": ("kchaos-42-group",), "txn": ("kchaos-1-txn-0", "kchaos-1-txn-1")}
    nodes, record = resolve_recorded(Cluster(), "kchaos", {"target": "group-coordinator", "pick": 7}, keys)
    assert nodes == ["n1"]  # partition 12, led by broker 12 % 3 + 1
    assert record == {"coordinator": {"key": "kchaos-42-group", "partition": "__consumer_offsets-12"}}
    picks = {resolve_recorded(Cluster(), "kchaos", {"target": "txn-coordinator", "pick": pick}, keys)[1]
             ["coordinator"]["key"] for pick in range(20)}
    assert picks == set(keys["txn"])  # the pick draws among the run's ids...
    again = [resolve_recorded(Cluster(), "kchaos", {"target": "txn-coordinator", "pick": 3}, keys) for _ in range(3)]
    assert all(r == again[0] for r in again)  # ...the same one for the same pick
    assert internal[:2] == ["__consumer_offsets", "__transaction_state"]
    named = resolve_recorded(Cluster(), "kchaos", {"target": "txn-coordinator", "nodes": ["n3"]}, keys)
    assert named == (["n3"], {})  # a hand-written op that names its nodes keeps them


def test_no_key_or_no_internal_topic_skips_the_fault(monkeypatch, internal):
    with pytest.raises(FaultSkipped, match="no txn key"):
        resolve_recorded(Cluster(), "kchaos", {"target": "txn-coordinator"}, {"group": ("g",)})

    def missing(bootstrap, topic, timeout=5.0, client=None):
        raise admin.KafkaException("topic __transaction_state missing")
    monkeypatch.setattr(admin, "partitions", missing)
    with pytest.raises(FaultSkipped, match="__transaction_state cannot be read"):
        resolve_recorded(Cluster(), "kchaos", {"target": "txn-coordinator"}, {"txn": ("t",)})


@pytest.mark.parametrize("spec", ["kill:txn-coordinator", "pause:group-coordinator", "partition-one:txn-coordinator",
                                  "power-fail:group-coordinator", "clock-skew:group-coordinator",
                                  "disk-full:txn-coordinator", "slow-follower:txn-coordinator"])
def test_every_node_fault_takes_the_coordinator_targets(spec):
    nemesis.check_spec(spec)
    assert str(Target.parse(spec.split(":")[1])) == spec.split(":")[1]


def test_each_workload_names_its_coordinator_keys():
    def of(kind, **w):
        return kind_of(kind).coordinators(TestConfig(seed=42, workload=replace(WorkloadConfig(kind=kind), **w)))
    assert of("queue") == {}
    assert of("queue", consumer_mode="subscribe") == {"group": ("kchaos-42-group",)}
    txn = of("txn", producers=2)
    assert txn == {"txn": ("kchaos-42-txn-0", "kchaos-42-txn-1"), "group": ("kchaos-txn0", "kchaos-txn1")}
    assert of("txn", producers=2, consumer_mode="subscribe")["group"] == ("kchaos-42-group",)
    assert of("copy", consumers=2) == {"txn": ("kchaos-42-copy-0", "kchaos-42-copy-1"), "group": ("kchaos-42-copy",)}


@pytest.mark.parametrize("spec, needle", [
    ("kill:group-coordinator", "this run has no consumer group (--consumer-mode subscribe"),
    ("pause:txn-coordinator", "this run has no transactional id (--workload txn or copy)"),
])
def test_a_run_without_such_keys_is_refused_before_anything_is_made(tmp_path, spec, needle):
    from kchaos.harness.build import preflight

    cfg = TestConfig(seed=1, store=str(tmp_path / "r"), nemesis=NemesisConfig(names=(spec,)))
    with pytest.raises(ConfigError, match=re.escape(needle)):
        preflight(cfg)
    assert not (tmp_path / "r").exists()


def test_the_fault_records_which_key_and_partition_it_aimed_at(internal):
    class Fault:
        def begin(self, nodes, op):
            return {}

        def end(self, nodes):
            return {}

        def heal(self):
            pass
    cfg = TestConfig(seed=42, workload=WorkloadConfig(consumer_mode="subscribe"))
    n = TargetedNemesis("kill", Fault(), Cluster(), cfg, "kill", "start", "one")
    out = n.invoke({"f": "kill", "target": "group-coordinator", "pick": 1})
    assert out["targets"] == out["nodes"] == ["n1"]
    assert out["coordinator"] == {"key": "kchaos-42-group", "partition": "__consumer_offsets-12"}
