"""The txn workload on the Kafka Java client against Kafka 4.1 (KIP-890 transactions): kill-leader under
read_committed keeps every transaction's promise, and test.json says which client ran."""
import pytest

from txn_asserts import valid_txn_run
from workloads.java_build import jdk_problem

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")]


def test_java_client_txn_under_kill_leader_on_kafka_4_1_is_valid(store):
    test = valid_txn_run(store, "txn-java", ["--client", "java", "--kafka-version", "4.1.0", "--time-limit", "30",
                                             "--rate", "60", "--producers", "6"], min_committed=200)
    assert test["workload"]["client"] == "java" and test["workload"]["client_version"] == "4.1.0"
    assert test["versions"]["kafka"] == "4.1.0"
    assert "Java client started" in test["_harness_log"]
