"""One verdict, the same word everywhere (docs/verdicts.md): checkers.verdict.judge's table, and one
run's word on the console, in results.json, report.html, compare.html and compare.csv, JUnit, serve and the exit code.
"""
from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path

import pytest
from histories import HistoryBuilder

from kchaos.checkers.queue.reference import COUNTS
from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, essentials, judge, judged, merge

REPO = Path(__file__).resolve().parents[2]
MASTER = "local[2]"
ALL, ONE = {"producer": {"acks": "all"}}, {"producer": {"acks": "1"}}
IDEMPOTENT = {"producer": {"acks": "all", "idempotence": True}}
UNCLEAN = {"producer": {"acks": "all"}, "topic": {"unclean": True}}


def res(loss: dict | None = None, **counts: int) -> dict:
    return {"counts": {"acked": 100, **counts}, **({"loss": loss} if loss is not None else {})}


# --- the table ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("results, test, verdict, failed, allowed", [
    (res(), ALL, PASS, {}, {}),
    (res(lost=5), ONE, PASS, {}, {"lost": 5}),  # acks=1 loss: observed, allowed
    (res(lost=5), UNCLEAN, PASS, {}, {"lost": 5}),
    (res({"lost_in_promise": 0}, lost=976), ALL, PASS, {}, {"lost": 976}),  # outside Kafka's guarantee
    (res({"lost_in_promise": 2}, lost=5), ALL, FAIL, {"lost": 2}, {"lost": 3}),  # a broken promise
    (res(lost=5), ALL, UNKNOWN, {}, {}),  # never judged against the guarantee: neither failed nor allowed
    (res(duplicate=3), ALL, PASS, {}, {"duplicate": 3}),  # idempotence off
    (res(duplicate=3), IDEMPOTENT, FAIL, {"duplicate": 3}, {}),
    (res(nonmonotonic_send=2), ALL, PASS, {}, {"nonmonotonic_send": 2}),
    (res(nonmonotonic_send=2), IDEMPOTENT, FAIL, {"nonmonotonic_send": 2}, {}),
    (res({"lost_in_promise": 0}, lost=4, nonmonotonic_send=2), IDEMPOTENT, PASS, {},
     {"lost": 4, "nonmonotonic_send": 2}),  # a log truncated outside the guarantee reorders offsets
    (res(inconsistent_offset=1), ALL, FAIL, {"inconsistent_offset": 1}, {}),  # the log changed, nothing explains it
    (res(inconsistent_offset=1), ONE, PASS, {}, {"inconsistent_offset": 1}),
    (res({"lost_in_promise": 0}, lost=9, acked_offset_mismatch=9, nonmonotonic_poll=1), ALL, PASS, {},
     {"lost": 9, "acked_offset_mismatch": 9, "nonmonotonic_poll": 1}),
    (res(acked_offset_mismatch=1), ALL, FAIL, {"acked_offset_mismatch": 1}, {}),
    (res(unexpected=1), ONE, FAIL, {"unexpected": 1}, {}),  # never allowed
    (res(poll_skip=1), UNCLEAN, FAIL, {"poll_skip": 1}, {}),
    (res(failed_visible=2), IDEMPOTENT, PASS, {}, {"failed_visible": 2}),
    (res(unseen=4), ALL, UNKNOWN, {}, {}),
    (res(unseen=4, unexpected=1), ALL, FAIL, {"unexpected": 1}, {}),  # fail outweighs unknown
    ({**res(), "recovery": {"recovered": False, "within_s": 60.0}}, ALL, UNKNOWN, {}, {}),  # not back after the heal
    ({**res({"lost_in_promise": 2}, lost=5), "recovery": {"recovered": False}}, ALL, FAIL, {"lost": 2}, {"lost": 3}),
    ({**res(), "recovery": {"recovered": True, "within_s": 60.0}}, ALL, PASS, {}, {}),
    ({}, ALL, UNKNOWN, {}, {}),  # never checked
    ({"counts": {}, "checkers": {"queue": {"valid": "unknown", "error": "Boom: x"}}}, ALL, UNKNOWN, {}, {}),
])
def test_the_verdict_table(results, test, verdict, failed, allowed):
    j = judge(results, test)
    assert (j.verdict, dict(j.failed), dict(j.allowed)) == (verdict, failed, allowed)
    assert j.valid == {PASS: True, FAIL: False, UNKNOWN: "unknown"}[verdict]
    assert bool(j.undecided) == (verdict == UNKNOWN) or verdict == FAIL
    assert set(j.why["failed"]) == set(failed) and set(j.why["allowed"]) == set(allowed)


def test_judged_sets_the_fields_and_makes_valid_match():
    old = {"valid": False, "counts": {"acked": 10, "lost": 3}, "loss": {"acks": "1", "promised": False}}
    new = judged(old, ONE)
    assert (new["valid"], new["verdict"], new["allowed"], new["failed"]) == (True, PASS, {"lost": 3}, {})
    assert new["why"]["allowed"]["lost"] == "acks=1 promises no durability" and old["valid"] is False
    assert list(new)[:6] == ["valid", "verdict", "failed", "allowed", "why", "undecided"]
    assert judge(essentials(new), ONE) == judge(new, ONE) == judge(old, ONE)  # what serve keeps judges the same


def test_merge_and_the_unknown_checker():
    assert merge([PASS, UNKNOWN]) == UNKNOWN and merge([PASS, FAIL, UNKNOWN]) == FAIL and merge([]) == UNKNOWN
    other = {"counts": {"acked": 1}, "checkers": {"queue": {"valid": True}, "other": {"valid": False}}}
    assert judge(other, ALL).failed == {"checker:other": 1}


def test_docs_list_every_anomaly_kind():
    doc = (REPO / "docs" / "verdicts.md").read_text()
    table = doc[doc.index("| kind |"):]
    for kind in COUNTS:
        if kind != "acked":
            assert f"`{kind}`" in table, kind
    assert "valid` true ⇔ pass" in doc or "true ⇔ `pass`" in doc or "`true` ⇔ pass" in doc


# --- one run, every surface --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark():
    from kchaos.checkers.spark import spark_session
    return spark_session(MASTER)


def lossy(acks: str) -> HistoryBuilder:
    """Two writes acknowledged; the complete final read returns only the first: one of two lost (50%)."""
    h = HistoryBuilder().send(0, 1, 0, offset=0).fault(nodes=["n1"]).send(0, 2, 0, offset=1)
    return h.drain(1, 0, [(0, 0, 1)])


def unseen() -> HistoryBuilder:
    """One write acknowledged on partition 1, whose final read never completed: the checker cannot decide."""
    h = HistoryBuilder().send(0, 1, 0, offset=0).fault(nodes=["n1"]).send(0, 2, 1, offset=0)
    return h.drain(1, 0, [(0, 0, 1)]).drain(1, 1, [], complete=False)


def run_test_json(acks: str) -> dict:
    return {"name": f"cell-acks-{acks}", "seed": 1, "producer": {"acks": acks, "idempotence": False},
            "topic": {"partitions": 2, "min_insync": 2, "unclean": False},
            "nemesis": {"names": ["kill-leader"]}, "cluster": {"nodes": 3}}


@pytest.mark.parametrize("name, history, acks, word, code, severity", [
    ("acks1-lossy", lossy, "1", PASS, 0, "severe"),  # allowed: "pass" on red, never green
    ("acksall-lossy", lossy, "all", FAIL, 1, "severe"),  # no ISR evidence: the loss counts inside the promise
    ("acksall-unseen", lambda _: unseen(), "all", UNKNOWN, 2, "unknown"),
])
@pytest.mark.spark
def test_one_run_gets_the_same_word_on_every_surface(spark, tmp_path, capsys, name, history, acks, word, code,
                                                     severity):
    from kchaos.harness.cli.console import print_suite
    from kchaos.harness.cli.main import main
    from kchaos.harness.terminal import make_console
    from kchaos.reports.serve.store import Store
    from kchaos.reports.suite.compare import write_compare
    from kchaos.reports.suite.junit import CellOutcome, write_junit

    store = tmp_path / "store"
    run = history(acks).write(store / name / "20261124T000000.000Z", run_test_json(acks))
    # results.json as an older kchaos left it: `valid` false for any loss, no verdict
    (run / "results.json").write_text(json.dumps({"valid": False, "counts": {"lost": 1}}))

    # kchaos check: judged again from the history; its exit code and its console line
    assert main(["check", str(run), "--spark-master", MASTER]) == code
    out = capsys.readouterr().out.splitlines()
    # the word, then the severity in words where it is serious or severe: no colour is needed to read it
    assert out[0].split(" · ")[0] == f"verdict: {word}"
    assert (f" · {severity}: " in out[0]) == (severity in ("serious", "severe")), out[0]
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == word and results["valid"] == {PASS: True, FAIL: False, UNKNOWN: "unknown"}[word]
    if word == PASS:
        assert out[1] == "observed, allowed: 1 lost (acks=1 promises no durability)"
        assert results["allowed"] == {"lost": 1}
    # report.html (kchaos check rewrote it)
    report = (run / "report.html").read_text()
    assert f'Verdict: <span class="verdict sev-{severity}">{word}</span>' in report
    # compare.html and compare.csv
    rows = write_compare(store)
    assert [r["verdict"] for r in rows] == [word] and rows[0]["severity"] == severity
    page = (store / "compare.html").read_text()
    first = page[page.index('<table class="summary">'):].split("<tr>")[2]  # the header, then the first cell
    tds = re.findall(r"<td[^>]*>(.*?)</td>", first, re.S)
    worded = f" {severity}" if severity in ("serious", "severe") else ""  # the severity in words beside the badge
    assert tds[:2] == [rows[0]["cell"], f'<span class="verdict sev-{severity}">{word}</span>{worded}'], first
    with open(store / "compare.csv") as fh:
        assert next(csv.DictReader(fh))["verdict"] == word
    # JUnit
    outcome = CellOutcome(rows[0]["cell"], "label", rows[0], short=rows[0]["cell"])
    case = ET.parse(write_junit(tmp_path / "report.xml", "s", [outcome])).getroot().find("testsuite/testcase")
    assert case.find("properties/property[@name='verdict']").get("value") == word
    assert (case.find("failure") is not None) == (word == FAIL) and (case.find("skipped") is not None) == \
        (word == UNKNOWN)
    # the console's suite table
    console_out = StringIO()
    print_suite(make_console(console_out), "s", store, [outcome])
    row = next(line for line in console_out.getvalue().splitlines() if rows[0]["cell"] in line and "·" not in line)
    assert row.split()[0] == word
    # serve
    served = Store(store.resolve()).run_info(run.resolve())
    assert (served["verdict"], served["severity"]) == (word, severity)
    index = Store(store.resolve()).page(store.resolve(), ())
    assert "<h2>Runs (1)</h2>" in index and f'<span class="verdict sev-{severity}">{word}</span>' in index


@pytest.mark.spark
def test_lost_writes_never_judged_against_the_guarantee_make_a_no_loss_run_unknown(spark, tmp_path):
    """A results.json without `loss.lost_in_promise` says nothing of which lost writes the guarantee covered: a
    configuration that promises no loss is unknown until `kchaos check` judges them; one that promises none is
    judged as always."""
    from kchaos.checkers import check_path, judge_run
    from kchaos.checkers.verdict.judge import Judgement, judge

    run = lossy("all").write(tmp_path / "run", run_test_json("all"))
    checked = check_path(run, MASTER)
    assert checked["counts"]["lost"] and "lost_in_promise" in checked["loss"]
    unjudged = {**checked, "loss": {k: v for k, v in checked["loss"].items() if k != "lost_in_promise"}}
    (run / "results.json").write_text(json.dumps(unjudged))
    j = judge_run(run)
    assert j.verdict == UNKNOWN and "lost" not in j.failed and "lost" not in j.allowed
    assert any("not judged against Kafka's guarantee" in u for u in j.undecided)
    acks1 = judge(unjudged, run_test_json("1"))
    assert acks1.allowed["lost"] == checked["counts"]["lost"]
    assert Judgement.from_results({"valid": False}).verdict == UNKNOWN  # no stored verdict: nothing to trust


# --- colour follows severity -------------------------------------------------------------------------------

def test_a_976_percent_loss_that_passes_is_red_on_every_surface(tmp_path):
    """The acks=all power-fail-all cell lost 97.6% of its writes, outside the guarantee."""
    from kchaos.harness.cli.console import print_suite
    from kchaos.harness.terminal import make_console
    from kchaos.reports.severity import level
    from kchaos.reports.suite.compare import write_compare
    from kchaos.reports.suite.junit import CellOutcome

    run = tmp_path / "s" / "power-fail-all" / "20261124T000000.000Z"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("")
    (run / "test.json").write_text(json.dumps({"name": "power-fail-all", "producer": {"acks": "all"}}))
    (run / "results.json").write_text(json.dumps({
        "valid": False, "counts": {"acked": 1000, "lost": 976},
        "loss": {"promised": True, "lost_in_promise": 0, "lost_outside_promise": 976}}))
    row = write_compare(tmp_path / "s")[0]
    assert (row["verdict"], row["severity"], row["loss_rate"]) == (PASS, "severe", 0.976)
    assert row["allowed"] == "976 lost (outside Kafka's guarantee)"
    assert level(PASS, 976, 1000, True) == "severe" and level(PASS, 0, 1000) == "clean"
    page = (tmp_path / "s" / "compare.html").read_text()
    body = page[page.index("<body>"):]
    assert '<span class="verdict sev-severe">pass</span>' in body and "sev-clean" not in body
    out = StringIO()
    print_suite(make_console(out, color="always"), "s", tmp_path / "s",
                [CellOutcome(row["cell"], "label", row, short="power-fail-all")])
    line = next(x for x in out.getvalue().splitlines() if "power-fail-all" in x and "97.6%" in x)
    assert "\x1b[1;31mpass" in line and "\x1b[32m" not in line  # bold red, not green


def test_a_read_uncommitted_txn_run_is_judged_alike_from_its_essentials():
    # What compare and serve keep of results.json (essentials) must give the run's own word: precommitted_read and
    # G1c_wr are allowed under read_uncommitted, and unseen writes in unfinished partitions leave it unknown.
    test = {"workload": {"kind": "txn", "options": {"isolation": "read_uncommitted"}}}
    results = {"counts": {"precommitted_read": 3, "aborted_read": 2, "unseen": 1}, "unseen_undecided": 1,
               "checkers": {"txn": {"valid": "unknown", "isolation": "read_uncommitted", "counts": {}}}}
    own = judge(results, test)
    assert own.verdict == UNKNOWN and set(own.allowed) == {"precommitted_read", "aborted_read"}
    assert judge(essentials(results), test) == own
    bare = {"counts": results["counts"], "unseen_undecided": 1}  # no checker result: test.json's isolation decides
    assert judge(bare, test) == own


@pytest.mark.parametrize("unclean", [False, True])
def test_a_txn_run_follows_the_queue_rule_for_lost_writes_under_unclean_election(unclean):
    # The queue fails lost writes where the configuration promises no loss and allows them under unclean leader
    # election; a txn run's lost and unseen committed writes, and the offsets a rewritten log shows, do the same.
    test = {"topic": {"unclean": unclean}, "workload": {"kind": "txn"}}
    results = {"counts": {"lost_write": 2, "unseen": 3, "inconsistent_offsets": 1, "G0": 4}, "unseen_undecided": 0,
               "checkers": {"txn": {"valid": False, "isolation": "read_committed", "counts": {}}}}
    j = judge(results, test)
    loss = {"lost_write": 2, "unseen": 3, "inconsistent_offsets": 1}
    queue = judge({"counts": {"acked": 10, "lost": 2}, "loss": {"lost_in_promise": 2}}, {"topic": {"unclean": unclean}})
    if unclean:
        assert j.verdict == PASS and j.failed == {} and j.allowed == {**loss, "G0": 4}
        assert j.why["allowed"]["lost_write"] == queue.why["allowed"]["lost"]  # the queue's own words
        assert "unclean leader election" in j.why["allowed"]["unseen"]
        assert queue.verdict == PASS and queue.allowed == {"lost": 2}
    else:
        assert j.verdict == FAIL and j.failed == loss and j.allowed == {"G0": 4}
        assert "lost_write" not in j.why["allowed"]
        assert queue.verdict == FAIL and queue.failed == {"lost": 2}
    assert judge(essentials(results), test) == j  # compare and serve judge the essentials alike


@pytest.mark.parametrize("unclean", [False, True])
def test_a_copy_run_promises_exactly_once_only_where_kafka_promises_no_loss(unclean):
    # Exactly-once rests on the logs (input, output, the committed offsets) surviving: under unclean leader
    # election a rewritten log can show as any copy kind, so each is observed, allowed; otherwise each fails.
    test = {"topic": {"unclean": unclean}, "workload": {"kind": "copy"}}
    kinds = {"copy_missing": 2, "copy_duplicate": 3, "copy_invented": 1}
    results = {"counts": kinds, "checkers": {"copy": {"valid": False, "isolation": "read_committed"}}}
    j = judge(results, test)
    if unclean:
        assert j.verdict == PASS and j.failed == {} and j.allowed == kinds
        assert all("unclean leader election" in j.why["allowed"][k] for k in kinds)
    else:
        assert j.verdict == FAIL and j.failed == kinds and j.allowed == {}
    assert judge(essentials(results), test) == j


def test_a_txn_run_under_unclean_election_still_fails_what_no_lost_log_explains():
    test = {"topic": {"unclean": True}, "workload": {"kind": "txn"}}
    j = judge({"counts": {"lost_write": 1, "G1a": 1, "torn_transaction": 2}}, test)
    assert j.verdict == FAIL and j.failed == {"G1a": 1, "torn_transaction": 2} and j.allowed == {"lost_write": 1}
    # unseen writes whose final read did not complete still leave the verdict unknown
    j = judge({"counts": {"unseen": 2}, "unseen_undecided": 2}, test)
    assert j.verdict == UNKNOWN and not j.failed and not j.allowed
