"""The pipelined workload against a real cluster: many sends in flight per producer, the producers in the Java
client's JVM (what `--rate max` runs), every send still its own operation. (Producers in Python worker
processes under faults, and a SIGKILLed harness whose workers do not outlive it, are test_fault_runs.py's.)"""
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from runs import assert_done_around_the_faults, assert_each_fault_struck_ops_in_flight, is_ack

from kchaos.core.history import read_history
from kchaos.core.send_stream import PARTS_DIR
from kchaos.workloads.java_build import jdk_problem

pytestmark = pytest.mark.cluster
KCHAOS = [sys.executable, "-m", "kchaos"]
IN_FLIGHT = 20
TIMED_OUT = "REQUEST_TIMED_OUT"  # what the Java client reports for a send that timed out in flight


def latest(store: Path) -> Path:
    return (store / "latest").resolve()


@pytest.mark.skipif(jdk_problem() is not None, reason="no JDK on PATH")
def test_sends_in_flight_from_the_java_producers_are_each_recorded_and_checked(store):
    proc = subprocess.run([*KCHAOS, "run", "--store", str(store), "--name", "pipelined", "--time-limit", "18",
                           "--nemesis", "kill-leader", "--interval", "8", "--in-flight", str(IN_FLIGHT),
                           "--producers", "2", "--client", "java", "--rate", "1500", "--idempotence",
                           "--linger-ms", "5", "--seed", "12",
                           # one kill, at 9.8 s, started again at 14.8 s: a killed broker's registration is refused
                           # until its old session expires, and 3 s rather than Kafka's 9 s lets it back at once
                           "--broker-session-timeout-ms", "3000"], capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # a verdict; which one is asserted below
    run = latest(store)
    assert not (run / PARTS_DIR).exists()  # merged into history.jsonl and removed
    ops = list(read_history(run / "history.jsonl"))
    assert [o["index"] for o in ops] == list(range(len(ops)))
    assert all(a["time"] <= b["time"] for a, b in zip(ops, ops[1:]))
    sends = [o for o in ops if o["f"] == "send"]
    assert {o["producer"] for o in sends} == {0, 1}
    assert all(o["process"] // IN_FLIGHT == o["producer"] for o in sends)  # slot p*N+s belongs to instance p
    # At most one operation outstanding per process, and many per producer instance.
    open_ops, per_producer, most = set(), Counter(), Counter()
    for o in sends:
        if o["type"] == "invoke":
            assert o["process"] not in open_ops, o
            open_ops.add(o["process"])
            per_producer[o["producer"]] += 1
            most[o["producer"]] = max(most[o["producer"]], per_producer[o["producer"]])
        else:
            open_ops.discard(o["process"])
            per_producer[o["producer"]] -= 1
    assert min(most.values()) > 1, most
    # Pipelined sends acknowledged on both sides of the kills, and each kill struck sends in flight.
    assert_done_around_the_faults(ops, is_ack, "acknowledged send")
    assert_each_fault_struck_ops_in_flight(ops, "kill", "send")
    results = json.loads((run / "results.json").read_text())
    counts = results["counts"]
    assert counts["lost"] == 0 and counts["nonmonotonic_send"] == 0
    test = json.loads((run / "test.json").read_text())
    assert test["workload"]["client"] == "java"
    # The one anomaly this run may show is the idempotent producer's documented limit (docs/checkers.md):
    # a send that times out in flight makes it bump the epoch, and the sends in flight with it may be
    # written twice. So every duplicate must follow a timed-out send of the same producer instance.
    others = {k: v for k, v in counts.items() if k not in ("acked", "duplicate")}
    assert set(others.values()) == {0}, counts
    assert results["valid"] is (counts["duplicate"] == 0)
    places: dict[int, set] = {}
    for o in ops:
        for p, off, v in o.get("records") or []:
            places.setdefault(v, set()).add((p, off))
    timed_out = [o for o in sends if o["type"] == "info" and o.get("error") == TIMED_OUT]
    ack = {o["value"]: o for o in sends if o["type"] == "ok"}
    for v in (v for v, where in places.items() if len(where) > 1):
        done = ack.get(v) or next(o for o in sends if o["value"] == v and o["type"] != "invoke")
        assert any(t["producer"] == done["producer"] and t["time"] <= done["time"] for t in timed_out), v
