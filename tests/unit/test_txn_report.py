"""report.html of a txn run (reports/run/txn_data.py, txn_plots.py, txn_cycles.py) and rebalances on the run plots.

A tiny txn history, checked by the reference checker, holds one of each thing the report shows: a G0 cycle (two
transactions interleaving their sends over two partitions), an aborted value read by a read_committed poll (G1a),
a torn transaction (an info transaction only half visible), a rebalance line and a kill window.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from browser import render
from test_txn_checker import RC, H

from kchaos.checkers import check_path
from kchaos.reports.run.report import load_run, write_report
from kchaos.reports.run.txn_cycles import cycle_tables, micro_ops
from kchaos.reports.run.txn_data import linked_ops, read_txn_run, rebalances
from kchaos.reports.run.txn_plots import per_second, txn_png

S = 1_000_000_000


def tiny_run(root: Path) -> Path:
    h = (H().txn(0, "ok", sends=[(0, 10, 0, 0), (1, 11, 1, 1)])          # lines 1-2, invocation index 0
         .txn(1, "ok", sends=[(0, 12, 0, 1), (1, 13, 1, 0)])            # 2: G0 with op 0
         .txn(0, "fail", sends=[(0, 20, 0, 3)])                         # 4: aborted
         .txn(1, "ok", polls=[[[0, 3, 20]]])                            # 6: reads 20: G1a
         .add(process="nemesis", type="invoke", f="kill", nemesis="kill", target="one")
         .add(process="nemesis", type="ok", f="kill", nemesis="kill", targets=["n1"], nodes=["n1"])
         .txn(0, "info", sends=[(0, 30, 0, 5), (1, 31, 1, None)])       # 10: torn
         .add(process=1, type="ok", f="rebalance", revoked=[0], assigned=[1])
         .add(process="nemesis", type="invoke", f="start", nemesis="kill")
         .add(process="nemesis", type="ok", f="start", nemesis="kill", nodes=["n1"])
         .drain(0, [[0, 0, 10], [0, 1, 12], [0, 5, 30]]).drain(1, [[1, 0, 13], [1, 1, 11]]))
    for i, op in enumerate(h.ops):
        op["time"] = int((1 + i * 0.5) * S)  # 2 lines a second
    run = h.write(root / "txn" / "20261126T000000.000Z", {**RC, "name": "tiny-txn", "topic": {"partitions": 2}})
    check_path(run)
    return run


def test_transactions_per_second_by_outcome():
    done = np.array([1.2, 1.7, 2.1, 2.2, 2.9, 4.0])
    types = np.array(["ok", "fail", "ok", "ok", "info", "ok"], dtype=object)
    edges, series = per_second(done, types)
    assert edges.tolist() == [1, 2, 3, 4, 5]
    assert {k: v.tolist() for k, v in series.items()} == {"ok": [1, 2, 0, 1], "fail": [1, 0, 0, 0],
                                                          "info": [0, 1, 0, 0]}
    edges, series = per_second(np.zeros(0), np.zeros(0, object))
    assert len(edges) == 0 and series == {}


@pytest.mark.spark
def test_read_txn_run_places_marks_keeps_linked_lines_and_rebalances(tmp_path):
    run = tiny_run(tmp_path)
    results = json.loads((run / "results.json").read_text())
    assert {k: results["counts"][k] for k in ("G0", "G1a", "torn_transaction")} == \
        {"G0": 1, "G1a": 1, "torn_transaction": 1}
    assert linked_ops(results) == {0, 2, 10}
    x = read_txn_run(run / "history.jsonl", results)
    assert x.type.tolist() == ["ok", "ok", "fail", "ok", "info"]
    assert x.done_s.tolist() == [1.5, 2.5, 3.5, 4.5, 6.5] and np.allclose(x.latency_ms, 500)
    assert x.marks == {"G1a": [4.5], "aborted_read": [], "torn_transaction": [6.5]}  # where 20 was read; op 10's end
    assert [(b.time_s, b.process, b.assigned, b.revoked) for b in x.rebalances] == [(7.0, 1, (1,), (0,))]
    assert [(e["f"], e["type"]) for e in x.events] == [("kill", "invoke"), ("kill", "ok"), ("start", "invoke"),
                                                       ("start", "ok")]
    assert sorted(x.ops) == [0, 2, 10]
    assert [n for n, _ in x.ops[2]["lines"]] == [3, 4] and json.loads(x.ops[2]["lines"][1][1])["index"] == 3
    # under read_uncommitted only the final read is read_committed: a poll's read of 20 is not where G1a shows
    assert read_txn_run(run / "history.jsonl", results, "read_uncommitted").marks["G1a"] == []


def test_rebalances_of_a_subscribe_queue_run_are_its_assign_and_revoke_completions():
    rows = [{"time": 2 * S, "process": 3, "type": "invoke", "f": "assign", "partitions": [0], "generation": 1},
            {"time": 3 * S, "process": 3, "type": "ok", "f": "assign", "partitions": [0], "generation": 1},
            {"time": 1 * S, "process": 4, "type": "ok", "f": "revoke", "partitions": [1, 2], "generation": 0},
            {"time": 4 * S, "process": 4, "type": "ok", "f": "poll", "generation": 1}]
    got = [(b.time_s, b.process, b.assigned, b.revoked, b.generation) for b in rebalances(rows)]
    assert got == [(1.0, 4, (), (1, 2), 0), (3.0, 3, (0,), (), 1)]
    assert rebalances(rows, subscribe=False) == []  # an assign-mode consumer's assign op is no rebalance


@pytest.mark.spark
def test_cycle_tables_link_every_op_and_say_why_each_edge_exists(tmp_path):
    run = tiny_run(tmp_path)
    results = json.loads((run / "results.json").read_text())
    x = read_txn_run(run / "history.jsonl", results)
    (g0,) = cycle_tables(results, x.ops)
    assert g0["kind"] == "G0" and g0["count"] == 1
    assert [(r["op"], r["anchor"], r["process"], r["edge"], r["to"]) for r in g0["rows"]] == \
        [(0, "op-0", 0, "ww", 2), (2, "op-2", 1, "ww", 0)]
    assert g0["rows"][0]["mops"] == "send 10 → p0@0; send 11 → p1@1"
    assert "op 0 sent 10 to partition 0 at offset 0; op 2 sent 12 at offset 1" in g0["rows"][0]["why"]
    assert micro_ops([["poll", [[0, o, o] for o in range(8)]], ["poll", None]]) == \
        "poll p0@0=0 p0@1=1 p0@2=2 p0@3=3 p0@4=4 p0@5=5 …(+2); poll (never ran)"


@pytest.mark.spark
def test_txn_report_in_a_browser(tmp_path):
    run = tiny_run(tmp_path)
    html = write_report(run).read_text()
    assert not (run / "history.parquet").exists()  # a txn history is never converted
    # every op of the cycle and the torn transaction link to an anchor quoting its history lines
    for op in (0, 2, 10):
        assert f'<a href="#op-{op}">op {op}</a>' in html and f'id="op-{op}"' in html
    lines = (run / "history.jsonl").read_text().splitlines()
    quoted = re.search(r'id="op-2".*?<pre>(.*?)</pre>', html, re.S).group(1)
    assert f"     3  {lines[2]}".replace('"', "&#34;") in quoted and "     4  " in quoted
    page = render(run / "report.html")
    page.assert_clean(min_images=2)
    assert "Transactions" in page.text and "Example cycles" in page.text and "G0: write cycle" in page.text
    assert "5 transactions: 3 committed, 1 aborted, 1 indefinite" in page.text
    assert re.search(r"^7\.000\t1\t0\t1\t", page.text, re.M)  # the rebalance table: time, process, revoked, assigned


def test_txn_plot_is_a_png_even_when_empty():
    for done in (np.zeros(0), np.array([1.0, 2.5])):
        data = txn_png(done, np.array(["ok"] * len(done), dtype=object), marks={"G1a": [2.0]}, counts={"G1a": 4},
                       rebalances=[1.5])
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def rebalance_pixels(data: bytes) -> int:
    """Pixels of a PNG plot in the colour a rebalance line has over white."""
    import io

    import matplotlib.colors as mcolors
    import matplotlib.image as mpimg

    from kchaos.reports.run.plot_frame import REBALANCE_COLOR
    img = mpimg.imread(io.BytesIO(data))[..., :3]
    want = 1 - 0.6 * (1 - np.array(mcolors.to_rgb(REBALANCE_COLOR)))
    return int((np.abs(img - want).max(axis=-1) < 0.04).sum())


def test_queue_report_draws_rebalances_of_a_subscribe_run(tmp_path):
    from test_report import make_run

    run = make_run(tmp_path)
    test = json.loads((run / "test.json").read_text())
    test["workload"]["consumer_mode"] = "subscribe"
    (run / "test.json").write_text(json.dumps(test))
    with open(run / "history.jsonl", "a") as fh:
        fh.write(json.dumps({"index": 99, "time": 4 * S, "process": 5, "type": "ok", "f": "assign",
                             "topic": "kchaos", "partitions": [0, 1], "generation": 2}) + "\n")
    d = load_run(run)
    assert [(b.time_s, b.assigned, b.generation) for b in d.rebalances] == [(4.0, (0, 1), 2)]
    # drawn on every plot: dashed lines in plot_frame.REBALANCE_COLOR (alpha 0.6 over white) only where given
    from kchaos.reports.run import plots
    for draw in (plots.latency_png, plots.throughput_png, plots.offsets_png):
        assert rebalance_pixels(draw(d.section.data, rebalances=[4.0])) > rebalance_pixels(draw(d.section.data)) + 50, \
            draw.__name__
    assert "<h2>Rebalances</h2>" in write_report(run).read_text()
