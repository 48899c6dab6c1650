"""Coordinator targets: the broker leading the internal topic partition that holds one of the run's transactional
ids, consumer groups or share-group partitions, found as Kafka finds it, drawn from the seed, recorded, and refused
where a run has none."""
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
from confluent_kafka import Uuid

from kchaos import nemesis
from kchaos.clusters import admin
from kchaos.core.config import ConfigError, NemesisConfig, TestConfig, WorkloadConfig
from kchaos.core.workload_kind import kind_of
from kchaos.nemesis.base import TargetedNemesis
from kchaos.nemesis.targets import FaultSkipped, Target, java_hash, key_partition, resolve_recorded, share_key

# Each string's String.hashCode() as a JVM computed it (OpenJDK 17), and Kafka's partition of it among 50.
JAVA = [("hello", 99162322, 22), ("", 0, 0), ("kchaos-42-group", -728547512, 12),
        ("kchaos-1-txn-0", 1808974105, 5), ("é€𝄞x", 519296651, 1),
        ("polygenelubricants", -2**31, 0)]  # the one int whose abs is itself: Kafka's Utils.abs makes it 0


@pytest.mark.parametrize("text, hashed, partition", JAVA)
def test_keys_land_in_the_partition_kafka_puts_them_in(text, hashed, partition):
    assert java_hash(text) == hashed
    assert key_partition(text, 50) == partition


# SharePartitionKey.asCoordinatorKey("kchaos-share-47", new Uuid(123456789, 987654321), p), its hashCode and
# ShareCoordinatorService's partition of it among 3, from kafka 4.4.0's jars on OpenJDK 17.
SHARE_ID = "AAAAAAdbzRUAAAAAOt5osQ"
SHARE = [(0, -1191292122, 0), (1, -1191292121, 2), (2, -1191292120, 1)]


@pytest.mark.parametrize("partition, hashed, state_partition", SHARE)
def test_a_share_partitions_state_lands_where_the_share_coordinator_puts_it(partition, hashed, state_partition):
    key = share_key(f"kchaos-share-47:kchaos:{partition}", SHARE_ID)
    assert key == f"kchaos-share-47:{SHARE_ID}:{partition}"
    assert java_hash(key) == hashed and key_partition(key, 3) == state_partition


# Kafka's Uuid.toString of these bits (OpenJDK 17, kafka-clients 4.4.0): the URL-safe alphabet.
UUIDS = [((-1, -1), "_____________________w"), ((0xFBEFBEFBEFBEFBEF - (1 << 64), 0x3ADE68B1), "----------8AAAAAOt5osQ"),
         ((123456789, 987654321), SHARE_ID)]


@pytest.mark.parametrize("bits, text", UUIDS)
def test_a_topic_id_is_written_as_kafka_writes_it(bits, text):
    assert admin.kafka_uuid(Uuid(*bits)) == text


def test_a_share_coordinator_target_looks_up_the_topics_id_and_records_the_key(monkeypatch):
    monkeypatch.setattr(admin, "topic_id", lambda bootstrap, topic, timeout=5.0: {"kchaos": SHARE_ID}[topic])
    monkeypatch.setattr(admin, "partitions", lambda bootstrap, topic, timeout=5.0, client=None:
                        {p: SimpleNamespace(leader=p + 1) for p in range(3)} if topic == "__share_group_state" else {})
    keys = kind_of("share").coordinators(TestConfig(seed=47, workload=WorkloadConfig(kind="share")))
    assert keys["share"] == ("kchaos-share-47:kchaos:0", "kchaos-share-47:kchaos:1", "kchaos-share-47:kchaos:2")
    seen = {}
    for pick in range(30):
        nodes, record = resolve_recorded(Cluster(), "kchaos", {"target": "share-coordinator", "pick": pick}, keys)
        seen[record["coordinator"]["key"]] = (nodes, record["coordinator"]["partition"])
    assert seen == {f"kchaos-share-47:{SHARE_ID}:{p}": ([f"n{sp + 1}"], f"__share_group_state-{sp}")
                    for p, _, sp in SHARE}


class Cluster:
    """Three brokers; partition p of every internal topic is led by broker p % 3 + 1."""

    nodes, controllers, members = ["n1", "n2", "n3"], [], {"n1", "n2", "n3"}

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
                                  "disk-full:txn-coordinator", "slow-follower:txn-coordinator",
                                  "kill:share-coordinator", "power-fail:share-coordinator"])
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
    ("kill:share-coordinator", "this run has no share group (--workload share)"),
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
