"""Rates over scenario repetitions: the Wilson interval against published values, Rate and Spread, and how
judge() and the summary table show them (errored repetitions apart). No cluster: handmade run directories."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from kchaos.harness.cli.console import print_scenario
from kchaos.harness.scenarios.run import RESULT_FILE, judge
from kchaos.harness.scenarios.scenario import load_scenario
from kchaos.harness.scenarios.stats import Rate, Spread, spreads, wilson
from kchaos.reports.suite.junit import CellOutcome

# Newcombe, "Two-sided confidence intervals for the single proportion", Stat. Med. 17 (1998), Table I,
# method 3 (score interval without continuity correction), to 4 places.
NEWCOMBE = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)), ((0, 20), (0.0, 0.1611)),
            ((1, 29), (0.0061, 0.1718))]


@pytest.mark.parametrize("kn, expected", NEWCOMBE)
def test_wilson_matches_published_values(kn, expected):
    lo, hi = wilson(*kn)
    assert (round(lo, 4), round(hi, 4)) == expected


def test_wilson_edges():
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and round(lo, 4) == 0.7225  # all matched: the interval still says "not certain"
    for k, n in ((-1, 3), (4, 3)):
        with pytest.raises(ValueError, match="0 <= k <= n"):
            wilson(k, n)


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_contains_the_rate_and_is_symmetric(kn):
    k, n = kn
    lo, hi = wilson(k, n)
    assert 0 <= lo <= k / n <= hi <= 1 and hi - lo > 0
    mlo, mhi = wilson(n - k, n)
    assert (lo, hi) == pytest.approx((1 - mhi, 1 - mlo), abs=1e-12)


def test_rate_texts():
    r = Rate(9, 10, 1)
    assert r.fraction() == "9/10 +1 errored" and r.interval() == "90% (95% CI 60%–98%)"
    assert r.as_json() == {"matched": 9, "runs": 10, "errored": 1, "rate": 0.9, "ci_low": 0.5958,
                           "ci_high": 0.9821}
    none = Rate(0, 0, 2)
    assert none.rate is None and none.interval() == "-" and none.as_json()["rate"] is None


def test_spread():
    assert Spread.of([3, 1, 2, 10]) == Spread(1, 2.5, 10) and Spread.of([]) is None
    assert Spread.of([3, 1, 2]).text() == "2 (1–3)" and Spread.of([5, 5]).text() == "5"
    got = spreads([{"lost": 1, "acked": 9}, {"lost": 3}], ("lost", "acked", "duplicate"))
    assert got == {"lost": Spread(1, 2, 3), "acked": Spread(9, 9, 9)}


# judge() and the table on a handmade scenario directory

SCENARIO = """\
name: t
description: d
mechanism: m
prevents: p
base: {acks: all, min_insync: 1, partitions: 1, time_limit: 20}
schedule:
  - {at: 3, nemesis: kill-leader, op: {f: kill, target: leader, partition: 0}}
variants:
  - {name: lossy, predict: lost > 0}
  - {name: safe, predict: lost == 0 and not_enough_replicas > 0}
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))


def run_dir(sdir: Path, rel: str, lost: int, acked: int = 100) -> None:
    run = sdir / rel
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"valid": lost == 0, "counts": {"acked": acked, "lost": lost},
                                                  "loss": {"lost_in_promise": lost}}))
    (run / "history.jsonl").write_text("")
    (run / "test.json").write_text(json.dumps({"versions": {"kafka": "3.7.2"}}))


def scenario_dir(tmp_path: Path, lossy: list[int | None]) -> Path:
    """A scenario directory whose `lossy` variant has one repetition per entry (lost count, or None: errored)
    and whose `safe` variant has one repetition that lost 4 writes."""
    sdir = tmp_path / "scenarios" / "t" / "20261123T080000.000Z"
    lines = []
    for rep, lost in enumerate(lossy):
        rel = f"lossy/20261123T080{rep}00.000Z"
        if lost is None:
            lines.append({"cell": "lossy", "rep": rep, "seed": 10 + rep, "run": None, "status": "error",
                          "valid": None, "seconds": 12.5, "error": "RuntimeError: cluster did not start"})
            continue
        run_dir(sdir, rel, lost)
        lines.append({"cell": "lossy", "rep": rep, "seed": 10 + rep, "run": rel, "status": "done",
                      "valid": lost == 0, "seconds": 90.0 + rep, "error": None})
    run_dir(sdir, "safe/20261123T090000.000Z", 4)
    lines.append({"cell": "safe", "rep": 0, "seed": 5, "run": "safe/20261123T090000.000Z", "status": "done",
                  "valid": False, "seconds": 80.0, "error": None})
    (sdir / "progress.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return sdir


def load(tmp_path: Path):
    (tmp_path / "t.yaml").write_text(SCENARIO)
    return load_scenario(tmp_path / "t.yaml")


def test_judge_writes_rate_interval_spread_and_errors_apart(tmp_path):
    sc = load(tmp_path)
    sdir = scenario_dir(tmp_path, [5, 0, None, 9, 12])
    outcomes = [CellOutcome("lossy", "variant=lossy", None, ["rep 3: RuntimeError: cluster did not start"]),
                CellOutcome("safe", "variant=safe", None)]
    results = judge(sc, sdir, outcomes)
    by = {v["name"]: v for v in json.loads((sdir / RESULT_FILE).read_text())["variants"]}
    lossy = by["lossy"]
    # the errored repetition is in neither k nor n
    assert (lossy["matched"], lossy["checked"], lossy["errored"]) == (3, 4, 1)
    assert (lossy["rate"], lossy["ci_low"], lossy["ci_high"]) == (0.75, 0.3006, 0.9544)
    assert lossy["metrics"]["lost"] == {"min": 0, "median": 7.0, "max": 12}
    assert lossy["metrics"]["acked"] == {"min": 100, "median": 100, "max": 100}
    assert lossy["errored_runs"] == [{"rep": 2, "seed": 12, "run": None, "seconds": 12.5,
                                      "error": "RuntimeError: cluster did not start"}]
    assert lossy["runs"][0]["kafka"] == "3.7.2" and lossy["runs"][0]["seconds"] == 90.0
    assert set(by["safe"]["metrics"]) == {"lost", "acked", "duplicate", "not_enough_replicas"}
    assert [r.rate for r in results] == [Rate(3, 4, 1), Rate(0, 1, 0)]
    cases = {c.get("name"): c for c in ET.parse(sdir / "report.xml").getroot().iter("testcase")}
    out = cases["lossy"].find("system-out").text
    assert "matched 3 of 4 checked run(s), 75% (95% CI 30%–95%); 1 errored (not counted)" in out
    assert "lost: 7 (0–12)" in out and out.startswith("variant=lossy\nprediction: lost > 0\n")
    failure = cases["safe"].find("failure")
    assert "held in 0 of 1 run(s), 0% (95% CI 0%–79%)" in failure.get("message")
    judge(sc, sdir, outcomes)  # judging again does not stack the rate lines
    assert ET.parse(sdir / "report.xml").getroot().iter("testcase").__next__().find("system-out").text.count(
        "prediction:") == 1


def render(sc, sdir, results) -> str:
    console = Console(record=True, width=200, force_terminal=True)
    print_scenario(console, sc, sdir, results)
    return console.export_text()


def test_table_lists_few_runs_and_summarises_many(tmp_path):
    sc = load(tmp_path)
    few = scenario_dir(tmp_path / "few", [5, None])
    text = render(sc, few, judge(sc, few))
    assert "observed (per run)" in text and "lost=5 acked=100" in text
    assert "1/1 +1 errored" in text and "neither matched nor the rate" in text
    # lossy: one run, matched, one errored; safe: missed. Both lost writes under acks=all: the verdict is fail,
    # a word of its own beside the prediction's
    lossy = next(line for line in text.splitlines() if " lossy " in line)
    safe = next(line for line in text.splitlines() if " safe " in line)
    assert lossy.split()[:4] == ["fail", "1", "error", "lossy"] and " matches " in lossy
    assert safe.split()[:3] == ["fail", "safe", "misses"]
    state = json.loads((few / RESULT_FILE).read_text())["variants"]
    assert [(v["verdict"], v["prediction"]) for v in state] == [("fail", "matches"), ("fail", "misses")]
    assert [r["verdict"] for v in state for r in v["runs"]] == ["fail", "fail"]
    many = scenario_dir(tmp_path / "many", [5, 0, 7, 9, 12])
    text = render(sc, many, judge(sc, many))
    assert "median (min–max)" in text and "lost=7 (0–12)" in text and "4/5" in text
    assert "missed rep 2: lost=0" in text and "80% (95% CI 38%–96%)" in text
    assert "neither matched" not in text
