"""`kchaos compare`: rows per configuration over recorded runs, promises, heatmap, and the page in Chromium."""
from __future__ import annotations

import csv
import io
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image

from harness.cli import main
from reports.compare import COLUMNS, CompareError, heatmap, write_compare

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from browser import render  # noqa: E402

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
    assert (lossy["runs"], lossy["valid"], lossy["invalid"]) == (1, 0, 1)
    assert lossy["promise"] == "none" and lossy["promise_held"] is None
    safe = rows["03_acks-all_misr-2"]
    assert safe["promise"] == "no loss" and safe["promise_held"] is True and safe["lost"] == 0
    # Kafka's guarantee covers acks=all whatever min.insync.replicas is (checkers/promise.py)
    assert rows["02_acks-all_misr-1"]["promise"] == "no loss" and rows["02_acks-all_misr-1"]["promise_held"]
    assert 0 <= safe["availability_in_faults"] <= 1 and safe["send_p50_ms"] <= safe["send_p99_ms"]
    with open(runs / "compare.csv") as fh:
        table = list(csv.DictReader(fh))
    assert tuple(table[0]) == COLUMNS and len(table) == 4


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
    res["counts"]["lost"], res["valid"] = 3, False
    res_path.write_text(json.dumps(res))
    rows = _by_cell(write_compare(runs))
    assert rows["03_acks-all_misr-2"]["promise_held"] is False
    assert "BROKEN" in (runs / "compare.html").read_text()


def test_heatmap_is_a_png_with_a_panel_per_nemesis(runs):
    rows = write_compare(runs)
    one = Image.open(io.BytesIO(heatmap(rows)))
    two = Image.open(io.BytesIO(heatmap(rows + [{**rows[0], "nemesis": "kill-leader"}])))
    assert one.format == "PNG" and two.width > one.width * 1.3
    assert heatmap([{**r, "acked": 0} for r in rows]) is None


def test_compare_page_renders_in_chromium(runs):
    write_compare(runs, "fixtures")
    page = render(runs / "compare.html")
    page.assert_clean(min_images=1)
    assert "00_acks-1_misr-1" in page.text and "no loss" in page.text


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
    from harness.suite import load_suite
    from harness.suite_run import finish

    suite = load_suite(runs / "suite.yaml")
    outcomes = finish(suite, runs)
    assert [o.name for o in outcomes] == [c.name for c in suite.cells] and all(o.passed for o in outcomes)
    assert outcomes[0].row["lost"] > 0 and outcomes[3].row["promise_held"] is True
    junit = ET.parse(runs / "report.xml").getroot()
    assert (junit.get("tests"), junit.get("failures"), junit.get("errors")) == ("4", "0", "0")
    res_path = _only(runs, "03_acks-all_misr-2") / "results.json"
    res = json.loads(res_path.read_text())
    res["counts"]["lost"] = 1
    res_path.write_text(json.dumps(res))
    outcomes = finish(suite, runs)
    assert not outcomes[3].passed and "lost 1 of" in outcomes[3].failure
    assert ET.parse(runs / "report.xml").getroot().get("failures") == "1"


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
    from reports.promise import promise_of

    p = promise_of({"producer": {"acks": acks, "idempotence": idem}, "topic": {"min_insync": misr, "unclean": unclean}})
    assert p.text == text
    assert p.broken({"lost": 1, "duplicate": 0}) is lost_breaks
    assert p.broken({"lost": 1, "lost_in_promise": 0, "duplicate": 0}) is False  # every loss outside the guarantee
    assert p.broken({"lost": 0, "duplicate": 2}) is dup_breaks
    assert not p.broken({"lost": 0, "duplicate": 0})


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
