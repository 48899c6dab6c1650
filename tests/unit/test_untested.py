"""A run that tested nothing never passes, and a damaged history is said out loud: empty and non-histories are bad
input that creates nothing; a run that acknowledged nothing, whose nemesis applied none of the faults it was asked
for, or whose cluster did not recover after the heal, is unknown with the reason; a cut-off last line is said on
every surface; a damaged line anywhere else is bad input naming the line, for every workload."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from histories import HistoryBuilder, idempotent_test

from kchaos.checkers import check_path
from kchaos.checkers.history_scan import scan
from kchaos.checkers.spark import spark_session
from kchaos.checkers.verdict.judge import NOTHING_ACKED, judge
from kchaos.harness.cli.main import main

MASTER = "local[2]"
CUT = '{"index": 99, "time": 1, "process": 0, "type": "ok", "f": "send", "val'
KILL = {**idempotent_test(False), "nemesis": {"names": ["kill-leader"]}}


@pytest.fixture(scope="module")
def spark():
    """One SparkSession for the module's checks."""
    session = spark_session(MASTER)
    yield session
    session.stop()


def clean(fault: str | None = "ok") -> HistoryBuilder:
    """Two acknowledged writes, read back by a complete final read; a kill-leader fault with completion `fault`."""
    h = HistoryBuilder().send(0, 1, 0, offset=0)
    if fault is not None:
        h.fault(outcome=fault, **({"error": "no leader for partition 0"} if fault == "info" else {"nodes": ["n1"]}))
    return h.send(0, 2, 1, offset=0).drain(3, 0, [(0, 0, 1)]).drain(3, 1, [(1, 0, 2)])


# --- nothing to check: bad input, nothing created -----------------------------------------------------------

@pytest.mark.parametrize("text, why", [("", "it is empty"), ("\n \n", "it is empty"),
                                       (CUT, "its only line is cut off")])
def test_an_empty_history_is_bad_input_and_creates_nothing(tmp_path, capsys, text, why):
    (tmp_path / "empty.jsonl").write_text(text)
    assert main(["check", str(tmp_path / "empty.jsonl"), "--spark-master", MASTER]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0] and "not a history" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.jsonl"]


def test_a_file_that_is_not_a_history_is_bad_input_and_creates_nothing(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("these are my notes\nabout the run\n")
    assert main(["check", str(tmp_path / "notes.txt"), "--spark-master", MASTER]) == 3
    assert "notes.txt:1: not JSON" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.spark
def test_a_bare_history_gets_its_outputs_beside_it_never_in_the_working_directory(tmp_path, monkeypatch, spark):
    where, elsewhere = tmp_path / "histories", tmp_path / "cwd"
    where.mkdir(), elsewhere.mkdir()
    (where / "h.jsonl").write_text(clean().text())
    monkeypatch.chdir(elsewhere)
    assert main(["check", str(where / "h.jsonl"), "--spark-master", MASTER]) == 0
    assert list(elsewhere.iterdir()) == []
    assert {"h.parquet", "results.json"} <= {p.name for p in where.iterdir()}


# --- a damaged history --------------------------------------------------------------------------------------

@pytest.mark.spark
def test_a_cut_off_last_line_is_said_and_the_run_cannot_pass(tmp_path, spark):
    run = clean().write(tmp_path / "run", KILL, tail=CUT)
    r = check_path(run, MASTER)
    assert r["counts"]["acked"] == 2 and r["history"] == {"lines": 10, "cut_off_last_line": True, "unparsed_lines": 1}
    assert r["undecided"] == ["the last line of the history was cut off; judged on the 10 lines before it"]
    assert r["verdict"] == "unknown"


@pytest.mark.spark
def test_a_cut_off_last_line_is_said_even_when_the_run_fails(tmp_path, spark, capsys):
    h = clean()
    h.send(0, 3, 0, offset=1)  # acknowledged, never read by the complete final read: lost inside the promise
    run = h.write(tmp_path / "run", KILL, tail=CUT)
    assert main(["check", str(run), "--spark-master", MASTER]) == 1
    out = capsys.readouterr().out
    assert out.startswith("verdict: fail") and \
        "history: 1 unparsed line: the last line was cut off; judged on the 12 lines before it" in out
    assert "history: 1 unparsed line" in (run / "report.html").read_text()


@pytest.mark.spark
@pytest.mark.parametrize("workload", ["queue", "txn", "copy"])
def test_a_damaged_line_in_the_middle_is_bad_input_naming_it(tmp_path, capsys, workload):
    lines = clean().text().splitlines(keepends=True)
    (tmp_path / "history.jsonl").write_text("".join(lines[:3]) + "{not json\n" + "".join(lines[3:]))
    (tmp_path / "test.json").write_text(json.dumps({"workload": {"kind": workload}}))
    assert main(["check", str(tmp_path), "--spark-master", MASTER]) == 3
    assert "history.jsonl:4: not JSON" in capsys.readouterr().err
    assert not (tmp_path / "results.json").exists()


def test_scan_counts_lines_and_finds_nemesis_lines_across_chunks(tmp_path, monkeypatch):
    import kchaos.checkers.history_scan as hs
    monkeypatch.setattr(hs, "CHUNK_BYTES", 64)  # every line crosses a chunk boundary somewhere
    h = clean()
    (tmp_path / "h.jsonl").write_text(h.text())
    s = scan(tmp_path / "h.jsonl")
    assert (s.lines, s.cut_off_last_line) == (len(h.ops), False)
    assert [(o["f"], o["type"]) for o in s.nemesis] == [("kill", "invoke"), ("kill", "ok")]


# --- nothing tested: unknown with the reason ----------------------------------------------------------------

@pytest.mark.spark
def test_a_queue_run_that_acknowledged_nothing_is_unknown(tmp_path, spark):
    h = HistoryBuilder().send(0, 1, 0, outcome="info").fault(nodes=["n1"]).drain(3, 0, [])
    r = check_path(h.write(tmp_path / "run", KILL), MASTER)
    assert (r["verdict"], r["undecided"]) == ("unknown", [NOTHING_ACKED])
    assert "Nothing was acknowledged, so nothing could be lost." in _report(tmp_path / "run")


@pytest.mark.spark
def test_a_txn_run_that_committed_nothing_is_unknown(tmp_path, spark):
    lines = [{"process": 0, "type": "invoke", "f": "txn", "value": [["send", 0, 10]]},
             {"process": 0, "type": "fail", "f": "txn", "value": [["send", 0, 10, 0, 0]],
              "error": "aborted on purpose"},
             {"process": 9, "type": "invoke", "f": "drain", "partition": 0},
             {"process": 9, "type": "ok", "f": "drain", "partition": 0, "records": [], "complete": True}]
    run = _write(tmp_path / "txn", lines, {"workload": {"kind": "txn"}, "topic": {"partitions": 1}})
    r = check_path(run, MASTER)
    assert (r["verdict"], r["undecided"]) == ("unknown", [NOTHING_ACKED])


def test_a_copy_run_with_no_input_is_unknown():
    j = judge({"counts": {"input": 0, "copy_missing": 0}, "checkers": {"copy": {"valid": True}}},
              {"workload": {"kind": "copy"}})
    assert (j.verdict, j.undecided) == ("unknown", (NOTHING_ACKED,))


@pytest.mark.spark
def test_a_run_whose_nemesis_applied_no_fault_is_unknown_with_why(tmp_path, spark, capsys):
    run = clean(fault="info").write(tmp_path / "run", KILL)
    assert main(["check", str(run), "--spark-master", MASTER]) == 2
    r = json.loads((run / "results.json").read_text())
    assert r["nemesis"] == {"asked": ["kill-leader"], "invoked": 1, "applied": 0, "not_applied": 1,
                            "why_not": {"no leader for partition 0": 1}}
    why = ("the nemesis (kill-leader) was asked for faults and applied none: 1 invoked, 1 skipped or failed "
           "(no leader for partition 0)")
    assert r["undecided"] == [why] and why in capsys.readouterr().out and why in _report(run)


@pytest.mark.spark
def test_a_nemesis_that_never_fired_is_unknown_and_one_that_fired_once_passes(tmp_path, spark):
    never = check_path(clean(fault=None).write(tmp_path / "never", KILL), MASTER)
    assert never["undecided"] == ["the nemesis (kill-leader) was asked for faults and applied none: none was "
                                  "invoked before the run ended"]
    h = clean(fault="info").fault(nodes=["n2"])  # one skipped, one applied
    assert check_path(h.write(tmp_path / "once", KILL), MASTER)["verdict"] == "pass"
    none = check_path(clean(fault=None).write(tmp_path / "none", {**KILL, "nemesis": {"names": ["none"]}}), MASTER)
    assert none["verdict"] == "pass"


@pytest.mark.spark
def test_a_run_whose_cluster_did_not_recover_after_the_heal_is_unknown_with_kafkas_words(tmp_path, spark):
    error = "n2: Kafka exited during startup:"
    stuck = check_path(clean().write(tmp_path / "stuck", {**KILL, "recovery": {
        "recovered": False, "within_s": 60.0, "error": error}}), MASTER)
    assert stuck["recovery"]["recovered"] is False
    assert stuck["undecided"] == [f"the cluster did not recover after the heal within 60 s: {error}"]
    back = check_path(clean().write(tmp_path / "back", {**KILL, "recovery": {"recovered": True, "within_s": 60.0}}),
                      MASTER)
    assert back["verdict"] == "pass" and back["recovery"] == {"recovered": True, "within_s": 60.0}


@pytest.mark.spark
def test_compare_and_junit_carry_why_unknown_and_the_unparsed_lines(tmp_path, spark):
    from kchaos.reports.suite.compare import write_compare
    from kchaos.reports.suite.junit import CellOutcome, write_junit

    root = tmp_path / "suite"
    clean().write(root / "cut" / "r1", {**KILL, "name": "cut"}, tail=CUT)
    logged = clean().write(root / "logged" / "r1", {**KILL, "name": "logged", "producer": {"acks": "1"}})
    (logged / "nodes" / "n2").mkdir(parents=True)
    (logged / "nodes" / "n2" / "server.log").write_text(
        "[2026-11-26 16:57:32,983] ERROR Encountered metadata publishing fault: Error applying topics delta "
        "(org.apache.kafka.server.fault.LoggingFaultHandler)\njava.lang.IllegalStateException: failed transition\n")
    for run in (root / "cut" / "r1", logged):
        check_path(run, MASTER)
    rows = write_compare(root)
    assert rows[0]["unparsed_lines"] == 1 and rows[0]["unknown_because"].startswith("the last line of the history")
    assert (rows[1]["kafka_internal"], rows[1]["kafka_errors"], rows[0]["kafka_internal"]) == (1, 1, 0)
    page = (root / "compare.html").read_text()
    assert "unknown because: the last line of the history was cut off" in page and "1 internal fault" in page
    assert "unknown because: Kafka reported an internal fault: n2 16:57:32 Encountered metadata publishing" in page
    report = ET.parse(write_junit(tmp_path / "report.xml", "s", [CellOutcome(r["cell"], r["cell"], r) for r in rows]))
    cut, logs = report.getroot().findall("testsuite/testcase")
    assert cut.find("skipped").get("message").startswith("unknown because: the last line of the history was cut")
    assert logs.find("skipped").get("message").startswith("unknown because: Kafka reported an internal fault")
    props = [{p.get("name"): p.get("value") for p in case.iter("property")} for case in (cut, logs)]
    assert (props[0]["unparsed_lines"], props[0]["verdict"], props[1]["kafka_internal"]) == ("1", "unknown", "1")


def _write(run, lines, test):
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("".join(json.dumps({"index": i, "time": i + 1, **x}) + "\n"
                                               for i, x in enumerate(lines)))
    (run / "test.json").write_text(json.dumps(test))
    return run


def _report(run) -> str:
    from kchaos.reports.run.report import write_report
    return write_report(run).read_text()
