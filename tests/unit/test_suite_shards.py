"""A suite spread over machines: `kchaos suite FILE --shard I/N` runs a deterministic share of its repetitions with
the seeds a whole run gives them, and `kchaos merge` joins the shards into the night a whole run makes.

The runs are the recorded suite under tests/fixtures/runs, replayed by a stand-in runner that copies each cell's
recorded run where run_test would have made it, so that a whole run and two shards run the very same runs and their
results can be compared file by file.
"""
from __future__ import annotations

import csv
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kchaos.core.store import point_latest, results_root
from kchaos.core.suite_files import PROGRESS_FILE, STATE_FILE, read_progress
from kchaos.harness.cli.main import main
from kchaos.harness.suites.merge import merge_shards
from kchaos.harness.suites.run import run_suite
from kchaos.harness.suites.shard import WHOLE, Shard, share
from kchaos.harness.suites.suite import SuiteError, load_suite
from kchaos.reports.suite.run_index import open_store_index

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
# The suite the recorded runs were made by: their suite.json's cells, options and seed.
SUITE = """\
name: fixtures
description: the recorded runs under tests/fixtures/runs
seed: 4242
base: {time_limit: 30, interval: 8, restart_delay: 3, rate: 40, producers: 2, consumers: 1, partitions: 2,
       nemesis: partition-leader}
matrix:
  acks: ["1", all]
  min_insync: [1, 2]
"""


class Replay:
    """A runner that 'runs' a cell by copying its recorded run into the suite directory, stamp and all."""

    def __init__(self, stop_after: int | None = None):
        self.calls: list[tuple[str, int]] = []
        self.stop_after = stop_after

    def __call__(self, cfg, *, argv=None, console=None, label=""):
        if self.stop_after is not None and len(self.calls) == self.stop_after:
            raise KeyboardInterrupt
        self.calls.append((cfg.name, cfg.seed))
        [recorded] = (FIXTURES / cfg.name).iterdir()
        run = Path(cfg.store) / cfg.name / recorded.name
        shutil.copytree(recorded, run)
        point_latest(results_root(Path(cfg.store)), run)
        return run, json.loads((run / "results.json").read_text())


@pytest.fixture
def suite(tmp_path):
    path = tmp_path / "fixtures.yaml"
    path.write_text(SUITE)
    s = load_suite(path)
    assert [c.name for c in s.cells] == sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
    return s


@pytest.mark.parametrize("cells, repeat, of", [(4, 1, 2), (3, 2, 2), (5, 3, 4), (2, 1, 3), (7, 2, 1)])
def test_the_shards_deal_every_repetition_to_one_shard_as_evenly_as_the_suite_allows(tmp_path, cells, repeat, of):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nrepeat: {repeat}\nmatrix:\n  rate: {list(range(1, cells + 1))}\n")
    s = load_suite(path)
    whole = share(s, WHOLE)
    shares = [share(s, Shard(i, of)) for i in range(1, of + 1)]
    assert sorted(k for part in shares for k, _, _ in part) == [k for k, _, _ in whole] == list(range(cells * repeat))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert [(c.name, r) for part in shares for _, c, r in part] != [] and all(
        (c, r) == (whole[k][1], whole[k][2]) for part in shares for k, c, r in part)


@pytest.mark.parametrize("args, says", [
    (["--shard", "0/2"], "--shard 0/2: I must be between 1 and N"),
    (["--shard", "3/2"], "--shard 3/2: I must be between 1 and N"),
    (["--shard", "2"], "--shard 2: give it as I/N"),
    (["--shard", "1/2", "--dry-run"], "--shard 1/2 needs the suite's seed fixed"),
    (["--shard", "1/2"], "--shard 1/2 needs the suite's seed fixed"),
])
def test_a_bad_shard_is_one_line_and_exit_3_before_anything_is_created(tmp_path, capsys, args, says):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nmatrix:\n  acks: ['1', all]\n")  # no seed: a whole run would draw one
    store = tmp_path / "results"
    assert main(["suite", str(path), "--store", str(store), *args]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kchaos: error: " + says), err
    assert not store.exists()


def _normalised(night: Path) -> dict[str, object]:
    """What a night holds, but the times it took and where it lives: its progress, compare.csv and JUnit report."""
    progress = [(e.cell, e.rep, e.seed, e.run, e.status, e.valid, e.verdict) for e in read_progress(night)]
    junit = ET.parse(night / "report.xml").getroot()
    for el in junit.iter():
        el.attrib.pop("time", None)
        el.attrib.pop("timestamp", None)
    return {"progress": progress, "compare": list(csv.DictReader(open(night / "compare.csv"))),
            "junit": ET.tostring(junit, encoding="unicode")}


def test_two_shards_run_each_repetition_once_with_the_whole_runs_seeds_and_merge_into_the_whole_night(
        tmp_path, suite, capsys):
    whole_runner = Replay()
    whole, _ = run_suite(suite, tmp_path / "whole", runner=whole_runner)
    runners = {i: Replay() for i in (1, 2)}
    nights = {i: run_suite(suite, tmp_path / f"shard{i}", runner=runners[i], shard=Shard(i, 2))[0] for i in (1, 2)}
    assert [c for c, _ in runners[1].calls] == ["00_acks-1_misr-1", "02_acks-all_misr-1"]
    assert [c for c, _ in runners[2].calls] == ["01_acks-1_misr-2", "03_acks-all_misr-2"]
    assert sorted(runners[1].calls + runners[2].calls) == sorted(whole_runner.calls)
    assert json.loads((nights[2] / STATE_FILE).read_text())["shard"] == "2/2"
    shard_junit = ET.parse(nights[2] / "report.xml").getroot()  # a shard reports only the cells it ran
    assert [c.get("name") for c in shard_junit.iter("testcase")] == ["01_acks-1_misr-2", "03_acks-all_misr-2"]

    store = tmp_path / "merged"
    code = main(["merge", str(tmp_path / "shard2"), str(nights[1]), "--store", str(store)])
    out = capsys.readouterr().out
    assert code == 0, out
    [night] = (store / "suites" / "fixtures").glob("2*")
    assert night.name == min(n.name for n in nights.values())  # the night is when its first shard began
    assert _normalised(night) == _normalised(whole)
    state = json.loads((night / STATE_FILE).read_text())
    assert "shard" not in state and [s["shard"] for s in state["shards"]] == ["1/2", "2/2"]
    assert state["argv"][:2] == ["kchaos", "merge"] and state["seed"] == 4242
    assert (night.parent / "latest").resolve() == night
    assert "suite fixtures: 4 of 4 cells kept Kafka's promise" in out
    with open_store_index(store) as index:  # one night of four runs for the suite's trends
        [row] = index.nights("fixtures")
        assert row["night"] == f"suites/fixtures/{night.name}"
        assert len(index.runs(night=row["night"])) == 4

    assert main(["merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--store", str(store)]) == 3
    assert "were merged into" in capsys.readouterr().err


def test_merge_refuses_a_missing_a_doubled_an_unfinished_or_a_foreign_shard_and_creates_nothing(
        tmp_path, suite, capsys):
    for i in (1, 2):
        run_suite(suite, tmp_path / f"shard{i}", runner=Replay(), shard=Shard(i, 2))
    store = tmp_path / "merged"

    def refused(*sources: Path) -> str:
        capsys.readouterr()  # the shards' own progress lines
        assert main(["merge", *map(str, sources), "--store", str(store)]) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("kchaos: error: ") and not store.exists(), err
        return err[0]
    assert "shard 2/2 of suite fixtures is missing" in refused(tmp_path / "shard1")
    assert "shard 1/2 found more than once" in refused(tmp_path / "shard1", tmp_path / "shard1", tmp_path / "shard2")
    assert "no shard of a suite" in refused(FIXTURES)
    run_suite(suite, tmp_path / "other", runner=Replay(), shard=Shard(1, 2), seed=7)
    assert "shards of 2 suite nights" in refused(tmp_path / "shard1", tmp_path / "shard2", tmp_path / "other")
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, tmp_path / "cut", runner=Replay(stop_after=1), shard=Shard(2, 2))
    line = refused(tmp_path / "shard1", tmp_path / "cut")
    assert "shard 2/2" in line and "has not finished (1 of its runs are missing)" in line and "--resume" in line

    # the cut shard resumes on its own, and then merges
    again = Replay()
    run_suite(suite, tmp_path / "cut", runner=again, resume=True, shard=Shard(2, 2))
    assert [c for c, _ in again.calls] == ["03_acks-all_misr-2"]
    with pytest.raises(SuiteError, match="no earlier run of suite 'fixtures' in"):
        run_suite(suite, tmp_path / "cut", runner=Replay(), resume=True)  # a whole run was never begun there
    _, night, outcomes = merge_shards([tmp_path / "shard1", tmp_path / "cut"], store)
    assert [o.name for o in outcomes] == [c.name for c in suite.cells] and all(o.passed for o in outcomes)
    assert len((night / PROGRESS_FILE).read_text().splitlines()) == 4


def test_a_shards_dry_run_prints_its_share_of_the_runs_with_their_seeds(tmp_path, suite, capsys):
    assert main(["suite", str(suite.path), "--shard", "2/2", "--dry-run", "--store", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "4 cells × 1 repetition = 4 runs, shard 2/2: 2 of them, seed 4242" in out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == ["01_acks-1_misr-2", "03_acks-all_misr-2"]
    for cell in suite.cells[1::2]:
        assert f"seed {suite.run_seed(4242, cell, 0)}" in out
    assert not (tmp_path / "r").exists()
