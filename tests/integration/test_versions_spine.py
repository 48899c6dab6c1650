"""The spine on the newest Kafka line kchaos runs: kill-leader with acks=all and min.insync=2 keeps every
acknowledged write, on Kafka's own configuration, tools and logging for that line. On the oldest line the spine
is the quick suite's acks=all cell (suites/quick.yaml, run by test_suite_run.py)."""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from runs import assert_writes_acked_around_every_kill, finished_run, held

from kchaos.core.history import read_history
from kchaos.core.kafka_versions import LINES

pytestmark = pytest.mark.cluster


@pytest.fixture
def own_spark_store(store):
    """A results store outside the session's warm check (conftest.py's `warm_check`): its run is checked by the
    Spark it starts during its workload, as every run is where no `kchaos serve --warm-check` holds the store."""
    d = Path(tempfile.mkdtemp(prefix="kchaos-own-spark-"))
    yield d / "results"
    shutil.rmtree(d, ignore_errors=True)


def test_kill_leader_with_acks_all_and_min_insync_2_loses_nothing_on_the_newest_line(own_spark_store):
    line = LINES[-1]
    run, results = finished_run(own_spark_store, f"spine-{line.line}", [
        "--kafka-version", line.line, "--acks", "all", "--min-insync", "2", "--nemesis", "kill-leader",
        "--interval", "7", "--time-limit", "24", "--rate", "200", "--producers", "8", "--seed", "24",
        # with Kafka's 9 s session, leaders killed every 7 s can stop the writes for most of the run
        # (docs/nemeses.md, "Availability under repeated kills"); the spine is about writes acked between
        # kills, so a killed broker is fenced after 3 s
        "--broker-session-timeout-ms", "3000"])
    assert held(results), results.get("failed")
    assert results["counts"]["lost"] == 0, results["counts"]
    assert "INFO kchaos.runner [MainThread] checking the history with Spark\n" in (run / "harness.log").read_text()
    test = json.loads((run / "test.json").read_text())
    assert test["versions"]["kafka"] == line.latest and test["kafka_tools"]["line"] == line.line
    ops = list(read_history(run / "history.jsonl"))
    assert_writes_acked_around_every_kill(ops)
    # the raw history, not only the checker: every acknowledged value was read back
    acked = {o["value"] for o in ops if o["f"] == "send" and o["type"] == "ok"}
    read = {v for o in ops if o["type"] == "ok" and o["f"] in ("poll", "drain") for _, _, v in o["records"]}
    assert acked <= read, sorted(acked - read)[:20]
    # the cluster agrees with itself at the end: every broker's view is the controllers', and every in-sync
    # replica of each partition holds the same batches below the high watermark, each of them compared
    agreement = results["agreement"]
    assert (agreement["metadata_divergence"], agreement["replica_divergence"]) == (0, 0), agreement
    assert agreement["partitions_compared"] == test["topic"]["partitions"], agreement
    views = json.loads((run / "evidence" / "views.json").read_text())
    assert set(views["brokers"]) == {"n1", "n2", "n3"} and views["agreed"], views
