"""The test builder's checks that need no machine: a hosts file shapes the cluster, and an operator's own
Kafka (`kafka: external`) refuses the faults kchaos cannot make on it, before anything connects."""
from __future__ import annotations

import pytest
import yaml

from kchaos.core.config import ClusterConfig, ConfigError, NemesisConfig, TestConfig, TopicConfig
from kchaos.harness.build import Test, preflight


def hosts_file(tmp_path, external: bool, pause: bool = True, roles=("both", "both", "both", "broker")):
    nodes = []
    for i, role in enumerate(roles, 1):
        n = {"name": f"n{i}", "address": f"10.0.0.{i}", "role": role}
        if external:
            cmds = {"start": "systemctl start kafka", "stop": "systemctl stop kafka",
                    "kill": "systemctl kill -s KILL kafka"}
            if pause:
                cmds.update(pause="systemctl kill -s STOP kafka", resume="systemctl kill -s CONT kafka")
            n.update(kafka="external", node_id=i, data_dir="/srv/kafka", commands=cmds)
        nodes.append(n)
    f = tmp_path / "hosts.yaml"
    f.write_text(yaml.safe_dump({"nodes": nodes}))
    return f


def cfg(tmp_path, f, names=("kill-leader",), storage="auto"):
    return TestConfig(store=str(tmp_path / "results"), nemesis=NemesisConfig(names=names),
                      cluster=ClusterConfig(hosts=str(f), storage=storage))


def test_the_hosts_file_gives_the_cluster_its_brokers(tmp_path):
    out = preflight(cfg(tmp_path, hosts_file(tmp_path, external=False)))
    assert out.cluster.nodes == 4 and out.cluster.controllers == 0 and out.cluster.backend == "ssh"
    assert out.to_dict()["cluster"]["hosts"] == str((tmp_path / "hosts.yaml").resolve())
    assert TestConfig().to_dict()["cluster"]["hosts"] is None  # a Docker run's


@pytest.mark.parametrize("names, pause, storage, refused", [
    (("kill-leader", "partition-leader", "slow-follower"), False, "auto", None),
    (("power-fail",), True, "auto", "power-fail"),
    (("slow-disk",), True, "auto", "slow-disk"),
    (("disk-full",), True, "auto", "disk-full"),
    (("torn-write:leader",), True, "auto", "torn-write"),
    (("mix",), True, "auto", r"mix \(its page-cache, slow, disk families\)"),
    (("cpu-starve",), True, "auto", "cpu-starve"),
    (("clock-skew",), True, "auto", "clock-skew"),
    (("clock-strobe:leader",), True, "auto", "clock-strobe:leader"),
    (("corrupt:follower",), True, "auto", "cannot take corrupt:follower"),
    (("wipe:follower",), True, "auto", "cannot take wipe:follower"),
    (("pause",), False, "auto", "pause"),
    (("pause",), True, "auto", None),
    (("kill",), True, "lazyfs", "--storage lazyfs"),
])
def test_an_external_kafka_refuses_what_kchaos_cannot_do_to_it(tmp_path, names, pause, storage, refused):
    c = cfg(tmp_path, hosts_file(tmp_path, external=True, pause=pause), names, storage)
    if refused is None:
        assert preflight(c).cluster.storage == "plain"
    else:
        with pytest.raises(ConfigError, match=refused):
            preflight(c)


def test_an_external_kafka_refuses_format_time_features(tmp_path):
    f = hosts_file(tmp_path, external=True)
    c = TestConfig(store=str(tmp_path / "results"), cluster=ClusterConfig(
        hosts=str(f), kafka_version="4.0.2", kafka_features=("eligible.leader.replicas.version=1",)))
    with pytest.raises(ConfigError, match="formatted already: --kafka-feature cannot apply"):
        preflight(c)


def test_corrupt_needs_a_topic_that_rolls_its_segments(tmp_path):
    c = TestConfig(store=str(tmp_path / "results"), nemesis=NemesisConfig(names=("corrupt",)))
    with pytest.raises(ConfigError, match="--segment-ms"):
        preflight(c)
    ok = preflight(c.with_(topic=TopicConfig(segment_ms=5000)))
    assert ok.cluster.storage == "plain" and ok.to_dict()["topic"]["segment_ms"] == 5000


def test_network_faults_heal_before_the_others():
    """A broker restarted while still cut off from the controllers neither serves nor listens: the nemeses come
    back network ones first, so that the heal reconnects the nodes before it restarts their Kafka."""
    made: list[str] = []

    def make(spec, cluster, cfg_):
        made.append(spec)
        return spec

    specs = ("kill-leader", "partition-leader", "pause", "partition-one:majority")
    test = Test(cfg=TestConfig(), provisioner=None, workload=None, schedule=[], specs=specs, make_nemesis=make,
                faults=(), dist=None)
    order = ["partition-leader", "partition-one:majority", "kill-leader", "pause"]
    assert list(test.nemeses(cluster=None)) == order and made == order


@pytest.mark.parametrize("names, nodes, spares, refused", [
    (("add-broker",), 3, 0, "add-broker starts a spare broker: give --spares N"),
    (("add-broker",), 3, 1, None),
    (("reassign",), 3, 0, "reassign moves replicas to a broker that holds none"),
    (("reassign:follower",), 4, 0, None),
    (("decommission:leader",), 3, 0, "decommission moves replicas"),
    (("decommission:leader",), 3, 1, None),
])
def test_membership_faults_need_a_broker_to_move_to(tmp_path, names, nodes, spares, refused):
    c = TestConfig(store=str(tmp_path / "results"), cluster=ClusterConfig(nodes=nodes, spares=spares),
                   nemesis=NemesisConfig(names=names))
    if refused is None:
        preflight(c)
    else:
        with pytest.raises(ConfigError, match=refused):
            preflight(c)
