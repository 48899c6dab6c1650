"""The txn workload on the Kafka Java client against Kafka 4.1 (KIP-890 transactions): kill-leader under
read_committed keeps every transaction's promise, and test.json says which client ran."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.history import read_history
from workloads.java_build import jdk_problem

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")]
KCHAOS = [sys.executable, "-m", "harness.cli"]


def test_java_client_txn_under_kill_leader_on_kafka_4_1_is_valid(store):
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", "txn-java", "--workload", "txn",
                           "--client", "java", "--kafka-version", "4.1.0", "--nemesis", "kill-leader",
                           "--interval", "8", "--time-limit", "30", "--rate", "60", "--producers", "6",
                           "--txn-abort-p", "0.2",
                           "--seed", "23"],
                          capture_output=True, text=True, timeout=900)
    run = (Path(store) / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert proc.returncode == 0, (results.get("failed"), results.get("undecided"), proc.stderr[-3000:])
    assert results["verdict"] == "pass" and results["allowed"] == {}
    assert not any(results["counts"].values()), results["counts"]
    stats = results["stats"]
    assert stats["txn_ok"] >= 200 and stats["txn_fail"] > 0, stats
    assert stats["partitions_incomplete"] == [] and stats["committed_sends"] > 0
    ops = list(read_history(run / "history.jsonl"))
    assert any(o["process"] == "nemesis" and o["f"] == "kill" and o["type"] == "ok" for o in ops)
    polled = [m for o in ops if o["f"] == "txn" and o["type"] == "ok" for m in o["value"] if m[0] == "poll" and m[1]]
    assert polled, "no poll inside a committed transaction returned a record"
    test = json.loads((run / "test.json").read_text())
    assert test["workload"]["client"] == "java" and test["workload"]["client_version"] == "4.1.0"
    assert test["versions"]["kafka"] == "4.1.0"
    assert "Java client started" in (run / "harness.log").read_text()
