"""The txn workload on the Kafka Java client against Kafka 4.1 (KIP-890 transactions), its consumers members of one
group (KIP-848) with sub-p ops, under kill-leader and crash-client: read_committed keeps every transaction's
promise, the JVM's rebalances are in the history, a crashed process commits again on a new producer, and test.json
says which client ran."""
import pytest
from txn_asserts import valid_txn_run

from kchaos.workloads.java_build import jdk_problem

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")]


def test_java_client_txn_in_a_group_under_kill_leader_and_crash_client_on_kafka_4_1_is_valid(store):
    test = valid_txn_run(store, "txn-java", [
        "--client", "java", "--kafka-version", "4.1.0", "--time-limit", "18", "--rate", "60", "--producers", "6",
        "--consumer-mode", "subscribe", "--group-protocol", "consumer", "--txn-sub-p", "0.02",
        "--restart-delay", "2",
        # a killed broker is fenced after 3 s, not Kafka's 9 s, so its restart is not refused for most of the
        # run's end and the cluster is whole again soon after the heal: the test is about the transactions
        "--broker-session-timeout-ms", "3000"], nemesis="kill-leader,crash-client")
    assert test["workload"]["client"] == "java" and test["workload"]["client_version"] == "4.1.0"
    assert test["versions"]["kafka"] == "4.1.0"
    assert "Java client started" in test["_harness_log"]
    ops = test["_ops"]
    assert any(o["f"] == "rebalance" and o["assigned"] and o.get("generation") is not None for o in ops)
    crashes = [o for o in ops if o["f"] == "crash" and o["type"] == "info" and isinstance(o["process"], int)]
    assert any(any(later["process"] == c["process"] and later["f"] == "txn" and later["type"] == "ok"
                   for later in ops[c["index"]:]) for c in crashes), "no crashed process committed again"
    assert {o["f"] for o in ops if o["type"] == "ok"} >= {"assign", "subscribe"}, "no sub-p op"
