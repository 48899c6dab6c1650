"""Suite files: expansion, errors naming file, line and key, seeds, and the bookkeeping of running and resuming.

Running uses a stand-in runner that writes a small run directory (test.json,
history.jsonl, results.json) the way run_test does, so resume, errors and the
JUnit verdicts can be tested without a cluster; tests/integration/test_suite_run.py
runs a real suite, interrupts it and resumes it.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kchaos.core.store import new_run_dir
from kchaos.core.suite_files import PROGRESS_FILE, read_progress
from kchaos.harness.cli.main import main
from kchaos.harness.suites.run import run_suite
from kchaos.harness.suites.suite import SuiteError, load_suite

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
name: t
seed: 5
repeat: 2
base:
  time_limit: 20
  nemesis: kill-leader
matrix:
  acks: ["1", all]
  min-insync: [1, 2]
exclude:
  - {acks: "1", min_insync: 1}
include:
  - {acks: all, min_insync: 2, unclean: true, nemesis: [partition-leader, kill]}
"""


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_expansion_matrix_exclude_include(tmp_path):
    s = load_suite(write(tmp_path, GOOD))
    assert s.name == "t" and s.repeat == 2 and s.seed == 5
    assert [c.label() for c in s.cells] == [
        "acks=1 min_insync=2", "acks=all min_insync=1", "acks=all min_insync=2",
        "acks=all min_insync=2 unclean=true nemesis=partition-leader,kill"]
    cfg = s.config(s.cells[3], 99, tmp_path, "local[2]")
    assert (cfg.producer.acks, cfg.topic.min_insync, cfg.topic.unclean) == ("all", 2, True)
    assert cfg.nemesis.names == ("partition-leader", "kill") and cfg.time_limit == 20 and cfg.seed == 99
    assert cfg.name == s.cells[3].name and cfg.spark_master == "local[2]"
    assert len({c.name for c in s.cells}) == 4


def test_seeds_are_reproducible_and_distinct(tmp_path):
    s = load_suite(write(tmp_path, GOOD))
    seeds = [s.run_seed(5, c, r) for c in s.cells for r in range(2)]
    assert seeds == [s.run_seed(5, c, r) for c in s.cells for r in range(2)]
    assert len(set(seeds)) == len(seeds)
    assert seeds != [s.run_seed(6, c, r) for c in s.cells for r in range(2)]


@pytest.mark.parametrize("text, where", [
    ("matrix:\n  acks: [1, 2]\n", "s.yaml:2: matrix.acks[1]: --acks must be one of"),
    ("matrix:\n  akcs: [1]\n", "s.yaml:2: matrix.akcs: unknown run option"),
    ("base:\n  time_limit: 5\nmatrix:\n  min_insync: [2, 4]\n", "s.yaml:4: matrix.min_insync[1]: --min-insync 4"),
    ("matrix:\n  acks: [1\n", "s.yaml:3: not valid YAML"),
    ("matrix:\n  acks: [1]\nmatrix:\n  acks: [all]\n", "s.yaml:3: matrix: appears twice"),
    ("matrix:\n  nemesis: [kill, partition-sideways]\n", "s.yaml:2: matrix.nemesis[1]: unknown nemesis"),
    ("base:\n  store: /x\n", "s.yaml:2: base.store: cannot be set in a suite"),
    ("matrix:\n  unclean: [true, 3]\n", "s.yaml:2: matrix.unclean[1]: must be true or false"),
    ("matrix:\n  acks: all\n", "s.yaml:2: matrix.acks: must be a non-empty list"),
    ("repeat: 0\n", "s.yaml:1: repeat: must be an integer 1..1000"),
    ("colour: red\n", "s.yaml:1: colour: unknown key"),
    ("matrix:\n  acks: [1, all]\nexclude:\n  - {acks: 0}\n", "s.yaml:4: exclude[0]: matches no cell"),
    ("matrix:\n  acks: [1, all]\nexclude:\n  - {rf: 1}\n", "s.yaml:4: exclude[0]: rf is not a matrix key"),
    ("matrix:\n  acks: [1, all]\ninclude:\n  - {acks: all}\n", "s.yaml:4: include[0]: cell acks=all is the same"),
    ("base:\n  rf: 2\n  min_insync: 2\nmatrix:\n  rf: [1]\n", "s.yaml:5: matrix.rf[0]: --min-insync 2 is larger"),
    ("- a\n- b\n", "s.yaml:1: a suite file is a mapping"),
])
def test_bad_suite_names_file_line_and_key(tmp_path, text, where):
    with pytest.raises(SuiteError) as e:
        load_suite(write(tmp_path, text))
    assert str(e.value).startswith(where), str(e.value)
    assert "\n" not in str(e.value)


def test_cli_bad_suite_exits_3_before_creating_anything(tmp_path, capsys):
    store = tmp_path / "results"
    code = main(["suite", str(write(tmp_path, "matrix:\n  acks: [2]\n")), "--store", str(store)])
    assert code == 3 and not store.exists()
    assert "s.yaml:2: matrix.acks[0]" in capsys.readouterr().err
    assert main(["suite", str(tmp_path / "missing.yaml"), "--store", str(store)]) == 3


def test_shipped_suites_are_valid():
    quick, nightly = load_suite(REPO / "suites/quick.yaml"), load_suite(REPO / "suites/nightly.yaml")
    assert len(quick.cells) * quick.repeat <= 2
    specs = set()
    for c in nightly.cells:
        v = dict(c.options)["nemesis"]
        specs.update(v if isinstance(v, list) else [v])
    from kchaos.nemesis import network, powerfail, process, slow
    for family in (process, network, powerfail, slow):  # the registry's modules are the families
        assert specs & {p.name for p in family.PACKAGES}, family.__name__
    configs = {(dict(c.options).get("acks"), dict(c.options).get("min_insync")) for c in nightly.cells}
    assert {("1", 2), ("all", 1), ("all", 2)} <= configs


class StandIn:
    """Writes a run directory as run_test would; `lost` and `fail` decide what each cell's runs come to."""

    def __init__(self, lost: dict[str, int] | None = None, fail: set[str] = frozenset(), stop_after: int | None = None,
                 unseen: dict[str, int] | None = None):
        self.lost, self.fail, self.stop_after, self.calls = lost or {}, fail, stop_after, []
        self.unseen = unseen or {}

    def __call__(self, cfg, *, argv=None, console=None, label=""):
        if self.stop_after is not None and len(self.calls) == self.stop_after:
            run = new_run_dir(Path(cfg.store), cfg.name)  # the interrupted run leaves a partial directory
            (run / "history.jsonl").write_text("")
            raise KeyboardInterrupt
        self.calls.append((cfg.name, cfg.seed))
        run = new_run_dir(Path(cfg.store), cfg.name)
        (run / "test.json").write_text(json.dumps(cfg.to_dict()))
        (run / "history.jsonl").write_text("")
        if cfg.name in self.fail:
            raise RuntimeError("cluster exploded\nsecond line")
        lost, unseen = self.lost.get(cfg.name, 0), self.unseen.get(cfg.name, 0)
        results = {"valid": lost == 0 and (unseen == 0 or "unknown"),
                   "counts": {"acked": 100, "lost": lost, "duplicate": 0, "unseen": unseen},
                   "loss": {"lost_in_promise": lost}}
        (run / "results.json").write_text(json.dumps(results))
        return run, results


SMALL = "name: small\nseed: 3\nrepeat: 2\nbase: {time_limit: 5}\nmatrix:\n  acks: ['1', all]\n  min_insync: [1, 2]\n"


def test_run_goes_on_past_errors_and_fails_broken_promises(tmp_path):
    s = load_suite(write(tmp_path, SMALL))
    names = [c.name for c in s.cells]  # acks=1 misr=1, acks=1 misr=2, acks=all misr=1, acks=all misr=2
    runner = StandIn(lost={names[0]: 7, names[3]: 2}, fail={names[2]})
    sdir, outcomes = run_suite(s, tmp_path / "results", runner=runner)
    assert len(runner.calls) == 8 and len(read_progress(sdir)) == 8
    by = {o.name: o for o in outcomes}
    assert by[names[0]].passed  # acks=1 promises nothing: loss is the measurement
    assert by[names[1]].passed
    assert by[names[2]].error and "cluster exploded" in by[names[2]].error and not by[names[2]].passed
    assert by[names[3]].failure == ("fail: 4 lost (inside Kafka's guarantee: an in-sync replica held them) "
                                    "over 2 run(s)")
    assert (by[names[0]].verdict, by[names[0]].severity) == ("pass", "serious")  # 7 of 200 lost: allowed, 3.5%
    junit = ET.parse(sdir / "report.xml").getroot()
    assert junit.get("tests") == "4" and junit.get("failures") == "1" and junit.get("errors") == "1"
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    assert cases[names[3]].find("failure") is not None and cases[names[2]].find("error") is not None
    assert cases[names[0]].find("failure") is None
    assert (sdir / "compare.csv").exists() and (sdir / "compare.html").exists()
    assert (sdir.parent / "latest").resolve() == sdir.resolve()
    # the store's latest is the newest run, made in the suite; the suite's own directory has no latest of its own
    newest = max((r for c in s.cells for r in (sdir / c.name).glob("2*")), key=lambda r: r.name)  # stamps sort
    assert (tmp_path / "results" / "latest").resolve() == newest.resolve() and newest.parent.name == names[3]
    assert not (sdir / "latest").exists()
    assert [c[1] for c in runner.calls] == [s.run_seed(3, c, r) for c in s.cells for r in range(2)]


def test_resume_runs_only_what_is_missing(tmp_path):
    path = write(tmp_path, SMALL)
    s = load_suite(path)
    store = tmp_path / "results"
    first = StandIn(stop_after=3)
    with pytest.raises(KeyboardInterrupt):
        run_suite(s, store, runner=first)
    sdir = next((store / "suites" / "small").glob("2*"))
    assert len(read_progress(sdir)) == 3
    assert len(list((sdir / ".interrupted").rglob("history.jsonl"))) == 1  # set aside, never compared
    again = StandIn()
    sdir2, outcomes = run_suite(s, store, resume=True, runner=again)
    assert sdir2 == sdir and len(again.calls) == 5
    done = [(e.cell, e.rep) for e in read_progress(sdir)]
    assert sorted(done) == sorted((c.name, r) for c in s.cells for r in range(2))
    assert [c[1] for c in first.calls + again.calls] == [s.run_seed(3, c, r) for c in s.cells for r in range(2)]
    assert all(o.passed for o in outcomes)
    with pytest.raises(SuiteError, match="already finished"):
        run_suite(s, store, resume=True, runner=StandIn())


def test_resume_refuses_a_changed_suite_and_a_missing_one(tmp_path):
    path = write(tmp_path, SMALL)
    store = tmp_path / "results"
    with pytest.raises(SuiteError, match="no earlier run"):
        run_suite(load_suite(path), store, resume=True, runner=StandIn())
    with pytest.raises(KeyboardInterrupt):
        run_suite(load_suite(path), store, runner=StandIn(stop_after=1))
    path.write_text(SMALL.replace("repeat: 2", "repeat: 3"))
    with pytest.raises(SuiteError, match="no longer describes"):
        run_suite(load_suite(path), store, resume=True, runner=StandIn())


def test_torn_progress_line_is_ignored(tmp_path):
    s = load_suite(write(tmp_path, SMALL))
    sdir, _ = run_suite(s, tmp_path / "results", runner=StandIn())
    with open(sdir / PROGRESS_FILE, "a") as fh:
        fh.write('{"cell": "x", "rep"')
    assert len(read_progress(sdir)) == 8


def test_cli_exit_code_is_1_when_a_promise_breaks_or_a_run_errors(tmp_path, monkeypatch, capsys):
    from kchaos.harness import runner as harness_runner

    path = write(tmp_path, SMALL.replace("repeat: 2", "repeat: 1"))
    names = [c.name for c in load_suite(path).cells]
    store = str(tmp_path / "results")
    monkeypatch.setattr(harness_runner, "run_test", StandIn(lost={names[0]: 5}))  # acks=1 loses: allowed
    assert main(["suite", str(path), "--store", store]) == 0
    out = capsys.readouterr().out
    assert "4 of 4 cells kept Kafka's promise" in out
    assert "observed, allowed: 5 lost (acks=1 promises no durability)" in out
    monkeypatch.setattr(harness_runner, "run_test", StandIn(lost={names[3]: 5}))  # acks=all misr=2 loses
    assert main(["suite", str(path), "--store", store]) == 1
    assert "3 of 4 cells kept Kafka's promise, 1 broke it" in capsys.readouterr().out
    monkeypatch.setattr(harness_runner, "run_test", StandIn(fail={names[1]}))
    assert main(["suite", str(path), "--store", store]) == 1
    assert any(line.startswith("error ") for line in capsys.readouterr().out.splitlines())
    monkeypatch.setattr(harness_runner, "run_test", StandIn(unseen={names[2]: 3}))  # nothing failed, one unknown
    assert main(["suite", str(path), "--store", store]) == 2
    assert "3 of 4 cells kept Kafka's promise, 1 unknown" in capsys.readouterr().out
    monkeypatch.setattr(harness_runner, "run_test", StandIn(stop_after=0))
    assert main(["suite", str(path), "--store", store]) == 130
    assert "--resume" in capsys.readouterr().err


def test_resume_retries_runs_that_errored(tmp_path):
    s = load_suite(write(tmp_path, SMALL))
    store = tmp_path / "results"
    broken = s.cells[2].name
    sdir, outcomes = run_suite(s, store, runner=StandIn(fail={broken}))
    assert [o.name for o in outcomes if not o.passed] == [broken]
    again = StandIn()
    sdir2, outcomes = run_suite(s, store, resume=True, runner=again)
    assert sdir2 == sdir and [c[0] for c in again.calls] == [broken, broken]
    assert all(o.passed for o in outcomes)
    assert len(list((sdir / ".interrupted").rglob("history.jsonl"))) == 2  # the failed attempts, set aside
    assert len(read_progress(sdir)) == 10  # 8 first, 2 retries superseding the errors


def test_runs_started_in_the_same_millisecond_get_their_own_directories(tmp_path, monkeypatch):
    import kchaos.core.store as store

    stamps = iter(["20261124T014355.200Z", "20261124T014355.200Z", "20261124T014355.201Z"])
    monkeypatch.setattr(store, "stamp", lambda: next(stamps))
    first, second = store.new_run_dir(tmp_path, "t"), store.new_run_dir(tmp_path, "t")
    assert (first.name, second.name) == ("20261124T014355.200Z", "20261124T014355.201Z")
    assert (tmp_path / "latest").resolve() == second.resolve()


def test_txn_suite_expands_to_the_valid_workload_isolation_consumer_cells(tmp_path):
    s = load_suite(REPO / "suites/txn.yaml")
    cells = [dict(c.options) for c in s.cells]
    assert {(c["workload"], c["txn_isolation"], c["consumer_mode"]) for c in cells} == {
        ("queue", "read_committed", "assign"), ("queue", "read_committed", "subscribe"),
        ("txn", "read_committed", "assign"), ("txn", "read_uncommitted", "assign"),
        ("txn", "read_committed", "subscribe"), ("txn", "read_uncommitted", "subscribe")}
    for c in s.cells:  # each cell is a configuration kchaos run accepts
        cfg = s.config(c, 1, tmp_path, "local[1]")
        assert cfg.workload.kind == dict(c.options)["workload"] and cfg.time_limit <= 60
