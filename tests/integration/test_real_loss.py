"""The checker finds a loss that really happens on the cluster.

acks=1 on a single partition: the leader's followers are paused (SIGSTOP), so
the leader alone acknowledges writes; then the leader is SIGKILLed and the
followers resumed. The controller quorum never saw the followers fall
behind, so one of them becomes leader without the acknowledged records, and
the old leader truncates to it when it returns.
"""
import time

import pytest

import nemesis
from checkers import check_path
from clusters import admin
from clusters.docker import DockerCluster
from harness.config import ClusterConfig, NemesisConfig, ProducerConfig, TestConfig, TopicConfig, WorkloadConfig
from harness.history import History
from harness.store import new_run_dir, write_test_json
from nemesis.driver import NemesisDriver
from workloads.queue import QueueWorkload

pytestmark = pytest.mark.cluster


def test_acks1_leader_killed_while_followers_paused_loses_acked_writes(store, node_image):
    cfg = TestConfig(name="realloss", seed=5, time_limit=1, store=str(store),
                     topic=TopicConfig(partitions=1, replication_factor=3, min_insync=1, unclean=True),
                     producer=ProducerConfig(acks="1"), cluster=ClusterConfig(),
                     workload=WorkloadConfig(producers=2, consumers=1, rate=60),
                     nemesis=NemesisConfig(names=("none",)))
    run = new_run_dir(store, cfg.name)
    write_test_json(run, cfg, {"kafka": "3.7.2"}, ["test"])
    history = History(run / "history.jsonl")
    cluster = DockerCluster(cfg.cluster, node_image, run)
    workload = QueueWorkload(cfg)
    driver = NemesisDriver({n: nemesis.split(n)[0].make(cluster, cfg) for n in ("pause", "kill")},
                           cluster, history, [])
    try:
        cluster.setup()
        workload.setup(cluster)
        workload.start(cluster, history)
        driver.start()
        time.sleep(4)
        leader = cluster.node_of(admin.partitions(cluster.bootstrap(), cfg.topic.name)[0].leader)
        followers = [n for n in cluster.nodes if n != leader]
        assert driver.apply("pause", {"f": "pause", "nodes": followers})["nodes"] == followers
        time.sleep(6)  # the leader alone acknowledges these writes
        driver.apply("kill", {"f": "kill", "nodes": [leader]})
        driver.apply("pause", {"f": "resume"})
        time.sleep(15)  # a follower takes over; producers write to it
        driver.apply("kill", {"f": "start"})
        time.sleep(5)
        driver.stop_and_heal()
        cluster.wait_brokers(60)
        cluster.wait_topic(cfg.topic.name, 3, 60)
        workload.stop()
        complete = workload.final_read(cluster, history)
        assert complete == {0: True}
    finally:
        driver.stop_and_heal()
        workload.stop()
        history.close()
        cluster.teardown()
    res = check_path(run)
    assert res["valid"] is False
    assert res["counts"]["lost"] > 10, res["counts"]
    assert res["counts"]["acked"] > res["counts"]["lost"]
