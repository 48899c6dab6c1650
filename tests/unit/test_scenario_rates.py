"""bench/scenario_rates.py: repetitions from handmade scenario directories (old and new scenario.json
layouts), grouped across invocations, the Markdown table, and the ledger that outlives the directories."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("scenario_rates", REPO / "bench" / "scenario_rates.py")
rates = sys.modules.setdefault("scenario_rates", importlib.util.module_from_spec(_spec))  # dataclasses need it there
_spec.loader.exec_module(rates)

OPTIONS = {"acks": "all", "min_insync": 2, "schedule": "/root/.cache/kchaos/schedules/11b3930dadbf0a61.json"}


def invocation(store: Path, stamp: str, variant: str, reps: list[dict], *, predict: str = "lost > 0",
               new_layout: bool = True, options: dict | None = None, scenario: str = "s") -> Path:
    """A scenario directory as one `kchaos scenario s --variant V` leaves it. Each rep is
    {lost, acked, seconds, kafka} for a checked run or {error, seconds} for an errored one. The old layout
    (before rates) has no seconds, kafka or errored_runs in scenario.json: progress.jsonl and test.json do."""
    sdir = store / "scenarios" / scenario / stamp
    sdir.mkdir(parents=True)
    runs, errors, errored, progress = [], [], [], []
    for i, r in enumerate(reps):
        run = f"{variant}/{stamp[:-5]}{i}.000Z" if "error" not in r else None
        progress.append({"cell": variant, "rep": i, "seed": 100 + i, "run": run,
                         "status": "error" if run is None else "done", "valid": None, "seconds": r["seconds"],
                         "error": r.get("error")})
        if run is None:
            errors.append(f"rep {i + 1}: {r['error']}")
            errored.append({"rep": i, "seed": 100 + i, "run": None, "error": r["error"], "seconds": r["seconds"]})
            continue
        (sdir / run).mkdir(parents=True)
        (sdir / run / "test.json").write_text(json.dumps({"versions": {"kafka": r.get("kafka", "3.7.2")}}))
        metrics = {"lost": r["lost"], "acked": r["acked"], "duplicate": 0}
        entry = {"rep": i, "run": run, "seed": 100 + i, "metrics": metrics, "matched": r["matched"]}
        if new_layout:
            entry.update(kafka=r.get("kafka", "3.7.2"), seconds=r["seconds"])
        runs.append(entry)
    variant_json = {"name": variant, "predict": predict, "matched": sum(x["matched"] for x in runs), "runs": runs,
                    "errors": errors}
    if new_layout:
        variant_json["errored_runs"] = errored
    (sdir / "scenario.json").write_text(json.dumps({"scenario": scenario, "variants": [variant_json]}))
    (sdir / "progress.jsonl").write_text("".join(json.dumps(p) + "\n" for p in progress))
    (sdir / "suite.json").write_text(json.dumps({"cells": [{"name": variant, "options": options or OPTIONS}],
                                                 "started": stamp}))
    return sdir


def checked(lost: int, matched: bool, seconds: float = 100.0, acked: int = 500, kafka: str = "3.7.2") -> dict:
    return {"lost": lost, "acked": acked, "matched": matched, "seconds": seconds, "kafka": kafka}


@pytest.fixture
def store(tmp_path) -> Path:
    """Four invocations of scenario s, one repetition each, as a campaign leaves them, plus one unfinished."""
    s = tmp_path / "results"
    invocation(s, "20261123T083045.406Z", "v37", [checked(199, True, 97.3)], new_layout=False)
    invocation(s, "20261123T090000.000Z", "v37", [checked(0, False, 95.0)])
    invocation(s, "20261124T010000.000Z", "v37", [{"error": "RuntimeError: no leader", "seconds": 30.0}],
               new_layout=False)
    invocation(s, "20261123T083300.000Z", "elr", [checked(0, True, 110.0, kafka="4.1.0")], predict="lost == 0",
               options={**OPTIONS, "kafka_version": "4.1.0"})
    (s / "scenarios" / "s" / "20261124T020000.000Z").mkdir()  # still running: no scenario.json yet
    (s / "scenarios" / "s" / "latest").symlink_to("20261123T090000.000Z")
    return s


def test_reads_both_layouts_and_errors_apart(store):
    dirs = rates.find_scenario_dirs([store])
    assert len(dirs) == 4  # the latest link counts once, the unfinished directory not at all
    reps = {r.id: r for d in dirs for r in rates.from_scenario_dir(d)}
    old = reps["s/20261123T083045.406Z/v37/20261123T0830450.000Z"]
    # the old layout's wall seconds and Kafka version come from progress.jsonl and test.json
    assert (old.seconds, old.kafka, old.matched, old.seed, old.date) == (97.3, "3.7.2", True, 100,
                                                                         "2026-11-23T08:30:45Z")
    err = reps["s/20261124T010000.000Z/v37/rep0"]
    assert (err.matched, err.error, err.seconds, err.seed, err.metrics) == (None, "RuntimeError: no leader",
                                                                            30.0, 100, {})
    assert len({r.config for r in reps.values() if r.variant == "v37"}) == 1
    assert reps["s/20261123T083300.000Z/elr/20261123T0833000.000Z"].config != old.config


def test_groups_across_invocations_and_prints_the_table(store):
    reps = [r for d in rates.find_scenario_dirs([store]) for r in rates.from_scenario_dir(d)]
    groups = rates.group(reps, {"s": ["v37", "elr"]})
    assert [k[1] for k in groups] == ["v37", "elr"]  # the file's order, not the dates'
    assert [len(g) for g in groups.values()] == [3, 1]
    v37 = rates.rate_of(groups[next(iter(groups))])
    assert (v37.matched, v37.runs, v37.errored) == (1, 2, 1)
    lines = rates.table(groups).splitlines()
    assert lines[0].startswith("| scenario · variant | prediction | Kafka | matched | rate (95% CI) |")
    assert lines[2] == ("| s · v37 | `lost > 0` | 3.7.2 | 1/2 +1 errored | 50% (95% CI 9%–91%) | 99.5 (0–199) "
                        "| 500 | 2026-11-23 – 2026-11-24 | 3.7 min |")
    assert lines[3] == ("| s · elr | `lost == 0` | 4.1.0 | 1/1 | 100% (95% CI 21%–100%) | 0 | 500 | 2026-11-23 "
                        "| 1.8 min |")
    assert lines[-1].startswith("4 repetitions of 2 variants, 5.5 min of runs in all.")


def test_a_changed_prediction_or_configuration_is_not_pooled(tmp_path):
    s = tmp_path / "results"
    invocation(s, "20261123T080000.000Z", "v", [checked(5, True)])
    invocation(s, "20261123T090000.000Z", "v", [checked(5, True)], predict="lost > 10")
    invocation(s, "20261123T100000.000Z", "v", [checked(5, True)], options={**OPTIONS, "min_insync": 1})
    reps = [r for d in rates.find_scenario_dirs([s]) for r in rates.from_scenario_dir(d)]
    groups = rates.group(reps)
    assert len(groups) == 3
    rows = rates.table(groups).splitlines()[2:5]
    assert sum("(config " in row for row in rows) == 3 and sum("`lost > 10`" in row for row in rows) == 1


def test_ledger_records_once_and_outlives_the_directories(store, tmp_path, capsys):
    ledger = tmp_path / "data" / "ledger.jsonl"
    assert rates.main([str(store), "--ledger", str(ledger), "--record"]) == 0
    first = capsys.readouterr()
    assert "recorded 4 new repetition(s)" in first.err
    lines = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert len(lines) == 4 and [x["date"] for x in lines] == sorted(x["date"] for x in lines)
    assert set(lines[0]) == {"id", "date", "scenario", "variant", "predict", "seed", "kafka", "matched", "seconds",
                             "metrics", "config", "error"}
    assert rates.main([str(store), "--ledger", str(ledger), "--record"]) == 0  # nothing new the second time
    assert "recorded 0 new" in capsys.readouterr().err and len(ledger.read_text().splitlines()) == 4
    # a later session: the run directories are gone, one new invocation happened
    shutil.rmtree(store)
    invocation(store, "20261125T080000.000Z", "v37", [checked(40, True, 99.0)])
    assert rates.main([str(store), "--ledger", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "| s · v37 | `lost > 0` | 3.7.2 | 2/3 +1 errored | 67% (95% CI 21%–94%) | 40 (0–199) |" in out
    assert "2026-11-23 – 2026-11-25" in out and len(ledger.read_text().splitlines()) == 4  # not recorded
    assert rates.main([str(store), "--no-ledger"]) == 0
    assert "| s · v37 | `lost > 0` | 3.7.2 | 1/1 |" in capsys.readouterr().out


@pytest.mark.parametrize("make, args, message", [
    (None, ["{tmp}/nope"], "nope: no such directory"),
    ("bad-ledger", ["{tmp}", "--ledger", "{tmp}/l.jsonl"], "l.jsonl:2: not a ledger line"),
    (None, ["{tmp}", "--record", "--no-ledger"], "--record appends to the ledger"),
    ("bad-scenario", ["{tmp}/scenarios/s/20261123T080000.000Z"], "no readable scenario.json"),
])
def test_bad_input_is_one_line_and_exit_3(tmp_path, capsys, make, args, message):
    if make == "bad-ledger":
        (tmp_path / "l.jsonl").write_text('{"id": "x"}\n'.replace('{"id": "x"}', json.dumps(
            {"id": "a", "date": "d", "scenario": "s", "variant": "v", "predict": "lost > 0", "seed": 1,
             "kafka": None, "matched": True, "seconds": 1.0})) + '{"id": "b", "colour": 1}\n')
    if make == "bad-scenario":
        sdir = tmp_path / "scenarios" / "s" / "20261123T080000.000Z"
        sdir.mkdir(parents=True)
        (sdir / "scenario.json").write_text("{torn")
    assert rates.main([a.format(tmp=tmp_path) for a in args]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("scenario_rates: error: ") and message in err[0]


def test_the_table_shows_the_metrics_its_prediction_names():
    assert rates.predicted_names("G1a + lost_write + torn_transaction == 0 and valid == 1") == [
        "G1a", "lost_write", "torn_transaction", "valid"]
    reps = [rates.Rep(id=str(i), date="2026-11-26T10:00:00Z", scenario="t", variant="v", predict="G1a + torn > 0",
                      seed=i, kafka="3.7.2", matched=torn > 0, seconds=60.0, config="c",
                      metrics={"G1a": 0, "torn": torn, "acked": 0}) for i, torn in enumerate((0, 1, 2))]
    row = rates.table(rates.group(reps)).splitlines()[2]
    assert "| G1a 0 · torn 1 (0–2) |" in row
