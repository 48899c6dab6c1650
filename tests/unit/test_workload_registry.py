"""A new workload is one package plus one registry line (core/workload_kind.py): the echo workload, defined only in
tests/echo_workload, goes through `kchaos check`, the verdict, report.html and compare without any other file
knowing it."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kchaos.checkers import check_path, judge_run
from kchaos.core.config import ConfigError, TestConfig, validate
from kchaos.core.workload_kind import KINDS, UnknownWorkload, kind_of
from kchaos.harness.cli.parser import build_parser
from kchaos.harness.options import config_from_args
from kchaos.reports.run.report import write_report
from kchaos.reports.suite.compare import write_compare


@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setitem(KINDS, "echo", "echo_workload")  # the one registry line


def echo_run(root: Path, name: str, sent: list[int], read: list[int], unclean: bool = False, min_insync: int = 2
             ) -> Path:
    run = root / name / "20261128T000000.000Z"
    run.mkdir(parents=True)
    test = {"name": name, "seed": 1, "topic": {"min_insync": min_insync, "unclean": unclean},
            "producer": {"acks": "all"}, "workload": {"kind": "echo", "producers": 1}, "nemesis": {"names": ["none"]}}
    (run / "test.json").write_text(json.dumps(test))
    ops = [op for i, v in enumerate(sent) for op in ({"index": 2 * i, "time": 2 * i, "process": 0, "type": "invoke",
                                                      "f": "echo", "value": v},
                                                     {"index": 2 * i + 1, "time": 2 * i + 1, "process": 0, "type": "ok",
                                                      "f": "echo", "value": v})]
    ops.append({"index": len(ops), "time": len(ops), "process": 0, "type": "ok", "f": "echo_read", "value": read})
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    return run


def test_the_echo_workload_is_checked_judged_reported_and_compared(echo, tmp_path):
    lost = echo_run(tmp_path, "lossy", [1, 2, 3], [1, 3])
    fine = echo_run(tmp_path, "fine", [1, 2, 3], [1, 2, 3], min_insync=1)
    allowed = echo_run(tmp_path, "unclean", [1, 2], [2], unclean=True)

    r = check_path(lost)
    assert (r["verdict"], r["failed"], r["counts"]) == ("fail", {"echo_lost": 1}, {"acked": 3, "echo_lost": 1})
    assert r["examples"] == {"echo_lost": [2]} and set(r["checkers"]) == {"echo"}
    assert check_path(fine)["verdict"] == "pass"
    r = check_path(allowed)
    assert (r["verdict"], r["allowed"]) == ("pass", {"echo_lost": 1})
    assert judge_run(lost).verdict == "fail"  # read back from results.json and test.json, as every surface does

    page = write_report(lost).read_text()
    assert "3 echoes acknowledged, 2 read back." in page and "<h2>Echoes</h2>" in page and "echo_lost" in page
    assert "No completed echos." in page  # its latency table's unit

    write_compare(tmp_path)
    rows = {r["cell"]: r for r in csv.DictReader((tmp_path / "compare.csv").open())}
    assert {c: (r["workload"], r["verdict"], r["echo_acked"], r["echo_lost"]) for c, r in rows.items()} == {
        "lossy": ("echo", "fail", "3", "1"), "fine": ("echo", "pass", "3", "0"), "unclean": ("echo", "pass", "2", "1")}
    assert {r["acked"] for r in rows.values()} == {""}  # the queue's numbers do not apply to it


def test_its_options_are_kchaos_run_options_and_go_in_test_json(echo):
    cfg = config_from_args(build_parser().parse_args(["run", "--workload", "echo", "--echoes", "5", "--seed", "1"]))
    assert cfg.workload.options.echoes == 5 and cfg.to_dict()["workload"]["options"] == {"echoes": 5}
    assert TestConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="--echoes must be >= 1"):
        validate(config_from_args(build_parser().parse_args(["run", "--workload", "echo", "--echoes", "0"])))
    with pytest.raises(ConfigError, match="--echoes applies to --workload echo only"):
        config_from_args(build_parser().parse_args(["run", "--echoes", "5"]))


def test_a_history_names_its_workload_when_test_json_does_not(echo, tmp_path):
    run = echo_run(tmp_path, "bare", [1], [1])
    (run / "test.json").unlink()
    assert check_path(run)["checkers"].keys() == {"echo"}


def test_an_unregistered_workload_is_unknown_by_name():
    with pytest.raises(UnknownWorkload, match="unknown workload 'echo'; known: copy, queue, share, txn"):
        kind_of("echo")
