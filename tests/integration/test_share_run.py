"""The share workload against Kafka 4.4: a share group's members on the Kafka Java client, acknowledging with a mix
of ACCEPT, RELEASE, REJECT and records held past their acquisition lock, while the partitions' leaders are killed
and members crash between a poll and its acknowledgements. Every record is delivered, none after a committed
ACCEPT or REJECT, and the redeliveries are counted by cause, those after a crash among them. Then the share
coordinators are the target: each fault hits the broker holding the group's state of one partition.

Kafka 4.4 keeps an acquisition's delivery count in the share-partition leader's memory until an acknowledgement, a
release or a lock timeout writes the partition's state: a record acquired when its leader is killed comes back with
the count it had (findings/share-delivery-count-after-leader-change.md). The checker fails such a run with
`delivery_count_regressed`, and this test lets that one kind through, with each of its records delivered again
across a kill."""
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from runs import KCHAOS

from kchaos.checkers.share.check import SHARE_KINDS
from kchaos.clusters.distribution import run_libs
from kchaos.core.history import read_history
from kchaos.evidence.kafka_logs import dump
from kchaos.evidence.share_log import decode_share
from kchaos.workloads.java_build import jdk_problem

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")]
KAFKA_S_OWN = "delivery_count_regressed"


def share_run(store: Path, name: str, *argv: str, kafka: str = "4.4.0") -> tuple[Path, dict[str, Any]]:
    """A share run of 2 members at 60 records/s on `kafka` with `argv`: its directory and results. Every kind is 0
    but the delivery counts that Kafka lets go back, and the exit code is the verdict's."""
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", name, "--workload", "share",
                           "--kafka-version", kafka, "--consumers", "2", "--rate", "60", *argv],
                          capture_output=True, text=True, timeout=900)
    run = (store / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    counts = results["counts"]
    assert all(counts[k] == 0 for k in SHARE_KINDS if k != KAFKA_S_OWN), (counts, proc.stderr[-2000:])
    assert proc.returncode == (1 if counts[KAFKA_S_OWN] else 0), (proc.returncode, results.get("undecided"))
    return run, results


def test_a_share_group_under_kill_leader_and_crashes_gets_every_record_and_counts_its_redeliveries(store):
    run, results = share_run(store, "share", "--nemesis", "kill-leader,crash-client", "--interval", "8",
                             "--restart-delay", "2", "--time-limit", "20", "--seed", "47",
                             "--share-ack-mix", "accept=85,release=10,reject=3,none=2", "--share-lock-ms", "3000")
    counts = results["counts"]
    assert counts["acked"] > 0 and counts["delivered"] >= counts["acked"] and counts["unseen"] == 0, counts
    share = results["checkers"]["share"]
    assert counts["redelivered"] == sum(share["redeliveries"].values())
    assert results["nemesis"]["applied"] > 0, results["nemesis"]
    test = json.loads((run / "test.json").read_text())
    assert test["workload"]["client"] == "java" and test["workload"]["options"]["lock_ms"] == 3000
    ops = list(read_history(run / "history.jsonl"))
    kills = [o["time"] for o in ops if o["process"] == "nemesis" and o["type"] == "ok" and o["f"] == "kill"]
    assert kills, "no leader was killed"
    deliveries: dict[tuple[int, int], list[int]] = {}
    for o in ops:
        if o["f"] == "share-poll" and o["type"] == "ok":
            for p, off, _, count in o["records"]:
                assert count >= 1
                deliveries.setdefault((p, off), []).append(o["time"])
    for p, off, _ in share["examples"].get(KAFKA_S_OWN, []):
        first, *later = deliveries[(p, off)]
        assert any(first < k < t for k in kills for t in later), f"p{p}@{off}: count regressed without a kill"
    # Every record released by a committed RELEASE is delivered again (the drainers accept everything), and each
    # such delivery counts as one after a release.
    released = {(a[0], a[1]) for o in ops if o["f"] == "share-ack" and o["type"] == "ok"
                for a in o["acks"] if a[2] == "release" and a[3] == "ok"}
    assert share["redeliveries"]["release"] >= len(released), (share["redeliveries"], len(released))
    crashes = [o for o in ops if o["f"] == "share-leave" and o["type"] == "info"]
    assert crashes and all(o["error"] == "crashed (crash-client)" for o in crashes), crashes
    held = {}  # process -> the records of its last ok poll
    crashed_holding = False
    for o in ops:
        if o["f"] == "share-poll" and o["type"] == "ok":
            held[o["process"]] = o["records"]
        elif o in crashes:
            crashed_holding |= bool(held.get(o["process"]))
    assert share["redeliveries"]["crash"] > 0 or not crashed_holding, share["redeliveries"]
    assert "deliveries, acknowledgements and redeliveries per second" in (run / "report.html").read_text()
    assert sum(r["redelivered"]["crash"] for r in share["per_second"]) == share["redeliveries"]["crash"]
    state = [o for o in ops if o["f"] == "share-state" and o["type"] == "ok"]
    assert len(state) == 1 and all(p["lag"] == 0 for p in state[0]["partitions"].values()), state
    # Nobody stayed: every member and drainer left after its last poll, on its own (ok) or crashed (info). A member
    # crashed near the end may not have joined again before the workload stopped, so the leaves are not counted.
    last_poll: dict[int, int] = {}
    last_leave: dict[int, int] = {}
    for i, o in enumerate(ops):
        if o["type"] != "invoke" and o["f"] in ("share-poll", "share-leave"):
            (last_poll if o["f"] == "share-poll" else last_leave)[o["process"]] = i
    assert len(last_poll) >= 4 and all(last_leave.get(p, -1) > i for p, i in last_poll.items()), \
        ("members or drainers stayed", last_poll, last_leave)


def test_share_coordinator_faults_hit_the_broker_holding_the_groups_state_of_a_partition(store):
    """Members commit with commitAsync (outcomes from Kafka's callback) while the share coordinator of one of the
    group's partitions is killed: each kill hit the broker whose `__share_group_state` partition holds that
    partition's state, as the share coordinators' own log shows."""
    run, results = share_run(store, "share-coordinator", "--nemesis", "kill:share-coordinator", "--interval", "6",
                             "--time-limit", "16", "--seed", "49", "--share-commit", "async")
    counts = results["counts"]
    test = json.loads((run / "test.json").read_text())
    topic_id = dict(line.split(": ") for line in (run / "evidence" / "raw" / "n1" / "kchaos-0" / "partition.metadata")
                    .read_text().splitlines())["topic_id"]
    notes: list[str] = []
    states = decode_share(run, run_libs(test), dump, notes)
    assert states and notes == [], notes
    held_in: dict[str, set[str]] = {}  # share-partition key -> the __share_group_state partitions holding its state
    for s in states:
        key = f"{s.group}:{s.topic_id}:{s.partition}"
        held_in.setdefault(key, set()).add(f"__share_group_state-{s.state_partition}")
    ops = list(read_history(run / "history.jsonl"))
    told = [a[3] for o in ops if o["f"] == "share-ack" and o["type"] == "ok" for a in o["acks"]]
    assert told and "ok" in told, "commitAsync's callback told no outcome"
    kills = [o for o in ops if o["process"] == "nemesis" and o["type"] == "ok" and o["f"] == "kill"]
    assert kills and results["nemesis"]["applied"] == len(kills)
    for k in kills:
        key, partition = k["coordinator"]["key"], k["coordinator"]["partition"]
        assert key.startswith(f"kchaos-share-49:{topic_id}:"), key
        assert held_in[key] == {partition}, (key, held_in)  # the share coordinators wrote its state just there
        assert k["nodes"] == k["targets"] and len(k["nodes"]) == 1
    if counts[KAFKA_S_OWN]:
        explained = json.loads((run / "evidence" / "share_explanation.json").read_text())
        assert explained["records"] and all(r["deliveries"] for r in explained["records"])


def test_on_kafka_41_share_groups_run_in_preview_with_kafka_clients_42_and_an_unknown_lag(store):
    """Kafka 4.1 with share.version=1: the members run kafka-clients 4.2.2; the brokers report no lag, so the drain
    ends once nothing is delivered for a lock's length, and a partition counts as drained only where the group's
    start offset reached the high watermark. Every record acknowledged is still delivered."""
    run, results = share_run(store, "share-41", "--kafka-feature", "share.version=1",
                             "--nemesis", "kill-leader,crash-client", "--interval", "8", "--restart-delay", "2",
                             "--time-limit", "16", "--seed", "47", "--share-lock-ms", "3000", kafka="4.1.0")
    counts = results["counts"]
    assert counts["acked"] > 0 and counts["delivered"] >= counts["acked"] and counts["unseen"] == 0, counts
    test = json.loads((run / "test.json").read_text())
    assert (test["cluster"]["kafka_version"], test["workload"]["client_version"]) == ("4.1.0", "4.2.2")
    ops = list(read_history(run / "history.jsonl"))
    state = [o for o in ops if o["f"] == "share-state" and o["type"] == "ok"]
    assert len(state) == 1, state
    for p in state[0]["partitions"].values():
        assert p["lag"] == (0 if p["start"] == p["end"] else -1), state
