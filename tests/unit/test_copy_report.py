"""report.html of a copy run (reports/run/copy_data.py, templates/copy.html.j2).

A tiny copy history, checked by the copy checker, holds one of each thing the section shows: a value lost after
the commit that copied it (missing), a value written twice (duplicated), a value nobody filled (invented), an
aborted copy, a kill window and a rebalance.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from browser import render
from histories import write_registry_faults

from kchaos.checkers import check_path
from kchaos.reports.run.copy_data import CopyRun, read_copy_run
from kchaos.reports.run.report import load_run, write_report

S = 1_000_000_000
TEST = {"name": "tiny-copy", "topic": {"name": "t", "partitions": 2},
        "workload": {"kind": "copy", "options": {"order": False, "isolation": "read_committed"}}}


def tiny_run(root: Path, test: dict | None = None) -> Path:
    fill = [[0, 0, 0], [1, 0, 1], [0, 1, 2], [1, 1, 3]]
    lines = [
        {"process": 2, "type": "invoke", "f": "fill", "topic": "t-in", "values": 4},
        {"process": 2, "type": "ok", "f": "fill", "topic": "t-in", "records": fill},                 # 2
        {"process": 0, "type": "ok", "f": "assign", "topic": "t-in", "partitions": [0, 1], "generation": 1},
        {"process": 0, "type": "invoke", "f": "copy", "value": fill[:2]},                           # 4: index 3
        {"process": 0, "type": "fail", "f": "copy", "value": fill[:2], "error": "aborted"},
        {"process": "nemesis", "type": "invoke", "f": "kill", "nemesis": "kill", "target": "one"},
        {"process": "nemesis", "type": "ok", "f": "kill", "nemesis": "kill", "targets": ["n1"], "nodes": ["n1"]},
        {"process": 0, "type": "invoke", "f": "copy", "value": fill[:2]},                           # 8: index 7
        {"process": 0, "type": "ok", "f": "copy", "value": fill[:2], "sent": [[0, 0], [1, 1]]},
        {"process": "nemesis", "type": "invoke", "f": "start", "nemesis": "kill"},
        {"process": "nemesis", "type": "ok", "f": "start", "nemesis": "kill", "nodes": ["n1"]},
        {"process": 0, "type": "invoke", "f": "copy", "value": fill[2:]},                           # 12: index 11
        {"process": 0, "type": "ok", "f": "copy", "value": fill[2:], "sent": [[0, 2], [1, 3]]},
        {"process": 1, "type": "ok", "f": "revoke", "topic": "t-in", "partitions": [1], "generation": 2},
        {"process": 4, "type": "invoke", "f": "drain", "topic": "t", "partition": 0},
        {"process": 4, "type": "ok", "f": "drain", "topic": "t", "partition": 0, "complete": True,
         "records": [[0, 0, 0], [0, 1, 2], [0, 2, 2]]},                                 # 1 missing, 2 twice
        {"process": 4, "type": "invoke", "f": "drain", "topic": "t", "partition": 1},
        {"process": 4, "type": "ok", "f": "drain", "topic": "t", "partition": 1, "complete": True,
         "records": [[1, 0, 3], [1, 1, 77]]},                                           # 77 invented
    ]
    run = root / "copy" / "20261126T000000.000Z"
    run.mkdir(parents=True)
    ops = [{"index": i, "time": int((1 + i * 0.5) * S), **op} for i, op in enumerate(lines)]
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    (run / "test.json").write_text(json.dumps(test or TEST))
    write_registry_faults(run, ops)
    check_path(run)
    return run


def test_read_copy_run_tallies_the_output_against_the_input_and_links_the_copies(tmp_path):
    run = tiny_run(tmp_path)
    results = json.loads((run / "results.json").read_text())
    x = read_copy_run(run / "history.jsonl", TEST, results)
    assert x.type.tolist() == ["fail", "ok", "ok"] and x.done_s.tolist() == [3.0, 5.0, 7.0]
    t = x.tally
    assert (t.filled, t.output, t.copied_once, t.missing, t.duplicated, t.duplicated_values, t.invented) == \
        (4, 5, 2, 1, 1, 1, 1)
    assert t.reordered is None  # not --copy-order
    ex = {(e.kind, e.value): e for e in x.examples}
    assert set(ex) == {("copy_missing", 1), ("copy_duplicate", 2), ("copy_invented", 77)}
    lost = ex[("copy_missing", 1)]
    assert lost.input == (1, 0) and lost.output == () and lost.copies == ((3, "fail"), (7, "ok")) and lost.copied == 2
    assert ex[("copy_duplicate", 2)].output == ((0, 1), (0, 2)) and ex[("copy_duplicate", 2)].copies == ((11, "ok"),)
    assert ex[("copy_invented", 77)].input is None and ex[("copy_invented", 77)].copies == ()
    assert sorted(x.ops) == [3, 7, 11] and [n for n, _ in x.ops[7]["lines"]] == [8, 9] and x.ops[7]["type"] == "ok"
    assert [(b.process, b.revoked) for b in x.rebalances] == [(0, ()), (1, (1,))]
    assert [(e["f"], e["type"]) for e in x.events] == [("kill", "invoke"), ("kill", "ok"), ("start", "invoke"),
                                                       ("start", "ok")]


def test_an_unchecked_copy_run_takes_its_counts_from_the_history(tmp_path):
    run = tiny_run(tmp_path)
    (run / "results.json").unlink()
    x = read_copy_run(run / "history.jsonl", TEST, None)
    assert (x.tally.missing, x.tally.duplicated, x.tally.invented) == (1, 1, 1)
    assert {(e.kind, e.value) for e in x.examples} == {("copy_missing", 1), ("copy_duplicate", 2),
                                                       ("copy_invented", 77)}
    d = load_run(run)
    assert isinstance(d.section.data, CopyRun) and set(d.latency) == {"ok", "fail"}


def test_copy_report_in_a_browser(tmp_path):
    run = tiny_run(tmp_path)
    html = write_report(run).read_text()
    assert not (run / "history.parquet").exists()  # a copy history is never converted
    for op in (3, 7, 11):
        assert f'<a href="#op-{op}">op {op}</a>' in html and f'id="op-{op}"' in html
    page = render(run / "report.html")
    page.assert_clean(min_images=2)
    assert "4 values filled: 2 copied once, 1 missing, 1 duplicated, 1 invented; 3 copy transactions." in page.text
    for heading in ("Input and output", "Copy transactions", "Copy transaction latency", "Example anomalies",
                    "Copy transaction latency quantiles", "History lines"):
        assert heading in page.text
    assert "Availability" not in page.text  # sends: a queue run's
    assert re.search(r"^copy_missing\t1\tp1@0\t–\top 3 \(fail\), op 7 \(ok\)$", page.text, re.M), page.text
    assert re.search(r"^copy_duplicate\t2\tp0@1\tp0@1, p0@2\top 11 \(ok\)$", page.text, re.M)
    assert "\ninput\t" not in page.text  # sizes are in the input/output table, not among the anomalies


def test_a_kind_the_configuration_allows_is_not_red_and_says_why(tmp_path):
    uncommitted = {**TEST, "workload": {**TEST["workload"], "options": {"isolation": "read_uncommitted"}}}
    html = write_report(tiny_run(tmp_path, uncommitted)).read_text()
    row = re.search(r"<td>duplicated</td>(.*?)</tr>", html, re.S).group(1)
    assert "valid-false" not in row and "<em>observed, allowed</em>" in row and "read_uncommitted reader" in row
    assert 'valid-false">1</strong>' in re.search(r"<td>missing</td>(.*?)</tr>", html, re.S).group(1)
