"""`kchaos check DIR`: every run below a directory in one Spark job, one row per run; and the timeline."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
from corpora.queue import generate, write

from kchaos.checkers import CheckInputError, check_path, check_tree, find_runs
from kchaos.harness.cli.main import main

MASTER = "local[2]"


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    write(generate(1, sends=300, plant={"lost": 2, "duplicate": 1}), root / "cell-a" / "rep-1")
    write(generate(2, sends=200, acks="1", plant={"lost": 1, "poll_skip": 1}), root / "cell-b" / "rep-1")
    write(generate(3, sends=150), root / "cell-b" / "rep-2")
    bad = root / "cell-c" / "rep-1"
    bad.mkdir(parents=True)
    (bad / "history.jsonl").write_text('{"index":0,"time":1,"process":0,"type":"ok","f":"send","value":1}\n')
    os.symlink(root / "cell-a" / "rep-1", root / "latest")  # must not be checked twice
    return root


def test_find_runs_skips_links_and_sorts(suite):
    assert [p.relative_to(suite).as_posix() for p in find_runs(suite)] == [
        "cell-a/rep-1", "cell-b/rep-1", "cell-b/rep-2", "cell-c/rep-1"]


@pytest.mark.spark
def test_one_job_gives_each_run_what_checking_it_alone_gives(suite, tmp_path):
    out = check_tree(suite, MASTER)
    rows = {r["run"]: r for r in out["runs"]}
    assert list(rows) == ["cell-a/rep-1", "cell-b/rep-1", "cell-b/rep-2", "cell-c/rep-1"]
    assert out["valid"] is False
    assert rows["cell-c/rep-1"]["valid"] == "unknown" and "completes no invocation" in rows["cell-c/rep-1"]["error"]
    for name in ("cell-a/rep-1", "cell-b/rep-1", "cell-b/rep-2"):
        together = json.loads((suite / name / "results.json").read_text())
        alone_dir = tmp_path / name
        alone_dir.mkdir(parents=True)
        for f in ("history.jsonl", "test.json", "faults.json"):
            (alone_dir / f).write_bytes((suite / name / f).read_bytes())
        alone = check_path(alone_dir, MASTER)
        assert together["counts"] == alone["counts"] and together["examples"] == alone["examples"]
        assert together["timeline"] == alone["timeline"] and together["valid"] == alone["valid"]
        assert rows[name]["lost"] == alone["counts"]["lost"] and rows[name]["acked"] == alone["counts"]["acked"]
    assert rows["cell-a/rep-1"]["lost"] == 2 and rows["cell-b/rep-1"]["acks"] == "1"
    assert rows["cell-b/rep-1"]["loss_expected_by_configuration"] is True
    with open(suite / "checks.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["run"] for r in table] == list(rows) and table[0]["lost"] == "2"
    assert json.loads((suite / "checks.json").read_text()) == out["runs"]


@pytest.mark.spark
def test_timeline_places_anomalies_and_faults(suite):
    res = json.loads((suite / "cell-a" / "rep-1" / "results.json").read_text())
    tl = res["timeline"]
    lost = tl["anomalies"]["lost"]
    assert [x["key"] for x in lost] == res["examples"]["lost"]
    assert all(x["acked_s"] is not None and x["exposed_s"] >= x["acked_s"] for x in lost)
    avail = tl["availability"]
    assert avail["overall"]["invoked"] == res["stats"]["send_invoke"]
    assert avail["overall"]["ok"] == res["stats"]["send_ok"]
    assert sum(s["invoked"] for s in avail["per_second"]) == res["stats"]["send_invoke"]
    # Every event an anomaly points to is described once.
    described = {e["index"] for e in tl["events"]}
    assert {i for x in lost for i in x["nemesis"]} <= described


@pytest.mark.spark
def test_cli_checks_a_directory_and_exits_with_the_merged_verdict(suite, capsys):
    assert main(["check", str(suite / "cell-b"), "--spark-master", MASTER, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in out["runs"]] == ["rep-1", "rep-2"]
    assert (suite / "cell-b" / "checks.csv").exists()


def test_a_directory_without_runs_is_bad_input(tmp_path):
    with pytest.raises(CheckInputError, match="no runs"):
        check_tree(tmp_path, MASTER)
    assert main(["check", str(tmp_path), "--spark-master", MASTER]) == 3


@pytest.mark.spark
def test_a_fresh_check_prints_no_spark_banner(suite):
    """The JVM's start-up banner and known noise stay off the console; the verdict is still printed."""
    proc = subprocess.run([sys.executable, "-m", "kchaos", "check", str(suite / "cell-a" / "rep-1"),
                           "--spark-master", MASTER], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "e.g. lost: [70, 294]" in proc.stdout, proc.stderr[-2000:]
    for banner in ("Using Spark's default log4j profile", "Setting default log level", "incubator modules",
                   "NativeCodeLoader"):
        assert banner not in proc.stderr + proc.stdout, proc.stderr[-2000:]
