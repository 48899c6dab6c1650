"""The shipped quick suite against real clusters: interrupted after its first run, resumed, then compared.

Checks the exit codes (130 on Ctrl-C, 0 when every cell kept its promises),
that resuming runs only the missing cell, the JUnit report, compare.csv,
and that the suite's pages render in headless Chromium with their plots.
"""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from browser import render
from runs import assert_writes_acked_around_every_kill, fault_windows
from signals import sigint_default

from kchaos.core.kafka_versions import LINES

REPO = Path(__file__).resolve().parents[2]
KCHAOS = [sys.executable, "-m", "kchaos"]
pytestmark = pytest.mark.cluster


def test_quick_suite_interrupted_resumed_compared(store):
    suite = REPO / "suites" / "quick.yaml"
    proc = subprocess.Popen([*KCHAOS, "suite", str(suite), "--store", str(store)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=sigint_default)
    progress = None
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(store.glob("suites/quick/2*/progress.jsonl"))
        if found and found[0].read_text().count("\n") >= 1:
            progress = found[0]
            break
        time.sleep(1)
    assert progress is not None, "the first run never finished"
    time.sleep(3)  # let the second run begin, so there is a partial run to set aside
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, out[-3000:]
    assert "--resume" in out
    sdir = progress.parent
    assert len(progress.read_text().splitlines()) == 1

    resumed = subprocess.run([*KCHAOS, "suite", str(suite), "--store", str(store), "--resume"], cwd=REPO,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    # steps go to stderr, the verdict lines (the suite's summary and table) to stdout
    assert "1 left" in resumed.stderr and "2 of 2 cells kept Kafka's promise" in resumed.stdout
    entries = [json.loads(line) for line in progress.read_text().splitlines()]
    assert sorted(e["cell"] for e in entries) == ["00_acks-1", "01_acks-all"]
    assert all(e["status"] == "done" for e in entries)

    junit = ET.parse(sdir / "report.xml").getroot()
    assert junit.get("tests") == "2" and junit.get("failures") == "0" and junit.get("errors") == "0"
    rows = list(csv.DictReader(open(sdir / "compare.csv")))
    assert [(r["acks"], r["runs"]) for r in rows] == [("1", "1"), ("all", "1")]
    assert rows[1]["promise"] == "no loss" and rows[1]["verdict"] == "pass" and rows[1]["lost"] == "0"
    assert rows[0]["verdict"] == "pass"  # acks=1: any loss is observed, allowed
    assert int(rows[0]["acked"]) > 0 and int(rows[1]["acked"]) > 0

    last = next(sdir / e["run"] for e in entries if e["cell"] == "01_acks-all")  # the one the resume ran
    _every_acked_value_was_read_and_the_run_is_complete(last)
    # `results/latest` is the newest run, though a suite made it; the suite's directory has none of its own
    assert (store / "latest").resolve() == last.resolve() and not (sdir / "latest").exists()
    assert (store / "suites" / "quick" / "latest").resolve() == sdir.resolve()

    page = render(sdir / "compare.html")
    page.assert_clean(min_images=1)
    assert "promise" in page.text
    from kchaos.core.history import read_history
    from kchaos.evidence.files import read_isr
    for e in entries:
        run = sdir / e["run"]
        samples = [x for x in read_isr(run / "isr.jsonl") if "error" not in x]
        assert {x["partition"] for x in samples} == {0, 1}
        assert all(set(x["isr"]) <= set(x["replicas"]) and len(x["replicas"]) == 3 for x in samples)
        times = sorted({x["time"] for x in read_isr(run / "isr.jsonl")})  # a failed sample is a line too
        # The monitor samples on a 1 s grid, never faster (a slow sample only delays the next); how many samples
        # fit in the run is the machine's speed, so what is asserted is that it watched every fault.
        assert all(b - a > 0.5e9 for a, b in zip(times, times[1:]))
        ops = list(read_history(run / "history.jsonl"))
        windows = fault_windows(run, ops)
        assert windows and times[0] < windows[0][0] and times[-1] > windows[-1][1], (times, windows)
        assert all(any(a < t < b for t in times) for a, b in windows), (times, windows)
        report = render(run / "report.html")
        report.assert_clean(min_images=4)

    from kchaos.reports.serve.server import make_server
    server = make_server(store, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = render(f"http://127.0.0.1:{server.server_address[1]}/")
        index.assert_clean()
        assert "quick" in index.text
    finally:
        server.shutdown()
        server.server_close()
    # The README's `kchaos explain results/latest`, as written, where `results` is this store: it reads the Kafka
    # files a real run collected (the README's other commands: tests/unit/test_readme.py).
    explained = subprocess.run([*KCHAOS, "explain", "results/latest"], cwd=store.parent, capture_output=True,
                               text=True, timeout=300)
    assert explained.returncode == 0, explained.stderr[-3000:]


def _every_acked_value_was_read_and_the_run_is_complete(run: Path) -> None:
    """acks=all, min.insync=2 under leader kills, on the oldest Kafka line (the spine there; the
    newest is test_versions_spine.py): writes acknowledged before, between and after the kills, every kill with
    writes in flight, and the raw history, not only the checker, says every one was read; and the run directory
    holds what is needed to understand and rerun it."""
    from kchaos.core.history import read_history

    hist = list(read_history(run / "history.jsonl"))
    kills = [r for r in hist if r["process"] == "nemesis" and r["f"] == "kill" and r["type"] == "ok"]
    assert kills and all(k["nodes"][0] in ("n1", "n2", "n3") and k["targets"] == k["nodes"] for k in kills)
    acked = {r["value"] for r in hist if r["f"] == "send" and r["type"] == "ok"}
    read = {v for r in hist if r["type"] == "ok" and r["f"] in ("poll", "drain") for _, _, v in r["records"]}
    assert_writes_acked_around_every_kill(hist)
    assert acked <= read
    res = json.loads((run / "results.json").read_text())
    assert res["valid"] is True and res["counts"]["acked"] == len(acked) and res["counts"]["lost"] == 0
    test = json.loads((run / "test.json").read_text())
    assert test["versions"]["kafka"] == LINES[0].latest and test["kafka_tools"]["line"] == LINES[0].line
    assert test["argv"][:2] == ["kchaos", "suite"]
    assert test["seed"] in {json.loads(line)["seed"] for line in (run.parents[1] / "progress.jsonl").open()}
    for node in ("n1", "n2", "n3"):
        assert "process.roles=broker,controller" in (run / "nodes" / node / "server.properties").read_text()
        assert (run / "nodes" / node / "server.log").stat().st_size > 0
    assert (run / "harness.log").exists()
