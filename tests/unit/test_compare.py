"""`kchaos compare`: rows per configuration over recorded runs, promises, heatmap, and the page in Chromium."""
from __future__ import annotations

import csv
import io
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from browser import render
from PIL import Image

from kchaos.harness.cli.main import main
from kchaos.reports.suite.compare import COLUMNS, CompareError, heatmap, write_compare

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


@pytest.fixture
def runs(tmp_path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(FIXTURES, root)
    return root


def _only(root: Path, name: str) -> Path:
    return next((root / name).iterdir())


def _by_cell(rows):
    return {r["cell"]: r for r in rows}


def test_rows_per_configuration_from_recorded_runs(runs):
    rows = _by_cell(write_compare(runs))
    assert set(rows) == {"00_acks-1_misr-1", "01_acks-1_misr-2", "02_acks-all_misr-1", "03_acks-all_misr-2"}
    lossy = rows["00_acks-1_misr-1"]
    res = json.loads((_only(runs, "00_acks-1_misr-1") / "results.json").read_text())
    assert (lossy["acked"], lossy["lost"]) == (res["counts"]["acked"], res["counts"]["lost"]) and lossy["lost"] > 0
    assert lossy["loss_rate"] == round(lossy["lost"] / lossy["acked"], 6)
    # recorded before verdicts (valid: false): acks=1 promises no durability, so the loss is observed, allowed
    assert (lossy["runs"], lossy["pass"], lossy["fail"], lossy["verdict"]) == (1, 1, 0, "pass")
    assert lossy["allowed"].startswith(f"{lossy['lost']} lost (acks=1 promises no durability)")
    assert lossy["severity"] == "severe" and lossy["fails"] is None  # 13% lost: red, whatever the word
    assert lossy["promise"] == "none" and lossy["lost_in_promise"] == 0
    safe = rows["03_acks-all_misr-2"]
    assert safe["promise"] == "no loss" and safe["verdict"] == "pass" and safe["lost"] == 0
    assert safe["severity"] == "clean"
    # Kafka's guarantee covers acks=all whatever min.insync.replicas is (checkers/verdict/promise.py)
    dup = rows["02_acks-all_misr-1"]
    assert dup["promise"] == "no loss" and dup["verdict"] == "pass" and dup["severity"] == "noted"
    assert dup["allowed"] == "2 duplicate (idempotence is off: a retried send may be written twice)"
    assert 0 <= safe["availability_in_faults"] <= 1 and safe["send_p50_ms"] <= safe["send_p99_ms"]
    with open(runs / "compare.csv") as fh:
        table = list(csv.DictReader(fh))
    assert tuple(table[0]) == COLUMNS and len(table) == 4
    assert COLUMNS[:2] == ("cell", "verdict") and {r["verdict"] for r in table} == {"pass"}


def test_repetitions_group_and_other_options_split(runs):
    src = _only(runs, "03_acks-all_misr-2")
    rep = runs / "03_acks-all_misr-2" / "20990101T000000.00Z"
    shutil.copytree(src, rep)
    test = json.loads((rep / "test.json").read_text())
    test["seed"], test["name"] = 999, "another-name"  # a repetition: same configuration
    (rep / "test.json").write_text(json.dumps(test))
    other = runs / "longer" / "20990101T000000.00Z"
    shutil.copytree(src, other)
    test["time_limit"] = 99.0  # a different configuration
    (other / "test.json").write_text(json.dumps(test))
    rows = write_compare(runs)
    assert len(rows) == 5
    twice = next(r for r in rows if r["runs"] == 2)
    assert twice["cell"] == "03_acks-all_misr-2,another-name" and twice["acked"] == 2 * rows[-1]["acked"] // 1
    assert {r["other"] for r in rows} == {"time_limit=30.0", "time_limit=99.0"}


def test_broken_promise_is_reported(runs):
    res_path = _only(runs, "03_acks-all_misr-2") / "results.json"
    res = json.loads(res_path.read_text())
    res["counts"]["lost"], res["loss"]["lost_in_promise"] = 3, 3
    res_path.write_text(json.dumps(res))
    rows = _by_cell(write_compare(runs))
    broken = rows["03_acks-all_misr-2"]
    assert (broken["verdict"], broken["lost_in_promise"], broken["fail"]) == ("fail", 3, 1)
    assert broken["fails"].startswith("3 lost (inside Kafka's guarantee")
    page = (runs / "compare.html").read_text()
    assert '<span class="verdict sev-severe">fail</span>' in page and "fails: 3 lost" in page


def test_heatmap_is_one_matrix_of_what_the_cells_vary(runs):
    from kchaos.reports.suite.heatmap import axes

    rows = write_compare(runs)
    assert axes(rows) == (["acks"], ["min_insync"])  # one nemesis: acks across, min.insync down
    one = Image.open(io.BytesIO(heatmap(rows)))
    more = rows + [{**r, "nemesis": "kill-leader"} for r in rows]
    assert axes(more) == (["nemesis"], ["acks", "min_insync"])  # faults across, the configurations down
    two = Image.open(io.BytesIO(heatmap(more)))
    assert one.format == two.format == "PNG" and two.height > one.height * 1.3
    assert heatmap([]) is None
    assert heatmap([{**r, "acked": 0, "lost": 0} for r in rows]) is not None  # "no writes acked", not a blank


def test_a_setting_kchaos_derived_is_no_axis_of_a_suites_heat_map(runs):
    from kchaos.reports.suite.compare import chosen_axes
    from kchaos.reports.suite.heatmap import axes

    # the demo's shape: three cells set acks and nemesis; storage followed from the nemesis (lazyfs for power-fail)
    base = write_compare(runs)[0]
    rows = [{**base, "acks": a, "nemesis": n, "other": f"storage={s}"} for a, n, s in (
        ("1", "partition-leader", "plain"), ("all", "partition-leader,kill-leader", "plain"),
        ("all", "power-fail-all", "lazyfs"))]
    assert axes(rows) == (["nemesis"], ["acks", "storage"])  # a directory of runs: whatever varies
    assert axes(rows, {"acks", "nemesis"}) == (["nemesis"], ["acks"])
    # a setting that tells apart cells the chosen ones do not (a param named otherwise than its column) stays one
    twice = rows + [{**rows[0], "other": "storage=plain writeback_age_s=0.0"}]
    assert axes(twice, {"acks", "nemesis", "writeback_age"}) == (["nemesis"], ["acks", "writeback_age_s"])
    (runs / "suite.json").write_text(json.dumps({"cells": [{"params": {"acks": "1", "nemesis": "x"}},
                                                           {"params": {"schedule": "s.json"}}]}))
    assert chosen_axes(runs) == {"acks", "nemesis", "schedule"}
    assert chosen_axes(runs / "nowhere") is None


def test_heatmap_squares_are_coloured_by_severity_not_by_verdict(runs):
    """The 97.6% cell (acks=all power-fail-all): an allowed loss reads "pass" on a red square, never a green one."""
    from kchaos.reports.suite.heatmap import FILL

    rows = write_compare(runs)
    cell = {**rows[3], "acked": 1000, "lost": 976, "allowed": "976 lost (outside Kafka's guarantee)",
            "severity": "severe", "verdict": "pass"}
    png = Image.open(io.BytesIO(heatmap([cell]))).convert("RGB")
    colours = {c for _, c in png.getcolors(1 << 20)}
    red, green = (tuple(int(FILL[k][i:i + 2], 16) for i in (1, 3, 5)) for k in ("severe", "clean"))
    assert red in colours and green not in colours


def test_compare_page_renders_in_chromium(runs):
    write_compare(runs, "fixtures")
    page = render(runs / "compare.html")
    page.assert_clean(min_images=1)
    assert "00_acks-1_misr-1" in page.text and "more columns" in page.text
    # the readable table comes first, in this order; the wide one is behind the toggle (closed: not shown)
    head = page.text[page.text.index("cell\t"):].splitlines()[0].split("\t")
    assert head == ["cell", "verdict", "acked", "lost", "inside the promise", "loss rate",
                    "acked in time (share · longest outage)", "p50 ms", "p99 ms", "reports"]
    first = page.text[page.text.index("00_acks-1_misr-1\t"):].splitlines()[0].split("\t")
    assert first[:5] == ["00_acks-1_misr-1", "pass severe", "1360", "182", "–"] and first[5] == "13.4%"
    assert "promise_held" not in page.text and "lost_outside_promise" not in page.text


def test_cli_compare_exit_codes(runs, tmp_path, capsys):
    assert main(["compare", str(runs)]) == 0
    assert (runs / "compare.html").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["compare", str(empty)]) == 3
    assert main(["compare", str(tmp_path / "nope")]) == 3
    assert "not a directory" in capsys.readouterr().err
    with pytest.raises(CompareError):
        write_compare(empty)


def test_recorded_suite_finishes_into_junit_and_compare(runs):
    from kchaos.harness.suites.run import finish
    from kchaos.harness.suites.suite import load_suite

    suite = load_suite(runs / "suite.yaml")
    outcomes = finish(suite, runs)
    assert [o.name for o in outcomes] == [c.name for c in suite.cells] and all(o.passed for o in outcomes)
    assert outcomes[0].row["lost"] > 0 and outcomes[3].row["verdict"] == "pass"
    junit = ET.parse(runs / "report.xml").getroot()
    assert (junit.get("tests"), junit.get("failures"), junit.get("errors")) == ("4", "0", "0")
    lossy = junit.find("testsuite/testcase[@name='00_acks-1_misr-1']")
    assert lossy.find("properties/property[@name='verdict']").get("value") == "pass"
    assert "observed, allowed: 182 lost (acks=1 promises no durability)" in lossy.find("system-out").text
    res_path = _only(runs, "03_acks-all_misr-2") / "results.json"
    res = json.loads(res_path.read_text())
    res["counts"]["lost"] = res["loss"]["lost_in_promise"] = 1
    res_path.write_text(json.dumps(res))
    outcomes = finish(suite, runs)
    assert not outcomes[3].passed and outcomes[3].failure.startswith("fail: 1 lost (inside Kafka's guarantee")
    junit = ET.parse(runs / "report.xml").getroot()
    assert junit.get("failures") == "1"
    assert junit.find("testsuite/testcase[@name='03_acks-all_misr-2']/failure").get("type") == "fail"


@pytest.mark.parametrize("acks, misr, unclean, idem, text, lost_breaks, dup_breaks", [
    ("all", 2, False, False, "no loss", True, False),
    ("all", 1, False, False, "no loss", True, False),  # min.insync is not part of Kafka's guarantee
    ("-1", 3, False, False, "no loss", True, False),
    ("all", 2, True, False, "none: unclean leader election is configured", False, False),
    ("all", 1, False, True, "no loss and no duplicates", True, True),
    ("1", 2, False, True, "no duplicates", False, True),
    ("1", 2, False, False, "none", False, False),
])
def test_promise_rules(acks, misr, unclean, idem, text, lost_breaks, dup_breaks):
    from kchaos.checkers.verdict.judge import judge
    from kchaos.core.promise import Promise

    test = {"producer": {"acks": acks, "idempotence": idem}, "topic": {"min_insync": misr, "unclean": unclean}}
    assert Promise.of(test).text == text
    word = {True: "fail", False: "pass"}
    inside = {"counts": {"lost": 1, "duplicate": 0}, "loss": {"lost_in_promise": 1}}
    assert judge(inside, test).verdict == word[lost_breaks]
    outside = {"counts": {"lost": 1, "duplicate": 0}, "loss": {"lost_in_promise": 0}}
    assert judge(outside, test).verdict == "pass"  # every loss outside the guarantee
    assert judge({"counts": {"lost": 0, "duplicate": 2}}, test).verdict == word[dup_breaks]
    assert judge({"counts": {"lost": 0, "duplicate": 0}}, test).verdict == "pass"


def test_cli_report_exit_codes(runs, tmp_path):
    assert main(["report", str(_only(runs, "00_acks-1_misr-1"))]) == 0
    assert (_only(runs, "00_acks-1_misr-1") / "report.html").exists()
    assert not (_only(runs, "01_acks-1_misr-2") / "report.html").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 3
    assert main(["report", str(tmp_path / "nope")]) == 3
    no_test = tmp_path / "bare"
    no_test.mkdir()
    (no_test / "history.jsonl").write_text("")
    assert main(["report", str(no_test)]) == 3


def test_the_page_cache_model_rides_with_each_cell(runs):
    from kchaos.core.page_cache import KERNEL, plan, record
    from kchaos.harness.suites.run import finish
    from kchaos.harness.suites.suite import load_suite

    # two repetitions of one cell whose nodes differ only in the recorded writeback source: still one cell
    run = _only(runs, "02_acks-all_misr-1")
    test = json.loads((run / "test.json").read_text())
    test["cluster"]["storage"] = "lazyfs"
    for i, source in enumerate(((3000, 500), None)):
        test["page_cache"] = record({"n1": plan(KERNEL, None, source)}, "lazyfs")
        target = run if i == 0 else run.with_name(run.name + "-rep2")
        if i:
            shutil.copytree(run, target)
        (target / "test.json").write_text(json.dumps(test))
    rows = _by_cell(write_compare(runs))
    assert rows[test["name"]]["runs"] == 2
    assert rows[test["name"]]["page_cache"] == "kernel 30 s/5 s"
    assert rows["00_acks-1_misr-1"]["page_cache"] is None  # plain storage: no model to state
    outcomes = finish(load_suite(runs / "suite.yaml"), runs)
    junit = ET.parse(runs / "report.xml").getroot()
    case = junit.find(f"testsuite/testcase[@name='{test['name']}']")
    assert case.find("properties/property[@name='page_cache']").get("value") == "kernel 30 s/5 s"
    assert "page cache: kernel 30 s/5 s" in case.find("system-out").text
    assert any(o.row.get("page_cache") for o in outcomes)


@pytest.mark.spark
def test_txn_and_group_anomalies_get_columns_only_when_some_cell_has_them(runs):
    from test_txn_report import tiny_run

    write_compare(runs)  # queue runs only: no anomaly column, the headline as it was
    with open(runs / "compare.csv") as fh:
        assert tuple(next(csv.DictReader(fh))) == COLUMNS
    assert "anomalies by kind" not in (runs / "compare.html").read_text()
    tiny_run(runs / "txn-cell")  # a G0 (allowed), a G1a and a torn transaction (both fail)
    rows = _by_cell(write_compare(runs))
    with open(runs / "compare.csv") as fh:
        header = tuple(next(csv.reader(fh)))
    # the txn headline numbers, then only the kinds some cell has, in `anomaly_kinds` order
    assert header == (*COLUMNS, "txn_committed", "txn_aborted", "txn_info", "failing_anomalies", "G1a",
                      "torn_transaction", "G0")
    assert (rows["tiny-txn"]["G1a"], rows["tiny-txn"]["torn_transaction"], rows["tiny-txn"]["G0"]) == (1, 1, 1)
    assert rows["00_acks-1_misr-1"]["G1a"] is None  # a txn kind does not apply to a queue row: empty, not 0
    page = render(runs / "compare.html")
    page.assert_clean(min_images=1)
    head = page.text[page.text.index("cell\t"):].splitlines()[0].split("\t")
    assert head[-2:] == ["anomalies by kind", "reports"]
    line = page.text[page.text.index("tiny-txn\t"):].splitlines()[0].split("\t")
    assert line[1] == "fail severe" and line[-2] == "G1a\u00a01, torn_transaction\u00a01, G0\u00a01"
    html = (runs / "compare.html").read_text()
    assert '<span class="fails" title="fails the verdict">G1a&nbsp;1</span>' in html
    assert '<span class="allowed" title="observed, allowed">G0&nbsp;1</span>' in html


@pytest.mark.spark
def test_txn_and_copy_rows_have_their_own_headline_and_empty_queue_cells(runs):
    from test_copy_report import tiny_run as tiny_copy
    from test_txn_report import tiny_run as tiny_txn

    tiny_txn(runs / "txn-cell")  # 3 committed, 1 aborted, 1 indefinite; G1a and a torn transaction fail it
    tiny_copy(runs / "copy-cell")  # 4 filled, 1 missing, 1 duplicated, 1 invented
    rows = _by_cell(write_compare(runs))
    txn, copy, queue = rows["tiny-txn"], rows["tiny-copy"], rows["00_acks-1_misr-1"]
    assert (txn["workload"], txn["txn_committed"], txn["txn_aborted"], txn["txn_info"], txn["failing_anomalies"]) == \
        ("txn", 3, 1, 1, 2)
    assert (copy["copy_input"], copy["copy_copied"], copy["copy_missing"], copy["copy_duplicate"],
            copy["failing_anomalies"]) == (4, 3, 1, 1, 3)
    for r in (txn, copy):  # the queue's numbers mean nothing here: empty, not 0
        assert all(r[k] is None for k in ("acked", "lost", "lost_in_promise", "loss_rate", "duplicate"))
    assert txn["copy_input"] is None and copy["txn_committed"] is None and copy["G1a"] is None
    assert queue["acked"] == 1360 and queue["txn_committed"] is None and queue["failing_anomalies"] is None
    with open(runs / "compare.csv") as fh:
        csv_rows = {r["cell"]: r for r in csv.DictReader(fh)}
    assert csv_rows["tiny-txn"]["acked"] == "" and csv_rows["tiny-txn"]["txn_committed"] == "3"
    assert csv_rows["00_acks-1_misr-1"]["copy_missing"] == ""
    page = render(runs / "compare.html")
    page.assert_clean(min_images=1)
    head = page.text[page.text.index("cell\t"):].splitlines()[0].split("\t")
    assert head[2:9] == ["acked", "lost", "inside the promise", "loss rate",
                         "acked in time (share · longest outage)", "p50 ms", "p99 ms"]
    assert head[9:12] == ["transactions (committed / aborted / indefinite)",
                          "copy (input / copied / missing / duplicated)", "failing anomalies"]
    line = dict(zip(head, page.text[page.text.index("tiny-txn\t"):].splitlines()[0].split("\t")))
    assert line["acked"] == "" and line["loss rate"] == "" and line["failing anomalies"] == "2"
    assert line["transactions (committed / aborted / indefinite)"] == "3 / 1 / 1"
    assert line["copy (input / copied / missing / duplicated)"] == ""
    line = dict(zip(head, page.text[page.text.index("tiny-copy\t"):].splitlines()[0].split("\t")))
    assert line["copy (input / copied / missing / duplicated)"] == "4 / 3 / 1 / 1" and line["lost"] == ""
    from kchaos.reports.suite.junit import CellOutcome, write_junit
    write_junit(runs / "report.xml", "s", [CellOutcome(n, n, rows[n]) for n in ("tiny-txn", "tiny-copy")])
    out = {c.get("name"): c.find("system-out").text for c in ET.parse(runs / "report.xml").getroot().iter("testcase")}
    assert "txn_committed=3" in out["tiny-txn"] and "failing_anomalies=2" in out["tiny-txn"]
    assert "copy_input=4" in out["tiny-copy"] and "None" not in out["tiny-txn"] + out["tiny-copy"]
    assert "acked=" not in out["tiny-txn"]


def test_a_txn_or_copy_square_says_its_failing_anomalies_not_a_loss_rate():
    from kchaos.reports.suite.heatmap import _label

    assert _label(None, "pass", None, failing=0).split("\n")[0] == "no failing anomaly"
    assert _label(None, "fail", "matches", failing=3).split("\n") == ["3 failing anomalies", "fail",
                                                                       "prediction matches"]
    assert _label(None, "pass", None).split("\n")[0] == "no writes acked"  # a queue square with nothing acked
    assert _label(0.5, "fail", None).split("\n")[0] == "50% lost"


def test_what_a_run_recorded_about_itself_is_not_its_configuration():
    """A rolling upgrade's `releases` (lists of mappings) neither splits cells nor breaks the grouping."""
    from kchaos.reports.suite.compare import configuration

    base = {"producer": {"acks": "all"}, "nemesis": {"names": ["upgrade"], "upgrade_to": "4.4.0"}}
    a = {**base, "releases": {"n1": [{"release": "3.7.2", "from_s": 0.0}, {"release": "4.4.0", "from_s": 31.0}]}}
    b = {**base, "releases": {"n1": [{"release": "3.7.2", "from_s": 0.0}, {"release": "4.4.0", "from_s": 44.5}]}}
    assert configuration(a) == configuration(b) == configuration(base)
    assert dict(configuration(base))["nemesis.names"] == ("upgrade",)
    assert dict(configuration({"hosts_file": {"nodes": [{"host": "h1"}]}}))["hosts_file.nodes"] == '[{"host": "h1"}]'


def test_a_cell_says_its_sends_errors_and_its_outages_summed_over_its_runs(runs):
    run = _only(runs, "03_acks-all_misr-2")
    results = json.loads((run / "results.json").read_text())
    results["send_errors"] = {"NOT_ENOUGH_REPLICAS": {"fail": 412, "info": 0}, "_MSG_TIMED_OUT": {"fail": 1, "info": 3}}
    results["timeline"]["outages"] = {"span_s": 40.0, "total_s": 10.0, "longest_s": 6.5, "acked_share": 0.75,
                                      "count": 2, "stretches": [], "faults": []}
    (run / "results.json").write_text(json.dumps(results))
    row = _by_cell(write_compare(runs))["03_acks-all_misr-2"]
    assert row["send_errors"] == "NOT_ENOUGH_REPLICAS 412 failed; _MSG_TIMED_OUT 1 failed, 3 unknown"
    assert (row["acked_time_share"], row["longest_outage_s"]) == (0.75, 6.5)
    with open(runs / "compare.csv") as fh:
        line = {r["cell"]: r for r in csv.DictReader(fh)}["03_acks-all_misr-2"]
    assert line["send_errors"] == row["send_errors"] and line["longest_outage_s"] == "6.5"
    assert _by_cell(write_compare(runs))["00_acks-1_misr-1"]["send_errors"] is None  # every send succeeded
