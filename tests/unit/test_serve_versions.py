"""kchaos serve's scenario × Kafka line table: rows by variant (NAME-kafka-LINE in NAME's row), a column per line,
each repetition a square linked to its run."""
from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import pytest

from kchaos.reports.serve.server import make_server, server_url
from kchaos.reports.serve.store import href
from kchaos.reports.serve.versions import version_table

A, B = "20261126T150000.000Z", "20261126T160000.000Z"


def _scenario_run(root: Path, stamp: str, variants: list[tuple[str, str, list[tuple[str, bool]]]]) -> None:
    sdir = root / "scenarios" / "unclean-election" / stamp
    out = []
    for name, predict, runs in variants:
        entries = []
        for i, (kafka, matched) in enumerate(runs):
            run = f"{name}/r{i}"
            (sdir / run).mkdir(parents=True)
            (sdir / run / "history.jsonl").write_text("")
            entries.append({"rep": i, "run": run, "kafka": kafka, "matched": matched, "verdict": "pass"})
        out.append({"name": name, "predict": predict, "runs": entries})
    (sdir / "scenario.json").write_text(json.dumps({"scenario": "unclean-election", "variants": out}))


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "results"
    _scenario_run(root, A, [("config-only", "lost == 0", [("3.7.2", True), ("3.7.2", True)]),
                            ("config-only-kafka-3.9", "lost > 0", [("3.9.2", True), ("3.9.2", False)])])
    _scenario_run(root, B, [("config-only-kafka-4.4", "lost > 0", [("4.4.0", True)]),
                            ("clean", "lost == 0", [("3.7.2", False)])])
    (root / "scenarios" / "unclean-election" / "latest").symlink_to(B)  # as the store keeps it: not counted twice
    return root


def test_a_row_per_variant_and_a_column_per_line(store):
    t = version_table(store / "scenarios", store, href)
    assert t["lines"] == ["3.7", "3.9", "4.4"]
    rows = {r["variant"]: r for r in t["rows"]}
    assert list(rows) == ["config-only", "clean"]
    c37, c39, c44 = rows["config-only"]["cells"]
    assert (c37["matched"], c37["checked"], c37["other"]) == (2, 2, False)
    assert (c39["matched"], c39["checked"], c39["predict"], c39["other"]) == (1, 2, "lost > 0", True)
    assert c44["checked"] == 1 and rows["clean"]["cells"][1:] == [None, None]
    assert c39["squares"][1] == {"href": f"/scenarios/unclean-election/{A}/config-only-kafka-3.9/r1/",
                                 "matched": False, "title": f"{A} rep 2: missed, Kafka 3.9.2, verdict pass"}
    assert version_table(store / "scenarios", store, href, only="other") is None


def test_the_scenarios_page_shows_the_table_and_its_squares_open_the_runs(store):
    server = make_server(store, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = server_url(server).rstrip("/")
        for page in ("/scenarios/", "/scenarios/unclean-election/"):
            body = urllib.request.urlopen(base + page, timeout=10).read().decode()
            assert "Predictions across Kafka versions" in body and "<th>Kafka 3.9</th>" in body
            assert "<code>lost &gt; 0</code>" in body  # the 3.9 and 4.4 prediction, differing from 3.7's
            links = [p.split('"')[0] for p in body.split('class="sq sev-')[1:]]
            assert len(links) == 6
        square = f"/scenarios/unclean-election/{A}/config-only-kafka-3.9/r1/"
        assert f'href="{square}"' in body
        assert urllib.request.urlopen(base + square, timeout=10).status == 200
    finally:
        server.shutdown()
        server.server_close()
