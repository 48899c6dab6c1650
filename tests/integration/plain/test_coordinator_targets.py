"""Coordinator targets against one real cluster: the broker kchaos aims `group-coordinator` and `txn-coordinator`
at is the one Kafka itself names as the coordinator of the run's group and transactional id.

The cluster is the folder's (conftest.py); nothing here breaks it.
"""
import random
import re

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from shared_cluster import until

from kchaos.clusters import admin
from kchaos.core.config import TestConfig, WorkloadConfig
from kchaos.nemesis.targets import coordinator, coordinator_keys
from kchaos.workloads.clients import make_group_consumer

pytestmark = pytest.mark.cluster
CFG = TestConfig(seed=42, workload=WorkloadConfig(kind="txn", producers=1, consumer_mode="subscribe"))


def test_the_coordinators_kchaos_aims_at_are_the_ones_kafka_names(cluster):
    keys = coordinator_keys(CFG)
    group, txn_id = keys["group"][0], keys["txn"][0]
    # The transactional id and the group exist once a producer has initialised and a member has joined (each
    # internal topic is made by the first FindCoordinator for it, and loaded before it answers).
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": txn_id,
                         "logger": admin.CLIENT_LOG})
    producer.init_transactions(120)
    member = make_group_consumer(cluster.bootstrap(), "coordinators", group, auto_commit=False)
    member.subscribe([CFG.topic.name])
    try:
        until(lambda: (member.poll(0.5), member.assignment())[1], 120, "the member's assignment", every=0)
        client = AdminClient({"bootstrap.servers": cluster.bootstrap(), "logger": admin.CLIENT_LOG})
        described = client.describe_consumer_groups([group], request_timeout=30)[group].result(60)
        ours, record = coordinator(cluster, "group-coordinator", keys, random.Random(0))
        assert ours == cluster.node_of(described.coordinator.id), record
        assert record["coordinator"]["key"] == group
        # Kafka's own tool asks FindCoordinator for the transactional id.
        code, out = cluster.exec("n1", ["kafka-ctl", "tool", "org.apache.kafka.tools.TransactionsCommand",
                                        "--bootstrap-server", f"{cluster.address('n1')}:9092", "describe",
                                        "--transactional-id", txn_id])
        assert code == 0, out
        header, row = [line.split() for line in out.strip().splitlines()[-2:]]
        named = int(row[header.index("CoordinatorId")])
        ours, record = coordinator(cluster, "txn-coordinator", keys, random.Random(0))
        assert ours == cluster.node_of(named), (record, out)
        assert re.fullmatch(r"__transaction_state-\d+", record["coordinator"]["partition"])
    finally:
        member.close()
        producer.flush(5)
