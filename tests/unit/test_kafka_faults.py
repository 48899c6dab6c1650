"""The faults Kafka logged about itself: found in every node's server.log, with their cause, and shown."""
import json

from checkers.kafka_faults import MAX_LISTED, fault_line, kafka_faults
from harness.console import run_summary

# Two lines as Kafka 3.7.2's LoggingFaultHandler wrote them (a run of the exactly-once-copy scenario), then the
# stack; around them, ordinary ERROR lines that are not faults.
FAULT = "".join(line + "\n" for line in (
    "[2026-11-26 16:57:32,983] ERROR TransactionMetadata(transactionalId=t-0, state=PrepareAbort) failed: this "
    "should not happen (kafka.coordinator.transaction.TransactionMetadata)",
    "[2026-11-26 16:57:32,983] ERROR Encountered metadata publishing fault: Error applying topics delta in "
    "MetadataDelta up to 301 (org.apache.kafka.server.fault.LoggingFaultHandler)",
    "java.lang.IllegalStateException: TransactionalId t-0 failed transition to state "
    "TxnTransitMetadata(txnState=PrepareAbort)",
    "\tat kafka.coordinator.transaction.TransactionMetadata.throwStateTransitionFailure(TransactionMetadata.scala:512)",
    "[2026-11-26 16:57:33,032] INFO [Transaction Marker Request Completion Handler 2]: retrying "
    "(kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler)"))


def _run(tmp_path, logs):
    for node, text in logs.items():
        (tmp_path / "nodes" / node).mkdir(parents=True)
        (tmp_path / "nodes" / node / "server.log").write_text(text)
    return tmp_path


def test_a_publishing_fault_is_found_with_its_node_time_and_cause(tmp_path):
    run = _run(tmp_path, {"n1": "[2026-11-26 16:57:01,000] INFO started (kafka.server.KafkaRaftServer)\n",
                          "n2": FAULT})
    f = kafka_faults(run)
    assert f == {"count": 1, "faults": [{
        "node": "n2", "time": "2026-11-26 16:57:32,983", "kind": "metadata publishing",
        "what": "Error applying topics delta in MetadataDelta up to 301",
        "cause": "java.lang.IllegalStateException: TransactionalId t-0 failed transition to state "
                 "TxnTransitMetadata(txnState=PrepareAbort)"}]}
    line = fault_line(f)
    assert line.startswith("Kafka reported 1 internal fault in its logs") and "n2 at 2026-11-26 16:57:32,983" in line
    assert "IllegalStateException" in line and "more" not in line


def test_no_fault_no_key_and_many_faults_are_counted_but_listed_up_to_the_limit(tmp_path):
    assert kafka_faults(_run(tmp_path / "a", {"n1": "[2026-11-26 16:57:01,000] ERROR Encountered nothing\n"})) is None
    assert kafka_faults(tmp_path / "none") is None  # a bare history: no node logs
    many = "".join(f"[2026-11-26 17:00:{i:02d},000] ERROR Encountered fatal fault: exit {i} "
                   "(org.apache.kafka.server.fault.ProcessTerminatingFaultHandler)\n" for i in range(30))
    f = kafka_faults(_run(tmp_path / "b", {"c1": many, "n3": FAULT}))
    assert f["count"] == 31 and len(f["faults"]) == MAX_LISTED
    assert f["faults"][0]["node"] == "n3" and f["faults"][1] == {  # oldest first, across nodes
        "node": "c1", "time": "2026-11-26 17:00:00,000", "kind": "fatal", "what": "exit 0", "cause": None}
    assert "30 more in results.json" in fault_line(f)


def test_the_run_summary_says_it_under_the_verdict_without_changing_it(tmp_path):
    f = kafka_faults(_run(tmp_path, {"n2": FAULT}))
    results = {"valid": True, "verdict": "pass", "failed": {}, "allowed": {}, "why": {}, "undecided": [],
               "counts": {"acked": 3, "lost": 0}, "kafka_faults": f}
    lines = run_summary(json.loads(json.dumps(results))).splitlines()
    assert lines[0].startswith("verdict: pass")
    assert any(x.startswith("Kafka reported 1 internal fault") for x in lines)
