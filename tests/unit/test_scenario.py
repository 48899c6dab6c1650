"""Scenarios: the shipped files, predictions, errors naming file/line/key, observed metrics, judging, the CLI.

Nothing here starts a cluster: scenarios are only loaded (which preflights them),
observe() and judge() read recorded fixture runs or handmade histories, and the
CLI cases all fail (or list) before anything would run. Schedules that loading
writes go to a temporary KCHAOS_CACHE.
"""
from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from histories import HistoryBuilder, write_registry_faults
from hypothesis import given
from hypothesis import strategies as st

from kchaos.checkers.verdict.observed import METRICS, anomaly_kinds, observe
from kchaos.harness.cli.main import main
from kchaos.harness.scenarios.run import RESULT_FILE, judge
from kchaos.harness.scenarios.scenario import Prediction, ScenarioError, find_scenario, load_scenario, scenario_names

REPO = Path(__file__).resolve().parents[2]
FIXTURE_RUNS = sorted(p.parent for p in (REPO / "tests/fixtures/runs").glob("*/*/results.json"))
SHIPPED = ("acks1-leader-failover", "acks1-isolated-leader", "acksall-minisr2-faults", "last-replica-standing",
           "unclean-election", "correlated-power-loss", "rolling-restart", "non-idempotent-retries")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Schedules written while loading go to tmp_path, never the user's cache."""
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def options(sc, variant: str) -> dict:
    return dict(sc.variant_of_name(variant).cell.options)


# 1. the shipped scenarios

def test_every_shipped_scenario_loads_with_known_metrics(cache):
    names = scenario_names()
    assert set(SHIPPED) <= set(names)
    for name in names:
        sc = load_scenario(find_scenario(name))
        assert sc.name == name and sc.description and sc.mechanism and sc.prevents and sc.variants
        for v in sc.variants:
            assert v.predict.names and set(v.predict.names) <= set(METRICS), (name, v.name)
            if v.schedule is not None:  # replayed from a file in the (temporary) cache holding the same entries
                path = Path(options(sc, v.name)["schedule"])
                assert path.parent == cache / "schedules" and json.loads(path.read_text()) == list(v.schedule)


def test_shipped_scenarios_say_what_they_promise():
    faults = load_scenario(find_scenario("acksall-minisr2-faults"))
    assert faults.variant_of_name("kill-leader").predict.text == "lost == 0"
    assert any(e["op"]["f"] == "kill" for e in faults.variant_of_name("kill-leader").schedule)
    unclean = load_scenario(find_scenario("unclean-election"))
    assert [v.name for v in unclean.variants] == ["operator-elects", "config-only", "clean"]
    assert [options(unclean, v)["unclean"] for v in ("operator-elects", "config-only", "clean")] == [True, True, False]
    # only the operator's election makes the stale follower leader, so only it predicts loss
    elect = {v.name: any(e["op"]["f"] == "elect-unclean" for e in v.schedule or ()) for v in unclean.variants}
    assert elect == {"operator-elects": True, "config-only": False, "clean": False}
    assert [v.predict.text.startswith("lost > 0") for v in unclean.variants] == [True, False, False]
    power = load_scenario(find_scenario("correlated-power-loss"))
    suite = power.suite()
    cfgs = {c.name: suite.config(c, 1, Path("/tmp"), "local[*]") for c in suite.cells}
    assert cfgs["flush-every-record"].topic.flush_messages == 1 and cfgs["page-cache"].topic.flush_messages != 1


def test_suite_repeat_and_only():
    sc = load_scenario(find_scenario("acksall-minisr2-faults"))
    assert len(sc.suite().cells) == len(sc.variants) == 6 and sc.suite().repeat == sc.repeat == 1
    part = sc.suite(3, ("isr-below-2", "kill-leader"))
    assert [c.name for c in part.cells] == ["kill-leader", "isr-below-2"] and part.repeat == 3


def test_find_scenario(tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("x: 1\n")
    assert find_scenario(str(own)) == own
    assert find_scenario("rolling-restart") == REPO / "scenarios" / "rolling-restart.yaml"
    for bad in ("nope", "../scenarios/rolling-restart"):
        with pytest.raises(ScenarioError, match="known: .*unclean-election"):
            find_scenario(bad)


# 2. predictions

M = {k: 0 for k in METRICS}


@pytest.mark.parametrize("text, metrics, expected", [
    ("0 < lost < 10", {"lost": 5}, True),
    ("0 < lost < 10", {"lost": 10}, False),
    ("0 < lost < 10", {"lost": 0}, False),
    ("not duplicate > 0", {"duplicate": 0}, True),
    ("not duplicate > 0", {"duplicate": 3}, False),
    ("lost / acked > 0.1", {"lost": 11, "acked": 100}, True),
    ("lost / acked > 0.1", {"lost": 10, "acked": 100}, False),
    ("lost == 0 and not_enough_replicas > 0", {"not_enough_replicas": 2}, True),
    ("lost > 0 or longest_outage_s >= 10 - 2 * 1", {"longest_outage_s": 7.9}, False),
    ("-lost + acked * 2 == 2", {"lost": 4, "acked": 3}, True),
])
def test_prediction_evaluates(text, metrics, expected):
    p = Prediction.parse(text)
    assert p.holds({**M, **metrics}) is expected


def test_division_by_zero_makes_a_prediction_false():
    assert Prediction.parse("lost / acked > 0.1").holds({"lost": 1, "acked": 0}) is False
    assert Prediction.parse("lost / acked > 0.1").holds({"lost": 1, "acked": 2}) is True


def test_prediction_names_in_order():
    assert Prediction.parse("acked > lost and lost > 0").names == ["acked", "lost"]


@pytest.mark.parametrize("text, message", [
    ("bogus > 0", "unknown metric 'bogus'"),
    ("lost > 0 and lots == 1", "unknown metric 'lots'"),
    ("__import__('os')", "Call is not allowed"),
    ("lost.real > 0", "Attribute is not allowed"),
    ("lost == 'x'", "only numbers"),
    ("lost > True", "only numbers"),
    ("lost ** 2 > 1", "Pow is not allowed"),
    ("lost", "must be comparisons"),
    ("lost and acked", "must be comparisons"),
    ("lost > 0 or 1", "must be comparisons"),
    ("not 1", "must be comparisons"),
    ("-" * 6000 + "1 > 0", "nested too deeply"),
    ("lost >", "not an expression"),
    ("", "must be an expression"),
    ("   ", "must be an expression"),
    (None, "must be an expression"),
])
def test_bad_predictions_are_refused(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("*", r"\*")):
        Prediction.parse(text)


@given(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6))
def test_prediction_agrees_with_python(a, b):
    assert Prediction.parse("lost > acked").holds({"lost": a, "acked": b}) == (a > b)
    assert Prediction.parse("lost - acked == 0 or lost <= acked").holds({"lost": a, "acked": b}) == (a <= b)


# 3. bad scenario files: file:line: key: problem

GOOD = """\
name: t
description: d
mechanism: m
prevents: p
base: {acks: all, min_insync: 1, partitions: 1, time_limit: 20}
schedule:
  - {at: 3, nemesis: kill-leader, op: {f: kill, target: leader, partition: 0}}
predict: lost == 0
"""
LINES = GOOD.splitlines(keepends=True)
VARIANTS = "variants:\n  - name: a\n  - name: b\n    options: {unclean: true}\n"


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "s.yaml").write_text(text)
    return tmp_path / "s.yaml"


def test_good_file_loads(tmp_path):
    sc = load_scenario(write(tmp_path, GOOD + VARIANTS))
    assert [v.name for v in sc.variants] == ["a", "b"] and sc.suite().seed == 0
    assert options(sc, "b")["unclean"] is True and "unclean" not in options(sc, "a")


@pytest.mark.parametrize("text, where, message", [
    (GOOD + "colour: red\n", "9: colour", "unknown key"),
    ("".join(LINES[:2] + LINES[3:]), "1: mechanism", "is required"),
    ("".join(LINES[:7]) + "predict: lost > 0 and bogus < 1\n", "8: predict", "unknown metric 'bogus'"),
    (GOOD + VARIANTS + "    predict: lost >\n", "13: variants[1].predict", "not an expression"),
    (GOOD + VARIANTS.replace("unclean: true", "colour: red"), "12: variants[1].options.colour",
     "unknown run option"),
    (GOOD.replace("at: 3", "at: 25"), "6: schedule", "entry 0: at=25"),
    (GOOD.replace("time_limit: 20", "time_limit: 20, nemesis: kill"), "5: base", "schedule"),
    (GOOD + VARIANTS.replace("unclean: true", "nemesis: kill"), "12: variants[1].options",
     "nemesis and a schedule exclude each other"),
    (GOOD + VARIANTS.replace("name: b", "name: a"), "11: variants[1].name", "'a' must be a unique name"),
])
def test_bad_file_names_file_line_and_key(tmp_path, cache, text, where, message):
    with pytest.raises(ScenarioError) as e:
        load_scenario(write(tmp_path, text))
    msg = str(e.value)
    assert msg.startswith(f"s.yaml:{where}: ") and message in msg, msg
    assert "\n" not in msg and str(cache) not in msg and ".json" not in msg


# 4. observed metrics

@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=lambda p: p.parent.name)
def test_observe_fixture_run(run):
    counts = json.loads((run / "results.json").read_text())["counts"]
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines() if line.strip()]
    acks = [o["time"] for o in ops if o.get("f") == "send" and o["type"] == "ok"]
    m = observe(run)
    assert set(m) == set(METRICS)
    assert (m["lost"], m["acked"], m["send_ok"]) == (counts["lost"], counts["acked"], len(acks))
    assert m["unavailable_s"] >= m["longest_outage_s"] >= 0
    widest = max((b - a) / 1e9 for a, b in zip(acks, acks[1:]))
    assert m["longest_outage_s"] >= (round(widest, 1) if widest >= 1 else 0)


def handmade(tmp_path: Path, h: HistoryBuilder, valid=True) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text(h.text())
    (run / "test.json").write_text(json.dumps({"name": "h", "producer": {"acks": "all"}}))
    (run / "results.json").write_text(json.dumps({"valid": valid, "counts": {"acked": 8, "lost": 1},
                                                  "loss": {"lost_in_promise": 1}}))
    return run


def test_observe_handmade_history(tmp_path):
    h = HistoryBuilder()

    def send(process, v, kind, at_ms=None, **done):
        h.op(process, "invoke", "send", after_ms=None if at_ms is None else at_ms - h.t / 1e6, partition=0, value=v)
        h.op(process, kind, "send", after_ms=1, partition=0, value=v, **done)
    for v, t in enumerate((0, 500, 1000, 1500, 2000, 7000, 7500, 8000)):  # acks every 0.5 s but one 5 s gap
        send(0, v, "ok", at_ms=t, offset=v)
    send(1, 8, "fail", error="KafkaError{code=NOT_ENOUGH_REPLICAS}")
    send(1, 9, "fail", error="KafkaError{code=MSG_SIZE_TOO_LARGE}")
    send(1, 10, "info", error="KafkaError{code=_MSG_TIMED_OUT}")
    for f, kind, spec in (("kill", "invoke", "kill"), ("kill", "ok", "kill"), ("start", "invoke", "kill"),
                          ("start", "ok", "kill"), ("start-partition", "info", "partition-one"),
                          ("start-partition", "ok", "partition-one"), ("stop-partition", "ok", "partition-one")):
        h.op("nemesis", kind, f, nemesis=spec)
    run = handmade(tmp_path, h, valid=False)
    write_registry_faults(run, h.ops)
    m = observe(run)
    assert m["longest_outage_s"] == pytest.approx(5.0) and m["unavailable_s"] == pytest.approx(5.0)
    assert (m["send_ok"], m["send_fail"], m["send_info"], m["not_enough_replicas"]) == (8, 2, 1, 1)
    assert m["faults"] == 2  # the ok kill and the ok start-partition; not start, stop-partition, invokes, infos
    assert (m["acked"], m["lost"], m["duplicate"], m["valid"]) == (8, 1, 0, 0)
    # No agreement section (no views sampled): the agreement metrics say so, and no prediction of 0 holds.
    assert (m["metadata_divergence"], m["replica_divergence"], m["unclean_elections"]) == (-1, -1, -1)
    results = json.loads((run / "results.json").read_text())
    results["agreement"] = {"metadata_divergence": 1, "replica_divergence": 0, "elections": {
        "kinds": {"isr": 3, "joined": 1, "unclean": 1, "unmarked": 1}, "mislabelled": 1}}
    (run / "results.json").write_text(json.dumps(results))
    m = observe(run)
    assert (m["metadata_divergence"], m["replica_divergence"], m["unclean_elections"],
            m["mislabelled_elections"]) == (1, 0, 2, 1)



def test_observe_counts_leader_changes_and_isr_shrinks_from_the_isr_samples(tmp_path):
    h = HistoryBuilder()
    h.op(0, "invoke", "send", partition=0, value=0)
    h.op(0, "ok", "send", after_ms=1, partition=0, value=0, offset=0)
    run = handmade(tmp_path, h)
    samples = [  # (time s, partition, leader, isr); a failed sample and a leaderless one in between
        (1, 0, 1, [1, 2, 3]), (1, 1, 2, [2, 3, 1]),
        (2, 0, 1, [1, 2]), (2, 1, 2, [2, 3, 1]),      # p0 shrinks
        (3, 0, -1, [2]), (3, 1, 2, [2, 3]),           # p0 leaderless (skipped for the leader), p1 shrinks
        (4, 0, 2, [2]), (4, 1, 2, [2, 3, 1]),         # p0 moved from 1 to 2; p1 grows back: not a shrink
        (5, 0, 2, [2, 3]), (5, 1, 3, [3, 1]),         # p1 moved and shrank (2 left)
        (6, 0, 1, [1, 2, 3])]                          # p0 moved back to 1
    lines = [json.dumps({"time": int(t * 1e9), "partition": p, "leader": ld, "replicas": [1, 2, 3], "isr": i})
             for t, p, ld, i in samples]
    lines.insert(3, json.dumps({"time": int(2.5e9), "error": "timed out"}))
    (run / "isr.jsonl").write_text("\n".join(lines) + "\n")
    m = observe(run)
    assert (m["leader_changes"], m["isr_shrinks"]) == (3, 4)
    (run / "isr.jsonl").unlink()
    assert (observe(run)["leader_changes"], observe(run)["isr_shrinks"]) == (0, 0)  # a run without samples

def test_observe_counts_transactions_and_their_anomalies(tmp_path):
    h = HistoryBuilder()
    for p, kind in ((0, "ok"), (1, "ok"), (0, "fail"), (1, "info")):
        h.op(p, "invoke", "txn", value=[["send", 1, p]])
        h.op(p, kind, "txn", value=[["send", 1, p, 0, None]])
    run = handmade(tmp_path, h)
    (run / "results.json").write_text(json.dumps({"valid": False, "counts": {"G1a": 2, "torn_transaction": 1, "G0": 3},
                                                  "allowed": {"G0": 3}}))
    m = observe(run)
    assert set(m) == set(METRICS)
    assert (m["txn_ok"], m["txn_fail"], m["txn_info"], m["send_ok"]) == (2, 1, 1, 0)
    assert (m["G1a"], m["torn_transaction"], m["G0"], m["lost_write"]) == (2, 1, 3, 0)
    assert anomaly_kinds(json.loads((run / "results.json").read_text())) == ["G1a", "torn_transaction", "G0"]

# 5. judging a scenario directory

TWO = GOOD.replace("predict: lost == 0\n", "") + """\
variants:
  - {name: lossy, predict: lost > 0}
  - {name: safe, predict: lost == 0}
"""


def test_judge_decides_predictions_and_lists_errors(tmp_path):
    sc = load_scenario(write(tmp_path, TWO))
    sdir = tmp_path / "scenarios" / "t" / "20260101T000000.000Z"
    lossy_run = FIXTURE_RUNS[0]  # acks=1: lost writes
    lost = json.loads((lossy_run / "results.json").read_text())["counts"]["lost"]
    assert lost > 0
    for cell in ("lossy", "safe"):
        shutil.copytree(lossy_run, sdir / cell / "r0")

    def entry(cell, rep, status, run=None, error=None):
        return json.dumps({"cell": cell, "rep": rep, "seed": 7 + rep, "run": run, "status": status,
                           "valid": False if run else None, "seconds": 1.0, "error": error})
    (sdir / "progress.jsonl").write_text("\n".join([
        entry("lossy", 0, "error", error="superseded by the retry below"),
        entry("lossy", 0, "done", "lossy/r0"),
        entry("safe", 0, "done", "safe/r0"),
        entry("safe", 1, "error", error="cluster failed to start"),
        entry("safe", 2, "done", "safe/missing"),
    ]) + "\n")
    results = judge(sc, sdir)
    state = json.loads((sdir / RESULT_FILE).read_text())
    assert state["scenario"] == "t" and state["mechanism"] == "m"
    by = {v["name"]: v for v in state["variants"]}
    assert (by["lossy"]["predict"], by["safe"]["predict"]) == ("lost > 0", "lost == 0")
    assert (by["lossy"]["matched"], by["safe"]["matched"]) == (1, 0)
    assert by["lossy"]["errors"] == [] and by["lossy"]["runs"][0]["metrics"]["lost"] == lost
    assert by["lossy"]["runs"][0]["seed"] == 7 and by["lossy"]["runs"][0]["matched"] is True
    assert by["safe"]["errors"][0] == "rep 2: cluster failed to start"
    assert "rep 3:" in by["safe"]["errors"][1] and "results.json" in by["safe"]["errors"][1]
    assert [r.agreed for r in results] == [True, False]


# 6. the CLI fails (or lists) before anything runs

@pytest.fixture
def cli(monkeypatch):
    """main() with any attempt to run a scenario failing the test; restores main's SIGTERM handler."""
    def refuse(*a, **k):
        raise AssertionError("a scenario run was started")
    monkeypatch.setattr("kchaos.harness.scenarios.run.run_scenario", refuse)
    monkeypatch.setattr("kchaos.harness.suites.run.run_suite", refuse)
    before = signal.getsignal(signal.SIGTERM)
    yield main
    signal.signal(signal.SIGTERM, before)


def test_cli_list(cli, capsys):
    assert cli(["scenario", "--list"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    for name in scenario_names():
        assert name in text
    assert "predicts lost == 0 and not_enough_replicas > 0" in text


@pytest.mark.parametrize("argv, message", [
    (["scenario", "nope"], "unknown scenario 'nope'; known: "),
    (["scenario", "unclean-election", "--variant", "clean,bogus"], "--variant bogus: scenario unclean-election has"),
    (["scenario", "unclean-election", "--repeat", "0"], "--repeat must be 1..100, got 0"),
    (["scenario"], "give a scenario name"),
])
def test_cli_bad_input(cli, capsys, tmp_path, argv, message):
    assert cli([*argv, "--store", str(tmp_path / "store")]) == 3
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert out.out == "" and len(lines) == 1 and lines[0].startswith("kchaos: error: ") and message in lines[0]
    if argv[1:] == ["nope"]:
        assert all(name in lines[0] for name in SHIPPED)
    assert not (tmp_path / "store").exists()
