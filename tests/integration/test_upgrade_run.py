"""A rolling upgrade from the oldest line to the newest under load (acks=all, min.insync=2): every node is
restarted on the new release's jars one at a time, metadata.version is finalized, nothing acknowledged is lost,
no outage lasts as long as a node's restart, and test.json and report.html say which node ran which release
when."""
import json
import re

import pytest
from runs import assert_done_around_the_faults, assert_each_fault_struck_ops_in_flight, finished_run, held, is_ack

from kchaos.checkers.verdict.observed import observe
from kchaos.core.history import read_history
from kchaos.core.kafka_versions import LINES

pytestmark = pytest.mark.cluster
OLD, NEW = LINES[0].latest, LINES[-1].latest


def test_rolling_upgrade_keeps_every_acknowledged_write_and_records_each_nodes_release(store):
    run, results = finished_run(store, "upgrade", [
        "--kafka-version", OLD, "--nemesis", "upgrade", "--upgrade-to", NEW, "--time-limit", "30",
        "--interval", "6", "--rate", "100", "--seed", "8",
        # a restarted broker's registration is refused until its old session expires, even after a clean stop
        # (DuplicateBrokerRegistrationException, 4.4.0): 3 s rather than 9 each time, which the roll is not about
        "--broker-session-timeout-ms", "3000"])
    assert held(results) and results["counts"]["lost"] == 0, results.get("failed")
    history = list(read_history(run / "history.jsonl"))
    ops = [o for o in history if o["process"] == "nemesis" and o["type"] != "invoke"]
    rolled = [o for o in ops if o["f"] == "upgrade" and o["type"] == "ok"]
    assert sorted(o["node"] for o in rolled) == ["n1", "n2", "n3"] and {o["to"] for o in rolled} == {NEW}
    [final] = [o for o in ops if o["f"] == "finalize"]
    # each field holds only the tool's answers ("<feature> was upgraded to N."), never an AdminClient log line
    assert final["type"] == "ok" and re.fullmatch(r"metadata\.version was upgraded to \d+\.", final["metadata"]), final
    assert all(re.fullmatch(r"\S+ was upgraded to \d+\.", x) for x in final["features"].split("; ")), final
    # Under load: writes acknowledged before the first restart, during the upgrade and after the finalize, and every
    # restart made while writes were in flight; an outage shorter than any restart means none stopped the writes.
    assert_done_around_the_faults(history, is_ack, "acknowledged write", during=True)
    assert_each_fault_struck_ops_in_flight(history, "upgrade", "send")
    m = observe(run)
    assert m["longest_outage_s"] < min(o["seconds"] for o in rolled), m
    test = json.loads((run / "test.json").read_text())
    assert {n: [e["release"] for e in rel] for n, rel in test["releases"].items()} == {
        n: [OLD, NEW] for n in ("n1", "n2", "n3")}
    logs = {n: (run / "nodes" / n / "server.log").read_text() for n in ("n1", "n2", "n3")}
    for log in logs.values():  # Kafka itself says which release it started, before and after
        assert f"Kafka version: {OLD}" in log and f"Kafka version: {NEW}" in log
    # the controllers replayed the finalize: metadata.version is the new line's
    assert all(f"setting metadata.version to {NEW[:3]}-" in log for log in logs.values())
    report = (run / "report.html").read_text()
    assert "<h2>Releases</h2>" in report and report.count(f"<td>{NEW}</td>") == 3
    assert f"<li>{final['metadata']}</li>" in report, "the report says what the finalize answered"
