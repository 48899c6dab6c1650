"""The copy workload on the Kafka Java client against Kafka 4.1 (KIP-890 transactions): two copiers, one crashed
mid-transaction and replaced (its producer fenced by the next with the same transactional.id), copy the input
exactly once, and test.json says which client ran."""
import json

import pytest
from runs import assert_a_copier_crashed_and_was_replaced, finished_run, held

from kchaos.core.history import read_history
from kchaos.workloads.java_build import jdk_problem

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")]
KINDS = ("copy_missing", "copy_duplicate", "copy_invented", "copy_reordered")


def test_java_client_copy_under_crash_client_on_kafka_4_1_keeps_input_equal_to_output(store):
    run, results = finished_run(store, "copy-java", [
        "--workload", "copy", "--client", "java", "--kafka-version", "4.1.0", "--consumers", "2",
        "--nemesis", "crash-client", "--interval", "8", "--restart-delay", "2", "--time-limit", "16",
        "--rate", "150", "--copy-records", "1200", "--txn-size", "20", "--seed", "31"])
    assert held(results), results
    counts = results["counts"]
    assert all(counts[k] == 0 for k in KINDS), counts
    assert counts["input"] == 1200 and counts["output"] >= counts["input"], counts
    test = json.loads((run / "test.json").read_text())
    assert (test["workload"]["client"], test["workload"]["client_version"]) == ("java", "4.1.0")
    assert "Java client started" in (run / "harness.log").read_text()
    ops = list(read_history(run / "history.jsonl"))
    copied = [o for o in ops if o["f"] == "copy" and o["type"] == "ok"]
    assert sum(len(o["value"]) for o in copied) > 0 and all(len(o["value"]) <= 20 for o in copied)
    assert_a_copier_crashed_and_was_replaced(ops)
    assert any(o["f"] == "assign" and o["type"] == "ok" for o in ops), "the Java consumers' rebalances"
