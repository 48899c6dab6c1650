"""Scenarios across Kafka lines: the files' `versions` and `predict_since`, Scenario.on_versions and select, and
`kchaos scenario --versions`."""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest
from scenario_rates import Rep, _config

from kchaos.core.kafka_versions import LINES, resolve_version
from kchaos.harness.cli.main import main
from kchaos.harness.scenarios.scenario import ScenarioError, find_scenario, load_scenario, scenario_names

ALL_LINES = [x.line for x in LINES]


def rep(i: int, variant: str, kafka: str, matched: bool, predict: str = "lost == 0", config: str = "c",
         scenario: str = "s") -> Rep:
    """A ledger repetition of `variant` on `kafka`, the i-th in time."""
    return Rep(f"{scenario}/x/{variant}/{i}", f"2026-11-26T1{i}:00:00Z", scenario, variant, predict, 7000 + i, kafka,
               matched, 60.0, {"lost": 0}, config)


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_every_shipped_scenario_lists_lines_it_can_run_on_each():
    for name in scenario_names():
        sc = load_scenario(find_scenario(name))
        assert sc.versions and set(sc.versions) <= set(ALL_LINES), name
        crossed, only = sc.select((), ("listed",))  # every cell preflighted on its line
        assert only == () and crossed.variants
        for v in crossed.variants:
            assert v.base in {x.name for x in sc.variants}
            line = next(x.line for x in LINES if v.version in x.patches)
            assert line in sc.versions and (v.name == v.base or v.name == f"{v.base}-kafka-{line}"), (name, v.name)


def test_a_variant_on_its_own_line_is_itself_and_on_another_is_named_and_set_for_that_line():
    sc = load_scenario(find_scenario("unclean-election"))
    crossed = sc.on_versions(("3.7", "4.4"))
    assert [v.name for v in crossed.variants] == ["operator-elects", "operator-elects-kafka-4.4", "config-only",
                                                  "config-only-kafka-4.4", "clean", "clean-kafka-4.4"]
    own, other = crossed.variant_of_name("clean"), crossed.variant_of_name("clean-kafka-4.4")
    # the same cell options as without --versions: its repetitions count with the ledger's
    assert own.cell.options == sc.variant_of_name("clean").cell.options
    assert dict(other.cell.options) == {**dict(own.cell.options), "kafka_version": resolve_version("4.4")}
    assert dict(other.cell.params)["variant"] == "clean-kafka-4.4" and other.version == "4.4.0"
    assert [c.index for c in crossed.suite().cells] == list(range(6))


def test_a_share_variant_on_41_turns_share_groups_preview_on_and_on_42_needs_nothing():
    sc = load_scenario(find_scenario("share-lock-storm"))
    crossed = sc.on_versions(("4.1", "4.2"))
    on_41, on_42 = (dict(v.cell.options) for v in crossed.variants)
    assert on_41["kafka_feature"] == ["share.version=1"] and on_41["kafka_version"] == resolve_version("4.1")
    assert "kafka_feature" not in on_42
    assert "kafka_feature" not in dict(load_scenario(find_scenario("unclean-election")).on_versions(
        ("4.1",)).variants[0].cell.options)  # a queue runs on 4.1 as it comes
    own = sc.variants[0]
    for named in ("share.version=1", ["share.version=1"]):  # named already, as a string or a list: not twice
        v = replace(own, cell=replace(own.cell, options=own.cell.options + (("kafka_feature", named),)))
        assert dict(v.on_line("4.1", 0).cell.options)["kafka_feature"] == ["share.version=1"]


def test_predict_since_gives_the_prediction_from_a_line_on():
    sc = load_scenario(find_scenario("unclean-election"))
    crossed = sc.on_versions(("3.7", "3.8", "3.9", "4.4"))
    config_only = [crossed.variant_of_name(n).predict.text
                   for n in ("config-only", "config-only-kafka-3.8", "config-only-kafka-3.9", "config-only-kafka-4.4")]
    assert config_only[:2] == ["lost == 0 and recovery_s > 20"] * 2
    assert config_only[2:] == ["lost > 0 and lost_in_promise == 0"] * 2
    assert {crossed.variant_of_name(f"clean-kafka-{x}").predict.text for x in ("3.9", "4.4")} == {
        "lost == 0 and recovery_s > 20"}


def test_a_variant_that_sets_its_kafka_runs_only_there():
    sc = load_scenario(find_scenario("txn-delayed-endtxn"))
    assert [v.name for v in sc.on_versions(("4.1",)).variants] == ["kafka-4.1-librdkafka", "kafka-4.1-java-kip890"]
    assert [v.name for v in sc.on_versions(("3.7", "4.1")).variants] == [v.name for v in sc.variants]
    with pytest.raises(ScenarioError, match="no variant runs on 4.4"):
        sc.on_versions(("4.4",))


def test_select_names_a_variant_on_a_line_or_every_line_of_it():
    sc = load_scenario(find_scenario("unclean-election"))
    crossed, only = sc.select(("config-only-kafka-3.9",))
    assert only == ("config-only-kafka-3.9",) and "clean-kafka-3.9" in {v.name for v in crossed.variants}
    crossed, only = sc.select(("clean",), ("3.7", "4.0"))
    assert only == ("clean", "clean-kafka-4.0")
    assert [c.name for c in crossed.suite(1, only).cells] == ["clean", "clean-kafka-4.0"]
    crossed, only = sc.select(("clean",), ("listed",))
    assert only == ("clean", *(f"clean-kafka-{x}" for x in sc.versions[1:]))
    with pytest.raises(ScenarioError,
                       match=r"--variant nope-kafka-4\.0 \(did you mean .*\): scenario unclean-election has "):
        sc.select(("nope-kafka-4.0",))
    with pytest.raises(ScenarioError, match=r"--versions 5\.0: kchaos cannot run it; it runs 3\.7 \(3\.7\.2\)"):
        sc.select((), ("5.0",))


def test_a_variant_that_cannot_run_on_a_line_is_named_with_the_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("description: d\nmechanism: m\nprevents: p\nversions: [\"4.1\", \"3.7\"]\n"
                    "base: {workload: queue, consumer_mode: subscribe, group_protocol: consumer, kafka_version: 4.1.0,"
                    " time_limit: 20, nemesis: kill-leader}\npredict: lost == 0\n")
    sc = load_scenario(path)
    assert sc.versions == ("4.1", "3.7")
    with pytest.raises(ScenarioError, match=r"variant s on Kafka 3\.7: --group-protocol consumer \(KIP-848\) needs"):
        sc.on_versions(sc.versions)


@pytest.mark.parametrize("extra, where, message", [
    ("versions: [\"5.0\"]\n", "6: versions[0]", "5.0: kchaos cannot run it"),
    ("versions: []\n", "6: versions", "must be a non-empty list of Kafka lines"),
    ("variants:\n  - name: a\n    predict_since: {\"3.10\": lost > 0}\n", "8: variants[0].predict_since.3.10",
     "'3.10' is not a Kafka line kchaos runs"),
    ("variants:\n  - name: a\n    predict_since: {\"4.0\": lost >}\n", "8: variants[0].predict_since.4.0",
     "not an expression"),
])
def test_bad_versions_and_predict_since_name_file_line_and_key(tmp_path, extra, where, message):
    path = tmp_path / "s.yaml"
    path.write_text("description: d\nmechanism: m\nprevents: p\nbase: {time_limit: 20, nemesis: kill-leader}\n"
                    "predict: lost == 0\n" + extra)
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert str(e.value).startswith("s.yaml:" + where + ": ") and message in str(e.value), str(e.value)


def test_yaml_numbers_are_lines_too(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("description: d\nmechanism: m\nprevents: p\nbase: {time_limit: 20, nemesis: kill-leader}\n"
                    "predict: lost == 0\nversions: [3.7, 4.4]\n")
    assert load_scenario(path).versions == ("3.7", "4.4")


def test_the_default_release_set_or_not_is_the_same_experiment_in_the_ledger():
    assert _config({"acks": "all"}) == _config({"acks": "all", "kafka_version": resolve_version("3.7")})
    assert _config({"acks": "all"}) != _config({"acks": "all", "kafka_version": "4.4.0"})


def test_cli_versions_dry_run_and_bad_versions(capsys, tmp_path):
    store = str(tmp_path / "store")
    assert main(["scenario", "unclean-election", "--versions", "3.7,4.4", "--variant", "clean", "--dry-run",
                 "--store", store]) == 0
    out = capsys.readouterr().out
    assert "clean-kafka-4.4" in out and "config-only" not in out
    assert main(["scenario", "unclean-election", "--versions", "9.9", "--store", store]) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--versions 9.9: kchaos cannot run it" in err[0]
    assert not Path(store).exists()


def test_the_versions_table_puts_a_variant_on_each_line_in_its_row():
    from scenario_versions import matrix, table

    ue = partial(rep, scenario="unclean-election")
    reps = [ue(0, "config-only", "3.7.2", True, config="old"), ue(1, "config-only", "3.7.2", False),
            ue(2, "config-only", "3.7.2", True), ue(3, "config-only-kafka-3.9", "3.9.2", True, "lost > 0", "d"),
            ue(4, "clean-kafka-4.4", "4.4.0", True, config="e"), ue(5, "retired", "3.7.2", True)]
    m = matrix(reps, {"unclean-election": ["config-only", "clean"]})
    assert list(m) == [("unclean-election", "config-only"), ("unclean-election", "clean")]
    assert {line: len(r) for line, r in m[("unclean-election", "config-only")].items()} == {"3.7": 2, "3.9": 1}
    text = table(m).splitlines()
    assert text[0] == "| scenario · variant | prediction | 3.7 | 3.9 | 4.4 |"
    assert text[2] == "| unclean-election · config-only | `lost == 0` | 1/2 | 1/1 (`lost > 0`) |  |"
    assert text[3] == "| unclean-election · clean | `lost == 0` |  |  | 1/1 |"


def test_against_the_oldest_line_names_what_changed_and_counts_what_held_alike():
    from scenario_versions import against, matrix

    reps = [rep(0, "a", "3.7.2", True), rep(1, "a-kafka-4.4", "4.4.0", False), rep(2, "a-kafka-4.4", "4.4.0", True),
            rep(3, "b", "3.7.2", True), rep(4, "b-kafka-4.4", "4.4.0", True, "lost > 0"),
            rep(5, "c", "3.7.2", True), rep(6, "c-kafka-4.0", "4.0.2", True), rep(7, "d-kafka-4.4", "4.4.0", False)]
    text = against(matrix(reps, {"s": ["a", "b", "c", "d"]})).splitlines()
    assert text == ["Against 3.7:",
                    "- s · a, 4.4: **held on 3.7, missed on 4.4**; `lost == 0` held 1/1 on 3.7 and 1/2 on 4.4",
                    "- s · b, 4.4: predicted to differ; `lost > 0` held 1/1 (3.7: `lost == 0` held 1/1)",
                    "- held alike: 1 on 4.0"]
    assert against(matrix(reps[5:7], {"s": ["c"]})).splitlines()[1] == "- no row changed"


def test_per_line_counts_cells_and_names_the_ones_with_a_miss():
    from scenario_versions import matrix, per_line

    reps = [rep(0, "a", "3.7.2", True), rep(1, "a", "3.7.2", False), rep(2, "b", "3.7.2", True),
            rep(3, "a-kafka-4.4", "4.4.0", True)]
    assert per_line(matrix(reps, {"s": ["a", "b"]})).splitlines()[2:] == [
        "| 3.7 | 2 | 3 | 2/3 | s · a (1/2) |", "| 4.4 | 1 | 1 | 1/1 | - |"]
