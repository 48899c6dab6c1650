"""The share workload against Kafka 4.4: a share group's members on the Kafka Java client, acknowledging with a mix
of ACCEPT, RELEASE, REJECT and records held past their acquisition lock, while the partitions' leaders are killed
and members crash between a poll and its acknowledgements. Every record is delivered, none after a committed
ACCEPT or REJECT, and the redeliveries are counted by cause, those after a crash among them.

Kafka 4.4 keeps an acquisition's delivery count in the share-partition leader's memory until an acknowledgement, a
release or a lock timeout writes the partition's state: a record acquired when its leader is killed comes back with
the count it had (findings/share-delivery-count-after-leader-change.md). The checker fails such a run with
`delivery_count_regressed`, and this test lets that one kind through, with each of its records delivered again
across a kill."""
import json
import subprocess

import pytest
from runs import KCHAOS

from kchaos.checkers.share.check import SHARE_KINDS
from kchaos.core.history import read_history
from kchaos.workloads.java_build import jdk_problem

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")]
KAFKA_S_OWN = "delivery_count_regressed"


def test_a_share_group_under_kill_leader_and_crashes_gets_every_record_and_counts_its_redeliveries(store):
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", "share",
                           "--workload", "share", "--kafka-version", "4.4.0", "--consumers", "2",
                           "--nemesis", "kill-leader,crash-client", "--interval", "8", "--restart-delay", "2",
                           "--time-limit", "20", "--rate", "60", "--seed", "47",
                           "--share-ack-mix", "accept=85,release=10,reject=3,none=2", "--share-lock-ms", "3000"],
                          capture_output=True, text=True, timeout=900)
    run = (store / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    counts = results["counts"]
    assert all(counts[k] == 0 for k in SHARE_KINDS if k != KAFKA_S_OWN), (counts, proc.stderr[-2000:])
    assert proc.returncode == (1 if counts[KAFKA_S_OWN] else 0), (proc.returncode, results.get("undecided"))
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
    state = [o for o in ops if o["f"] == "share-state" and o["type"] == "ok"]
    assert len(state) == 1 and all(p["lag"] == 0 for p in state[0]["partitions"].values()), state
    assert len([o for o in ops if o["f"] == "share-leave" and o["type"] == "ok"]) >= 4, "members or drainers stayed"
