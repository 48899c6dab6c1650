"""Kafka's own logs (checkers/kafka_errors.py): ERROR and FATAL lines found, grouped, classified by the rules and
explained by the run's fault windows, in this process and on Spark alike; the docs' tables are the code's."""
from __future__ import annotations

import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kchaos.checkers.kafka_errors import (
    FAMILIES,
    MAX_REASONS,
    RULES,
    WINDOW_AFTER_MS,
    errors_line,
    internal_reasons,
    kafka_errors,
)
from kchaos.core.faults import FaultKind, write_faults

MASTER = "local[2]"
START_MS = 1_795_886_738_443.0  # the history's time 0: 2026-11-28 17:25:38,443 UTC
DOCS = Path(__file__).resolve().parents[2] / "docs" / "checkers.md"
NPE = "java.lang.NullPointerException"


def stamp(t_s: float) -> str:
    ms = int(round(START_MS + t_s * 1000))
    return f"{_utc(ms // 1000)},{ms % 1000:03d}"


def _utc(t: int) -> str:
    import time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


# Event shapes: the lines Kafka writes, as (text after the level, stack trace lines). `connect` is a synthetic
# ERROR in the shape of Kafka's NetworkClient lines (Kafka itself logs refused connections at WARN); the others are
# Kafka's own wording from real 3.7.2 and 4.1.0 runs.
def ner(broker: int, p: int) -> tuple[str, list[str]]:
    return (f"[ReplicaManager broker={broker}] Error processing append operation on partition kchaos-{p} "
            "(kafka.server.ReplicaManager)",
            [f"org.apache.kafka.common.errors.NotEnoughReplicasException: The size of the current ISR : 1 is "
             f"insufficient to satisfy the min.isr requirement of 2 for partition kchaos-{p}, live replica(s) "
             f"broker.id are : Set({broker})"])


def connect(node: int, peer: int) -> tuple[str, list[str]]:
    return (f"[NodeToControllerChannelManager id={node} name=heartbeat] Request to node {peer} failed "
            "(org.apache.kafka.clients.NetworkClient)",
            ["java.net.ConnectException: Connection refused",
             "\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)",
             "\tat org.apache.kafka.common.network.Selector.poll(Selector.java:481)"])


def out_of_order(broker: int) -> tuple[str, list[str]]:
    return (f"[ReplicaManager broker={broker}] Error processing append operation on partition kchaos-0 "
            "(kafka.server.ReplicaManager)",
            ["org.apache.kafka.common.errors.OutOfOrderSequenceException: Invalid sequence number for producer 1000 "
             "at offset 35 in partition kchaos-0: 1 (incoming seq. number). Expected sequence 0 for transactions v2 "
             "idempotent producer with no existing state."])


def slow_event(node: int) -> tuple[str, list[str]]:
    return (f"[QuorumController id={node}] Exceptionally slow controller event writeNoOpRecord took 3508 ms. "
            "(org.apache.kafka.controller.EventPerformanceMonitor)", [])


PUBLISHING = ("Encountered metadata publishing fault: Error applying topics delta in MetadataDelta up to 301 "
              "(org.apache.kafka.server.fault.LoggingFaultHandler)",
              ["java.lang.IllegalStateException: TransactionalId t-0 failed transition to state "
               "TxnTransitMetadata(txnState=PrepareAbort)",
               "\tat kafka.coordinator.transaction.TransactionMetadata.throwStateTransitionFailure("
               "TransactionMetadata.scala:512)",
               "\tat kafka.server.metadata.BrokerMetadataPublisher.onMetadataUpdate(BrokerMetadataPublisher.scala:190)",
               "Caused by: org.apache.kafka.common.errors.InvalidTxnStateException: bad state",
               "\t... 12 more"])
UNKNOWN = ("[KafkaApi-1] Unexpected error handling request RequestHeader(apiKey=PRODUCE, apiVersion=9) "
           "(kafka.server.KafkaApis)", [f"{NPE}: null", "\tat kafka.server.KafkaApis.handle(KafkaApis.scala:181)"])

LOGGERS = {"ner": "kafka.server.ReplicaManager", "connect": "org.apache.kafka.clients.NetworkClient",
           "oos": "kafka.server.ReplicaManager", "slow": "org.apache.kafka.controller.EventPerformanceMonitor"}


@dataclass
class Labelled:
    """A run directory written by `labelled_run`, with what each event is: (status, rule, logger, exception) ->
    count, and where the one internal fault is."""

    run: Path
    labels: Counter = field(default_factory=Counter)
    fault_line: int = 0


class Logs:
    """Three nodes' server.log under construction: events at history seconds, INFO noise between them."""

    def __init__(self, run: Path, nodes=("n1", "n2", "n3")):
        self.run, self.events = run, {n: [] for n in nodes}

    def add(self, node: str, t_s: float, level: str, event: tuple[str, list[str]]) -> None:
        self.events[node].append((t_s, level, event))

    def write(self, noise_per_event: int = 2, seed: int = 7) -> dict[str, list[int]]:
        """Write each node's log in time order; return the 1-based line of each event, per node, in write order."""
        rng = random.Random(seed)
        where: dict[str, list[int]] = {}
        for node, events in self.events.items():
            d = self.run / "nodes" / node
            d.mkdir(parents=True, exist_ok=True)
            out, line = [], 0
            order = sorted(range(len(events)), key=lambda i: events[i][0])
            lines_at = [0] * len(events)
            for i in order:
                t_s, level, (text, trace) = events[i]
                for _ in range(rng.randrange(noise_per_event + 1)):
                    out.append(f"[{stamp(t_s)}] INFO [Partition kchaos-{rng.randrange(3)} broker=2] ISR updated to "
                               f"2,1,3  and version updated to {rng.randrange(99)} (kafka.cluster.Partition)")
                    line += 1
                out.append(f"[{stamp(t_s)}] {level} {text}")
                line += 1
                lines_at[i] = line
                out += trace
                line += len(trace)
            (d / "server.log").write_text("\n".join(out) + "\n")
            (d / "state-change.log").write_text(f"[{stamp(0)}] INFO [Broker id=1] nothing wrong "
                                                "(state.change.logger)\n")
            where[node] = lines_at
        return where


def write_history(run: Path, nemesis: list[tuple[float, str, str, str, dict]], first_s: float = 2.0,
                  last_s: float = 200.0, clock: bool = True) -> None:
    """history.jsonl with a client line at `first_s` and `last_s` and the given nemesis lines (time, spec, type, f,
    extra fields); test.json with the history's wall clock unless `clock` is false; faults.json."""
    rows = [(first_s, {"process": 0, "type": "invoke", "f": "send", "value": 0, "partition": 0})]
    rows += [(t, {"process": "nemesis", "type": ty, "f": f, "nemesis": spec, **extra})
             for t, spec, ty, f, extra in nemesis]
    rows.append((last_s - 0.01, {"process": 3, "type": "invoke", "f": "drain", "partition": 0}))
    rows.append((last_s, {"process": 3, "type": "ok", "f": "drain", "partition": 0, "records": [], "complete": True}))
    rows.sort(key=lambda r: r[0])
    with open(run / "history.jsonl", "w") as fh:
        for i, (t, row) in enumerate(rows):
            fh.write(json.dumps({"index": i, "time": int(t * 1e9), **row}) + "\n")
    (run / "test.json").write_text(json.dumps({"history_start_unix_ms": START_MS} if clock else {}))
    write_faults(run, [FaultKind("kill-leader", "kill", "start"),
                       FaultKind("partition-leader", "start-partition", "stop-partition"),
                       FaultKind("pause", "pause", "resume")])


NEMESIS = [
    (10.0, "kill-leader", "invoke", "kill", {"target": "leader"}),
    (10.4, "kill-leader", "ok", "kill", {"nodes": ["n1"]}),
    (20.0, "kill-leader", "invoke", "start", {}),
    (20.1, "kill-leader", "ok", "start", {"nodes": ["n1"]}),
    (90.0, "partition-leader", "invoke", "start-partition", {"target": "leader"}),
    (90.2, "partition-leader", "ok", "start-partition", {"nodes": ["n3"]}),
    (100.0, "partition-leader", "invoke", "stop-partition", {}),
    (100.1, "partition-leader", "ok", "stop-partition", {"nodes": ["n3"]}),
    (150.0, "kill-leader", "invoke", "heal", {}),
    (150.5, "kill-leader", "ok", "heal", {}),
    # A pause that could not be applied: no window, so the NotEnoughReplicas lines at 160 s stay unexplained.
    (159.0, "pause", "invoke", "pause", {"target": "one"}),
    (159.1, "pause", "info", "pause", {"error": "node n2 is down"}),
]


def labelled_run(run: Path, scale: int = 1) -> Labelled:
    """The shape of the run that motivated the checker: thousands of errors that the run's faults explain across
    three nodes, one metadata publishing fault among them (on n2, inside the partition window), and a few errors
    no fault explains. Deterministic."""
    run.mkdir(parents=True, exist_ok=True)
    write_history(run, NEMESIS)
    logs, lab = Logs(run), Labelled(run)
    rng = random.Random(11)

    def put(node, t_s, event, label, level="ERROR"):
        logs.add(node, t_s, level, event)
        lab.labels[label] += 1

    # n1 is killed 10.0-20.1 s: its peers cannot reach it, and one restarted producer's batches are refused.
    for i in range(1200 * scale):
        for node, me in (("n2", 2), ("n3", 3)):
            put(node, 10.5 + 9.5 * i / (1200 * scale), connect(me, 1),
                ("expected", "disconnected", LOGGERS["connect"], "java.net.ConnectException"))
    for i in range(50):
        put("n2", 11 + i * 0.1, out_of_order(2),
            ("expected", "out-of-order-sequence", LOGGERS["oos"],
             "org.apache.kafka.common.errors.OutOfOrderSequenceException"))
    for i in range(5):
        put("n3", 12 + i, slow_event(3), ("expected", "slow-controller-event", LOGGERS["slow"], ""))
    # n3 is cut off 90.0-100.1 s: n1 and n2 lead with an ISR of one and refuse acks=all writes.
    for i in range(1500 * scale):
        for node, me in (("n1", 1), ("n2", 2)):
            put(node, 90.5 + 9.5 * i / (1500 * scale) + rng.random() / 1000, ner(me, rng.randrange(3)),
                ("expected", "not-enough-replicas", LOGGERS["ner"],
                 "org.apache.kafka.common.errors.NotEnoughReplicasException"))
    # After the mend n3 catches up: the ISR stays short for a few more seconds, inside the window's grace.
    for i in range(20):
        put("n1", 101 + i * 0.5, ner(1, 1), ("expected", "not-enough-replicas", LOGGERS["ner"],
                                            "org.apache.kafka.common.errors.NotEnoughReplicasException"))
    put("n2", 95.5, PUBLISHING, ("internal", "metadata-publishing",
                                 "org.apache.kafka.server.fault.LoggingFaultHandler",
                                 "java.lang.IllegalStateException"))
    # Long after every fault closed: nothing explains these.
    for i in range(3):
        put("n1", 160 + i, ner(1, 0), ("unexplained", "not-enough-replicas", LOGGERS["ner"],
                                       "org.apache.kafka.common.errors.NotEnoughReplicasException"))
    put("n1", 170, UNKNOWN, ("unexplained", "", "kafka.server.KafkaApis", NPE))
    # The cluster stops after the history's last line (200 s).
    put("n3", 201, connect(3, 2), ("expected", "disconnected", LOGGERS["connect"], "java.net.ConnectException"))
    where = logs.write()
    publishing = [i for i, e in enumerate(logs.events["n2"]) if e[2] is PUBLISHING][0]
    lab.fault_line = where["n2"][publishing]
    return lab


def groups_by_label(summary: dict) -> Counter:
    return Counter({(g["status"], g["rule"] or "", g["logger"], g["exception"] or ""): g["count"]
                    for g in summary["groups"]})


@pytest.fixture(scope="module")
def motivating(tmp_path_factory) -> Labelled:
    return labelled_run(tmp_path_factory.mktemp("kafka-errors") / "run")


def test_the_one_publishing_fault_among_thousands_of_expected_errors_is_found_and_named(motivating):
    s = kafka_errors(motivating.run)
    assert groups_by_label(s) == motivating.labels
    assert s["errors"] == sum(motivating.labels.values()) > 5000 and s["fatals"] == 0
    assert s["kinds"] == {"internal": 1, "unexplained": 2, "expected": 4} and s["windows"] is True
    assert s["statuses"]["internal"] == 1 and s["statuses"]["unexplained"] == 4
    fault = s["groups"][0]
    assert fault["status"] == "internal" and fault["rule"] == "metadata-publishing"
    assert fault["title"] == "Encountered metadata publishing fault" and fault["nodes"] == ["n2"]
    assert fault["first"] == {
        "node": "n2", "file": "nodes/n2/server.log", "line": motivating.fault_line, "time": stamp(95.5),
        "t_s": 95.5, "level": "ERROR", "message": PUBLISHING[0].rsplit(" (", 1)[0],
        "cause": PUBLISHING[1][0]}
    lines = (motivating.run / "nodes/n2/server.log").read_text().splitlines()
    assert "Encountered metadata publishing fault" in lines[fault["first"]["line"] - 1]
    assert [g["status"] for g in s["groups"]] == ["internal", "unexplained", "unexplained"] + ["expected"] * 4
    by_rule = {(g["status"], g["rule"]): g for g in s["groups"]}
    assert by_rule[("expected", "disconnected")]["explained_by"] == ["(shutdown)", "kill-leader"]
    assert by_rule[("expected", "not-enough-replicas")]["explained_by"] == ["partition-leader"]
    assert by_rule[("expected", "not-enough-replicas")]["nodes"] == ["n1", "n2"]
    assert "no such fault was open" in by_rule[("unexplained", "not-enough-replicas")]["why"]
    assert by_rule[("unexplained", None)]["why"] == "No rule names it."
    json.dumps(s)  # results.json takes it as it is


def test_the_verdict_reasons_name_only_the_internal_fault(motivating):
    s = kafka_errors(motivating.run)
    assert internal_reasons(s) == [f"Kafka reported an internal fault: n2 {stamp(95.5)[11:19]} Encountered metadata "
                                   "publishing fault (IllegalStateException), once"]
    line = errors_line(s)
    assert "\n" not in line and line.startswith("Kafka logged 7 kinds of error (1 internal, 2 unexplained, 4 expected")
    assert "first internal: n2" in line and "Encountered metadata publishing fault (IllegalStateException)" in line


@pytest.mark.spark
def test_spark_reads_many_stretches_and_agrees_with_one_process(motivating):
    here = kafka_errors(motivating.run)
    spread = kafka_errors(motivating.run, MASTER, stretch_bytes=64 << 10, local_bytes=0)
    assert spread == here


def test_unexplained_errors_give_no_verdict_reason(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_history(run, [])
    logs = Logs(run, ("n1",))
    logs.add("n1", 100, "ERROR", ner(1, 0))
    logs.add("n1", 101, "ERROR", UNKNOWN)
    logs.write()
    s = kafka_errors(run)
    assert s["kinds"] == {"internal": 0, "unexplained": 2, "expected": 0}
    assert internal_reasons(s) == [] and internal_reasons(None) == []
    assert errors_line(s).startswith("Kafka logged 2 kinds of error (2 unexplained; 2 lines), first unexplained: n1")


def test_without_the_runs_clock_a_fault_applied_anywhere_in_the_run_explains(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_history(run, NEMESIS, clock=False)
    logs = Logs(run, ("n1",))
    logs.add("n1", 160, "ERROR", ner(1, 0))  # outside every window, yet partition-leader was applied
    logs.write()
    s = kafka_errors(run)
    assert s["windows"] is False and s["groups"][0]["status"] == "expected"
    assert s["groups"][0]["explained_by"] == ["partition-leader"] and s["groups"][0]["first"]["t_s"] is None


def test_windows_close_with_the_mend_plus_the_grace(tmp_path):
    after = 100.1 + WINDOW_AFTER_MS / 1000  # the partition's mend completed at 100.1 s
    run = tmp_path / "run"
    run.mkdir()
    write_history(run, NEMESIS)
    logs = Logs(run, ("n1",))
    logs.add("n1", after - 0.5, "ERROR", ner(1, 0))
    logs.add("n1", after + 0.5, "ERROR", ner(1, 1))
    logs.add("n1", 89.5, "ERROR", ner(1, 2))  # just before the break op: within the slack for clocks
    logs.write()
    s = kafka_errors(run)
    assert {g["status"]: g["count"] for g in s["groups"]} == {"expected": 2, "unexplained": 1}


def test_fatal_lines_are_counted_and_an_out_of_memory_error_is_internal(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_history(run, NEMESIS)
    logs = Logs(run, ("n3",))
    logs.add("n3", 95, "FATAL", ("[KafkaRaftServer nodeId=3] Fatal error during broker startup. Prepare to shutdown "
                                 "(kafka.server.KafkaRaftServer)",
                                 ["java.lang.RuntimeException: startup failed",
                                  "\tat kafka.server.BrokerServer.startup(BrokerServer.scala:500)",
                                  "Caused by: java.lang.OutOfMemoryError: Java heap space"]))
    logs.write()
    s = kafka_errors(run)
    assert s["fatals"] == 1 and s["errors"] == 0
    (g,) = s["groups"]
    assert (g["status"], g["rule"], g["fatal"], g["first"]["level"]) == ("internal", "out-of-memory", 1, "FATAL")
    assert g["exception"] == "java.lang.RuntimeException"  # the trace's first class names the group
    assert internal_reasons(s)[0].endswith("Fatal error during broker startup. Prepare to shutdown "
                                           "(RuntimeException), once")


def test_without_a_trace_the_exception_is_the_one_the_message_names(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    logs = Logs(run, ("n1",))
    logs.add("n1", 5, "ERROR", ("[GroupMetadataManager brokerId=1] Appending metadata message for group g failed "
                                "due to org.apache.kafka.common.errors.NotEnoughReplicasException, returning "
                                "NOT_ENOUGH_REPLICAS (kafka.coordinator.group.GroupMetadataManager)", []))
    logs.write()
    (g,) = kafka_errors(run)["groups"]
    assert g["exception"] == "org.apache.kafka.common.errors.NotEnoughReplicasException"
    assert (g["rule"], g["status"]) == ("not-enough-replicas", "unexplained")  # no history: no fault


def test_a_multi_line_message_keeps_its_logger_and_its_trace(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    logs = Logs(run, ("n1",))
    logs.add("n1", 5, "ERROR", ("[TransactionCoordinator id=1] state is\nnot what it was", [
        "and more (kafka.coordinator.transaction.TransactionCoordinator)",
        "java.lang.IllegalStateException: impossible", "\tat x.Y.z(Y.java:1)"]))
    logs.write()
    (g,) = kafka_errors(run)["groups"]
    assert (g["logger"], g["exception"]) == ("kafka.coordinator.transaction.TransactionCoordinator",
                                             "java.lang.IllegalStateException")
    assert (g["rule"], g["status"]) == ("coordinator-state", "internal")


EVENT = (f"[{stamp(2)}] ERROR [QuorumController id=1] boom (org.apache.kafka.controller.QuorumController)\n"
         "java.lang.OutOfMemoryError: Java heap space\n\tat a.B.c(B.java:1)\n")


@pytest.mark.parametrize("d", range(-40, len(EVENT) + 40, 3))
def test_a_stack_trace_is_read_across_a_stretch_boundary(tmp_path, d):
    """Two stretches cut the file at its middle, d bytes after the event's first byte: from before its header line
    to inside its trace and past it. Exactly one task owns the event, reads its trace past the cut, and every line
    is counted once."""
    filler = f"[{stamp(0)}] INFO " + "y" * 80 + " (kafka.Pad)\n"
    body = filler * 6 + EVENT + f"[{stamp(3)}] INFO after (kafka.Pad)\n"
    at = len(filler * 6) + d  # where the cut must fall: the file is twice as long
    last = f"[{stamp(4)}] INFO "
    text = body + last + "z" * (2 * at - len(body) - len(last) - 1) + "\n"
    assert len(text) // 2 == at
    d_ = tmp_path / "run" / "nodes" / "n1"
    d_.mkdir(parents=True)
    (d_ / "server.log").write_text(text)
    s = kafka_errors(tmp_path / "run", stretch_bytes=-(-len(text) // 2))
    (g,) = s["groups"]
    assert (g["rule"], g["count"], g["first"]["line"]) == ("out-of-memory", 1, 7)
    assert g["first"]["cause"] == "java.lang.OutOfMemoryError: Java heap space"
    assert s["lines"] == text.count("\n") == 11


def test_every_cut_of_the_motivating_logs_gives_the_same_summary(motivating):
    whole = kafka_errors(motivating.run)
    for stretch in (997, 4093, 65537):
        assert kafka_errors(motivating.run, stretch_bytes=stretch) == whole


def test_a_run_without_node_logs_has_no_summary_and_quiet_logs_have_an_empty_one(tmp_path):
    assert kafka_errors(tmp_path) is None  # a bare history's directory
    (tmp_path / "nodes" / "n1").mkdir(parents=True)
    (tmp_path / "nodes" / "n1" / "stdout.log").write_text("=== start\n")
    assert kafka_errors(tmp_path) is None  # a node directory without Kafka's logs
    (tmp_path / "nodes" / "n1" / "server.log").write_text(f"[{stamp(0)}] INFO started (kafka.server.KafkaRaftServer)\n")
    s = kafka_errors(tmp_path)
    assert (s["files"], s["lines"], s["total_groups"], s["groups"]) == (1, 1, 0, [])
    assert errors_line(s) == "Kafka logged no ERROR or FATAL line" and internal_reasons(s) == []


def test_reasons_are_capped_with_a_count_of_the_rest(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    logs = Logs(run, ("n1",))
    for i in range(MAX_REASONS + 2):
        logs.add("n1", i, "ERROR", (f"Encountered metadata publishing fault: delta {i} "
                                    "(org.apache.kafka.server.fault.LoggingFaultHandler)", [f"java.lang.E{i}Error: x"]))
    logs.write()
    reasons = internal_reasons(kafka_errors(run))
    assert len(reasons) == MAX_REASONS + 1
    assert reasons[-1] == "Kafka reported 2 more kinds of internal fault (results.json kafka_errors)"


# --- the docs' tables are the code's ------------------------------------------------------------------------------

def _table(section: str, header: str) -> list[list[str]]:
    lines = section.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", ln.strip())[1:-1]]
        rows.append([c.replace("\\|", "|") for c in cells])
    return rows


def _code(cell: str) -> str:
    return "" if cell == "–" else cell.strip("`")


def _section() -> str:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("## Kafka's own logs")
    return text[start:text.index("\n## ", start + 1)]


def test_the_docs_rules_table_is_the_codes():
    rows = _table(_section(), "| rule |")
    assert [(r[0].strip("`"), _code(r[1]), _code(r[2]), _code(r[3]), r[4],
             tuple(x.strip() for x in r[5].split(",")) if r[5] != "–" else (), r[6]) for r in rows] == [
        (r.name, r.logger, r.exception, r.text, r.cls, r.families, r.why) for r in RULES]


def test_the_docs_families_table_is_the_codes():
    rows = _table(_section(), "| family |")
    assert [(r[0].strip("`"), tuple(x.strip().strip("`") for x in r[1].split(",")), r[2]) for r in rows] == [
        (f.name, f.nemeses, f.what) for f in FAMILIES]


def test_controller_and_state_change_logs_are_read_too(tmp_path):
    d = tmp_path / "nodes" / "c1"
    d.mkdir(parents=True)
    (d / "controller.log").write_text(f"[{stamp(5)}] ERROR Encountered quorum controller fault: bad record "
                                      "(org.apache.kafka.server.fault.LoggingFaultHandler)\n")
    (d / "state-change.log").write_text(f"[{stamp(6)}] ERROR [Broker id=1] TransactionMetadata(transactionalId=t-0, "
                                        "state=PrepareAbort) failed: this should not happen "
                                        "(kafka.coordinator.transaction.TransactionMetadata)\n")
    (d / "stdout.log").write_text(f"[{stamp(7)}] ERROR not Kafka's log4j output (x.Y)\n")
    s = kafka_errors(tmp_path)
    assert [(g["rule"], g["first"]["file"], g["first"]["line"]) for g in s["groups"]] == [
        ("fault-handler", "nodes/c1/controller.log", 1),
        ("coordinator-should-not-happen", "nodes/c1/state-change.log", 1)]
    assert s["files"] == 2 and len(internal_reasons(s)) == 2


@pytest.mark.spark
def test_the_motivating_run_checked_is_unknown_with_the_fault_named_on_every_surface(motivating, capsys):
    from kchaos.checkers import check_path
    from kchaos.harness.cli.main import main
    from kchaos.reports.run.report import write_report

    assert main(["check", str(motivating.run), "--spark-master", MASTER]) == 2
    out = capsys.readouterr().out
    r = check_path(motivating.run, MASTER)
    reason = internal_reasons(r["kafka_errors"])[0]
    assert r["verdict"] == "unknown" and reason in r["undecided"] and reason in out
    assert errors_line(r["kafka_errors"]) in out.splitlines()
    page = write_report(motivating.run).read_text()
    assert reason in page and 'id="kafka-logs"' in page
    assert f'<a href="nodes/n2/server.log">server.log</a>\nline {motivating.fault_line}' in page


def test_a_torn_checkpoint_is_expected_after_a_power_failure_and_internal_after_a_kill(tmp_path):
    """A power failure drops what was not written back, so the restarted broker may read a torn file; a kill keeps
    the page cache, so the same error after a kill is Kafka's own."""
    torn = ("Error while reading checkpoint file /var/lib/kafka/data/kchaos-0/leader-epoch-checkpoint "
            "(org.apache.kafka.storage.internals.log.LogDirFailureChannel)",
            ["org.apache.kafka.common.errors.KafkaStorageException: Error while reading checkpoint file",
             "Caused by: java.io.IOException: Malformed line in checkpoint file"])
    for spec, f, status in (("power-fail", "power-fail", "expected"), ("kill", "kill", "internal")):
        run = tmp_path / spec
        run.mkdir()
        write_history(run, [(10.0, spec, "invoke", f, {"target": "one"}), (10.5, spec, "ok", f, {"nodes": ["n1"]}),
                            (20.0, spec, "invoke", "start", {}), (20.5, spec, "ok", "start", {"nodes": ["n1"]})])
        write_faults(run, [FaultKind(spec, f, "start")])
        logs = Logs(run, ("n1",))
        logs.add("n1", 25.0, "ERROR", torn)
        logs.write()
        s = kafka_errors(run)
        assert [(g["status"], g["rule"]) for g in s["groups"]] == [(status, "log-dir-failure")], spec


def test_a_replica_created_on_the_broker_a_reassignment_adds_is_expected_only_under_a_membership_fault(tmp_path):
    created = ("[Broker id=1] Expected partition kchaos-1 with topic id SMCLW3m7Qn-T4Fl0sfnwbw to exist, but it was "
               "missing. Creating... (state.change.logger)", [])
    for spec, f, mend, status in (("reassign", "reassign", "verify", "expected"),
                                  ("kill", "kill", "start", "unexplained")):
        run = tmp_path / spec
        run.mkdir()
        write_history(run, [(10.0, spec, "invoke", f, {"target": "leader"}), (12.5, spec, "ok", f, {"nodes": ["n2"]}),
                            (20.0, spec, "invoke", mend, {}), (20.5, spec, "ok", mend, {"nodes": ["n2"]})])
        write_faults(run, [FaultKind(spec, f, mend)])
        logs = Logs(run, ("n1",))
        logs.add("n1", 12.0, "ERROR", created)
        logs.write()
        s = kafka_errors(run)
        assert [(g["status"], g["rule"]) for g in s["groups"]] == [(status, "replica-created")], spec


def test_a_directory_assignment_refused_after_a_wipe_is_expected(tmp_path):
    refused = ("Failed to propagate directory assignments because the Controller returned error STALE_BROKER_EPOCH "
               "(org.apache.kafka.server.AssignmentsManager)", [])
    write_history(tmp_path, [(10.0, "wipe", "invoke", "wipe", {"target": "follower"}),
                             (10.5, "wipe", "ok", "wipe", {"nodes": ["n1"]}),
                             (15.0, "wipe", "invoke", "start", {}), (15.2, "wipe", "ok", "start", {"nodes": ["n1"]})])
    write_faults(tmp_path, [FaultKind("wipe", "wipe", "start")])
    logs = Logs(tmp_path, ("n1",))
    logs.add("n1", 17.0, "ERROR", refused)
    logs.write()
    s = kafka_errors(tmp_path)
    assert [(g["status"], g["rule"]) for g in s["groups"]] == [("expected", "directory-assignment-refused")]
