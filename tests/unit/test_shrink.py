"""Schedule shrinking and replay (harness/scenarios/shrink.py, harness/scenarios/repro.py, `kchaos shrink/repro`).

No cluster runs here: shrink() and repro() get a fake `runner` that stands in
for a cluster. It decides the outcome from the candidate's schedule alone (the
"bug": a power-fail held >= 2 s while a slow-follower episode is active) and
writes a run directory like a real run would. That is enough to test the
search logic, the files it writes and the bad-input paths; whether Kafka
really loses data under the shrunk schedule is for the integration tests.
harness.runner.run_test is replaced by a function that fails the test, so
nothing here can start a real cluster.
"""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from kchaos.checkers.verdict.observed import anomaly_kinds
from kchaos.harness.cli.main import main
from kchaos.harness.scenarios import shrink as sh
from kchaos.harness.scenarios.repro import recorded_config, repro
from kchaos.nemesis.schedule import load_schedule

FIXTURE = next(p for p in (Path(__file__).parents[1] / "fixtures/runs/00_acks-1_misr-1").iterdir() if p.is_dir())
SIZE_KEYS = ("episodes", "nodes", "breadth", "fault_s", "time_limit")
SCHEDULE = [
    {"at": 5.0, "nemesis": "kill-leader", "op": {"f": "kill", "target": "leader", "pick": 11, "partition": 0}},
    {"at": 10.0, "nemesis": "kill-leader", "op": {"f": "start"}},
    {"at": 14.0, "nemesis": "partition-leader",
     "op": {"f": "start-partition", "target": "leader", "pick": 22, "partition": 0}},
    {"at": 24.0, "nemesis": "partition-leader", "op": {"f": "stop-partition"}},
    {"at": 26.0, "nemesis": "slow-follower",
     "op": {"f": "start-slow", "target": "followers", "pick": 33, "partition": 0}},
    {"at": 40.0, "nemesis": "power-fail-all", "op": {"f": "power-fail", "target": "all", "pick": 44}},
    {"at": 46.0, "nemesis": "power-fail-all", "op": {"f": "start"}},
    {"at": 50.0, "nemesis": "slow-follower", "op": {"f": "stop-slow"}},
]
LOST = {"valid": False, "counts": {"acked": 100, "lost": 5}}
CLEAN = {"valid": True, "counts": {"acked": 100, "lost": 0}}


def quiet() -> Console:
    return Console(file=io.StringIO())


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    monkeypatch.setattr("kchaos.harness.runner.run_test", lambda *a, **k: pytest.fail("a real cluster run was started"))


@pytest.fixture
def run(tmp_path) -> Path:
    """A copy of a recorded run with SCHEDULE as its schedule, 60 s long, on lazyfs (power-fail needs it)."""
    d = tmp_path / "orig" / FIXTURE.name
    shutil.copytree(FIXTURE, d)
    test = json.loads((d / "test.json").read_text())
    test["time_limit"] = 60.0
    test["cluster"]["storage"] = "lazyfs"
    (d / "test.json").write_text(json.dumps(test, indent=2))
    (d / "schedule.json").write_text(json.dumps(SCHEDULE))
    return d


def _mend(schedule: list[dict], i: int, f: str) -> dict | None:
    return next((x for x in schedule[i + 1:] if x["nemesis"] == schedule[i]["nemesis"] and x["op"]["f"] == f), None)


def bug(schedule: list[dict]) -> bool:
    """The fake bug: a power-fail held >= 2 s, inside an active slow-follower episode."""
    for i, e in enumerate(schedule):
        end = _mend(schedule, i, "start") if e["op"]["f"] == "power-fail" else None
        if end is None or end["at"] - e["at"] < 2:
            continue
        for j, s in enumerate(schedule):
            stop = _mend(schedule, j, "stop-slow") if s["op"]["f"] == "start-slow" else None
            if stop is not None and s["at"] < e["at"] < stop["at"]:
                return True
    return False


class FakeRunner:
    """Stands in for harness.runner.run_test: records each call, writes a run dir, returns results."""

    def __init__(self, outcome=lambda schedule, n: bug(schedule), results=LOST, fail_on=()):
        self.outcome, self.results, self.fail_on, self.calls = outcome, results, fail_on, []

    def __call__(self, cfg, argv, console, label):
        schedule = json.loads(Path(cfg.nemesis.schedule_file).read_text())
        self.calls.append({"cfg": cfg, "schedule": schedule, "time_limit": cfg.time_limit, "label": label})
        n = len(self.calls)
        if n in self.fail_on:
            raise RuntimeError(f"cluster broke on call {n}")
        d = Path(cfg.store) / cfg.name / str(n)
        d.mkdir(parents=True)
        (d / "schedule.json").write_text(json.dumps(schedule))
        (d / "test.json").write_text(json.dumps({**cfg.to_dict(), "versions": {}, "argv": []}))
        return d, (self.results if self.outcome(schedule, n) else CLEAN)


def lines(out: dict) -> list[dict]:
    return [json.loads(x) for x in (Path(out["dir"]) / "shrink.jsonl").read_text().splitlines()]


def as_size(d: dict) -> tuple:
    return tuple(d[k] for k in SIZE_KEYS)


def assert_replayable(out: dict, run: Path) -> None:
    path = Path(out["dir"]) / "schedule.json"
    assert json.loads(path.read_text()) == out["smallest"]["schedule"]
    cfg, _ = recorded_config(run)
    load_schedule(path, cfg.with_(time_limit=out["smallest"]["size"]["time_limit"]))


# 1. episodes


def test_episodes_pair_each_fault_with_its_mend_in_time_order():
    eps = sh.episodes(list(reversed(SCHEDULE)))
    assert [[e["op"]["f"] for e in ep] for ep in eps] == [
        ["kill", "start"], ["start-partition", "stop-partition"], ["start-slow", "stop-slow"], ["power-fail", "start"]]
    assert [ep[0]["at"] for ep in eps] == [5, 14, 26, 40]
    assert all(len({e["nemesis"] for e in ep}) == 1 for ep in eps)


def test_episodes_roll_and_unmatched_mend_stand_alone():
    sched = [{"at": 1.0, "nemesis": "kill", "op": {"f": "start"}},
             {"at": 2.0, "nemesis": "rolling-restart", "op": {"f": "roll"}},
             {"at": 3.0, "nemesis": "kill", "op": {"f": "kill", "target": "one", "pick": 1}},
             {"at": 6.0, "nemesis": "kill", "op": {"f": "start"}},
             {"at": 8.0, "nemesis": "partition-one", "op": {"f": "stop-partition"}}]
    eps = sh.episodes(sched)
    assert [[(e["at"], e["op"]["f"]) for e in ep] for ep in eps] == [
        [(1.0, "start")], [(2.0, "roll")], [(3.0, "kill"), (6.0, "start")], [(8.0, "stop-partition")]]


def test_narrows_swaps_power_fail_all_for_power_fail_and_followers_for_follower():
    c = sh.Candidate(sh.episodes(SCHEDULE), 60.0)
    aims = {cand.episodes[i][0]["nemesis"]: cand.episodes[i][0]["op"] for i in (2, 3)
            for _, cand in sh.narrows(c) if cand.episodes[i] != c.episodes[i]}
    assert aims["power-fail"]["target"] == "majority" and aims["power-fail"]["pick"] == 44
    assert aims["slow-follower"]["target"] == "follower" and aims["slow-follower"]["partition"] == 0


# 2. the whole search


def test_search_finds_power_fail_on_one_node_inside_slow_follower(run, tmp_path):
    fake = FakeRunner()
    out = sh.shrink(run, tmp_path / "store", max_runs=60, runner=fake, console=quiet())
    shrunk = json.loads((Path(out["dir"]) / "shrunk.json").read_text())
    assert shrunk == {k: v for k, v in out.items() if k != "dir"}
    small = out["smallest"]
    assert small["shrunk"] is True and out["runs"] < 60  # it stopped by itself, not for the budget
    sched = small["schedule"]
    assert bug(sched)
    (slow_on, slow_off), (pf_on, pf_off) = sh.episodes(sched)
    assert slow_on["nemesis"] == slow_off["nemesis"] == "slow-follower"
    assert slow_on["op"]["target"] == "follower" and slow_on["op"]["partition"] == 0
    assert pf_on["nemesis"] == pf_off["nemesis"] == "power-fail"
    cfg, _ = recorded_config(run)
    # all -> majority -> minority -> one: a minority of 3 nodes is one node too, but "one" is the narrower word
    assert pf_on["op"]["target"] == "one" and pf_on["op"]["pick"] == 44
    assert sh.size(sh.Candidate(((pf_on, pf_off),), 60.0), cfg)[1] == 1
    assert slow_on["at"] < pf_on["at"] < pf_off["at"] < slow_off["at"]
    assert 2 <= pf_off["at"] - pf_on["at"] < 4
    assert sched[0]["at"] == pytest.approx(sh.LEAD_IN_S)
    assert small["size"]["time_limit"] < 60 and small["size"]["episodes"] == 2 and small["size"]["nodes"] == 2
    assert_replayable(out, run)
    # the evidence run replays this very schedule
    ev = Path(small["evidence"][0])
    assert json.loads((ev / "schedule.json").read_text()) == sched and out["replay"] == f"kchaos repro {ev}"
    log = lines(out)
    assert len(log) == out["tried"] == len(fake.calls) == out["runs"]
    prev = as_size(out["original_size"])
    for line in log:
        if line["reproduced"]:
            assert as_size(line["size"]) < prev
            prev = as_size(line["size"])
    assert prev == as_size(small["size"])
    keys = [json.dumps([c["schedule"], c["time_limit"]], sort_keys=True) for c in fake.calls]
    assert len(keys) == len(set(keys))
    assert all(c["cfg"].seed == cfg.seed for c in fake.calls)


def test_budget_caps_runs_and_keeps_a_replayable_schedule(run, tmp_path):
    fake = FakeRunner()
    out = sh.shrink(run, tmp_path / "store", max_runs=3, runner=fake, console=quiet())
    assert len(fake.calls) == 3 and out["runs"] == 3 and len(lines(out)) == 3
    assert_replayable(out, run)


def test_budget_of_one_run_that_fails_keeps_the_original(run, tmp_path):
    fake = FakeRunner(outcome=lambda s, n: False)
    out = sh.shrink(run, tmp_path / "store", max_runs=1, runner=fake, console=quiet())
    assert len(fake.calls) == 1 and out["smallest"]["shrunk"] is False
    assert json.loads((Path(out["dir"]) / "schedule.json").read_text()) == SCHEDULE
    assert_replayable(out, run)


# 4.-6. attempts, errors, nothing reproduces


def test_a_candidate_reproduces_when_either_attempt_does(run, tmp_path):
    fake = FakeRunner(outcome=lambda s, n: n % 2 == 0)
    out = sh.shrink(run, tmp_path / "store", max_runs=6, attempts=2, runner=fake, console=quiet())
    log = lines(out)
    assert len(fake.calls) == 6 and len(log) == 3
    for line in log:
        assert line["reproduced"] is True
        assert [r["reproduced"] for r in line["runs"]] == [False, True]
    assert out["smallest"]["shrunk"] is True and out["smallest"]["evidence"] == [log[-1]["runs"][1]["run"]]


def test_a_runner_error_is_recorded_and_the_search_goes_on(run, tmp_path):
    fake = FakeRunner(fail_on=(1,))
    out = sh.shrink(run, tmp_path / "store", max_runs=60, runner=fake, console=quiet())
    log = lines(out)
    assert log[0]["reproduced"] is False
    assert log[0]["runs"][0]["run"] is None and log[0]["runs"][0]["error"].startswith("RuntimeError: cluster broke")
    assert len(log) > 1 and out["smallest"]["shrunk"] is True and bug(out["smallest"]["schedule"])


def test_nothing_reproduces_keeps_the_original(run, tmp_path):
    fake = FakeRunner(outcome=lambda s, n: False)
    out = sh.shrink(run, tmp_path / "store", max_runs=60, runner=fake, console=quiet())
    assert out["smallest"]["shrunk"] is False and out["smallest"]["schedule"] == SCHEDULE
    assert out["smallest"]["evidence"] == [str(run.resolve())]
    assert json.loads((Path(out["dir"]) / "schedule.json").read_text()) == SCHEDULE
    assert out["tried"] == len(fake.calls) > 0 and not any(x["reproduced"] for x in lines(out))


@pytest.mark.parametrize("outcome, code", [(lambda s, n: False, 1), (lambda s, n: bug(s), 0)])
def test_cli_shrink_exit_code(run, tmp_path, monkeypatch, outcome, code):
    monkeypatch.setattr("kchaos.harness.runner.run_test", FakeRunner(outcome=outcome))
    assert main(["shrink", str(run), "--store", str(tmp_path / "store"), "--max-runs", "8"]) == code


# 7. bad input


def _results(run: Path, counts: dict | None) -> Path:
    if counts is None:
        (run / "results.json").unlink()
    else:
        (run / "results.json").write_text(json.dumps({"valid": not counts.get("lost"), "counts": counts}))
    return run


@pytest.mark.parametrize("make_args", [
    lambda r: ["shrink", str(_results(r, None))],
    lambda r: ["shrink", str(_results(r, {"acked": 10, "lost": 2})), "--anomaly", "duplicate"],
    lambda r: ["shrink", str(_results(r, {"acked": 10, "lost": 0}))],
    lambda r: ["repro", str(r / "test.json")],
    lambda r: ["repro", str(r), "--attempts", "0"],
    lambda r: ["shrink", str(r), "--max-runs", "0"],
], ids=["no-results", "anomaly-not-shown", "no-anomaly", "repro-a-file", "attempts-0", "max-runs-0"])
def test_bad_input_exits_3_before_creating_anything(run, tmp_path, capsys, make_args):
    store = tmp_path / "store"
    assert main([*make_args(run), "--store", str(store)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kchaos: error: ")
    assert not store.exists()


# 8. repro


def test_repro_replays_a_run_that_recorded_its_tools_and_releases(run, tmp_path):
    """What a run records about itself since the Kafka lines and the upgrade nemesis (kafka_tools, releases) is not
    configuration: a replay must not refuse it (the CI's repro of a fresh scenario run did, exit 3)."""
    test = json.loads((run / "test.json").read_text())
    test["kafka_tools"] = {"line": "3.7", "tools_version": "3.7.2", "dump_class": "kafka.tools.DumpLogSegments"}
    test["releases"] = {"n1": [{"release": "3.7.2", "from_s": 0.0}]}
    (run / "test.json").write_text(json.dumps(test))
    fake = FakeRunner(outcome=lambda s, n: True, results=json.loads((run / "results.json").read_text()))
    repro(run, tmp_path / "store", attempts=1, runner=fake, console=quiet())
    assert [c["cfg"].seed for c in fake.calls] == [test["seed"]]


def test_repro_replays_seed_and_schedule(run, tmp_path):
    original = json.loads((run / "results.json").read_text())
    fake = FakeRunner(outcome=lambda s, n: True, results=original)
    rdir, report = repro(run, tmp_path / "store", attempts=2, runner=fake, console=quiet())
    saved = json.loads((rdir / "repro.json").read_text())
    assert saved == {k: v for k, v in report.items() if k != "dir"}
    assert saved["reproduced"] == 2 and saved["attempts"] == 2 and len(saved["runs"]) == 2
    assert saved["anomalies"] == anomaly_kinds(original) and saved["anomalies"][0] == "lost"
    seed = json.loads((run / "test.json").read_text())["seed"]
    assert saved["seed"] == seed and len(fake.calls) == 2
    for call in fake.calls:
        assert call["cfg"].seed == seed and call["time_limit"] == 60.0
        assert Path(call["cfg"].nemesis.schedule_file).parent == rdir
        assert call["schedule"] == SCHEDULE == json.loads((rdir / "schedule.json").read_text())
