"""The run's fault catalogue (core/faults.py): written and read back, written by the command line beside a
history that has none, and used by the timeline, observe(), the plots and the explainer in place of the nemesis
registry."""
from __future__ import annotations

import json

import pytest

from kchaos import nemesis
from kchaos.checkers.queue.timeline import fault_windows
from kchaos.checkers.verdict.observed import ObserveError, observe
from kchaos.core.config import NemesisConfig, TestConfig
from kchaos.core.faults import (
    FAULTS_FILE,
    FaultCatalogue,
    FaultKind,
    FaultsError,
    read_faults,
    write_faults,
)
from kchaos.evidence.explain.facts import _nemesis_line
from kchaos.nemesis.schedule import make_schedule, specs_in
from kchaos.reports.run import plots

S = 1_000_000_000
# A nemesis the registry does not have: only a catalogue can say what its ops do.
FLOOD = FaultKind("flood:leader", "start-flood", "stop-flood", {"start-flood": "#123456", "stop-flood": "#654321"})


def hist(*lines):
    """Nemesis lines from (seconds, type, f, nemesis[, detail]); the i-th line has epoch i and index 100 + 10 i."""
    return [{"index": 100 + 10 * i, "time": int(t * S), "process": "nemesis", "type": typ, "f": f, "nemesis": nem,
             "epoch": i, "detail": rest[0] if rest else {}}
            for i, (t, typ, f, nem, *rest) in enumerate(lines)]


def test_catalogue_round_trip(tmp_path):
    kinds = [nemesis.fault_kind("kill:majority"), nemesis.fault_kind("rolling-restart"),
             nemesis.fault_kind("power-fail:leader:0"), FLOOD]
    path = write_faults(tmp_path, kinds)
    assert path == tmp_path / FAULTS_FILE
    lines = path.read_text().splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == len(kinds) + 2  # one kind a line
    back = read_faults(tmp_path, ())
    assert back == FaultCatalogue(tuple(kinds))
    kill = back.get("kill:majority")
    assert (kill.breaks, kill.mends, kill.color) == ("kill", "start", nemesis.PACKAGES["kill"].colors["kill"])
    assert back.get("rolling-restart").mends is None  # one-shot
    assert back.get("kill") is None and back.get(None) is None  # specs are looked up exactly
    assert (back.role("kill:majority", "kill"), back.role("kill:majority", "start"),
            back.role("kill:majority", "heal"), back.role("nope", "kill")) == ("break", "mend", None, None)
    assert back.break_ops == {"kill", "roll", "power-fail", "start-flood"}


def test_kind_is_frozen_and_its_colours_cannot_change():
    colors = {"kill": "#000"}
    k = FaultKind("kill", "kill", "start", colors)
    colors["kill"] = "#fff"
    assert k.color == "#000"
    with pytest.raises(TypeError):
        k.colors["kill"] = "#fff"  # type: ignore[index]
    with pytest.raises(ValueError, match="described twice"):
        FaultCatalogue((k, k))


def test_no_file_describes_only_a_history_without_nemesis_and_a_bad_file_is_a_one_line_error(tmp_path):
    assert read_faults(tmp_path, ()) == FaultCatalogue()
    assert read_faults(tmp_path, [{"process": 0, "f": "send"}]) == FaultCatalogue()
    with pytest.raises(FaultsError, match="missing, so it is unknown which ops of flood:leader, kill break") as e:
        read_faults(tmp_path, hist((1, "invoke", "kill", "kill"), (2, "invoke", "start-flood", "flood:leader")))
    assert str(tmp_path / FAULTS_FILE) in str(e.value) and "\n" not in str(e.value)
    for text, problem in (("{", "unreadable"), ('{"kill": 1}', "JSON list"),
                          ('[{"nemesis": "kill", "mends": "start"}]', "entry 0: 'breaks'"),
                          ('[{"nemesis": "kill", "breaks": "kill", "mends": 3}]', "'mends'"),
                          ('[{"nemesis": "kill", "breaks": "kill", "colors": {"kill": 1}}]', "'colors'")):
        (tmp_path / FAULTS_FILE).write_text(text)
        with pytest.raises(FaultsError, match=problem) as e:
            read_faults(tmp_path, ())
        assert str(tmp_path / FAULTS_FILE) in str(e.value) and "\n" not in str(e.value)


def test_the_runners_catalogue_covers_every_spec_of_a_mix_schedule(tmp_path):
    """What runner.run_test writes: a kind for each spec specs_in finds, the mix's concrete specs included."""
    n = NemesisConfig(names=("mix",), interval=10, jitter=0.3, restart_delay=5)
    cfg = TestConfig(seed=3, time_limit=600, nemesis=n)
    schedule = make_schedule(cfg)
    write_faults(tmp_path, [nemesis.fault_kind(s) for s in specs_in(cfg.nemesis.names, schedule)])
    cat = read_faults(tmp_path, ())
    assert len({op.nemesis for op in schedule}) > 5
    for op in schedule:
        assert cat.role(op.nemesis, op.op["f"]) is not None, op


def test_windows_follow_the_catalogue(tmp_path):
    ev = hist((1, "invoke", "kill", "kill:majority"), (1.2, "ok", "kill", "kill:majority", {"targets": ["n1"]}),
              (2, "invoke", "start-flood", "flood:leader"), (2.1, "ok", "start-flood", "flood:leader"),
              (3, "invoke", "start", "kill:majority"), (3.1, "ok", "start", "kill:majority"),
              (4, "invoke", "stop-flood", "flood:leader"), (4.1, "ok", "stop-flood", "flood:leader"))
    write_faults(tmp_path, [nemesis.fault_kind("kill:majority")])
    cat = read_faults(tmp_path, ev)
    # A catalogue without flood: flood's ops are each a window of their own span; kill is closed by its start.
    assert [(w["nemesis"], w["f"], w["start_s"], w["end_s"]) for w in fault_windows(ev, cat)] == [
        ("kill:majority", "kill", 1.0, 3.1), ("flood:leader", "start-flood", 2.0, 2.1),
        ("flood:leader", "stop-flood", 4.0, 4.1)]
    write_faults(tmp_path, [nemesis.fault_kind("kill:majority"), FLOOD])
    cat = read_faults(tmp_path, ev)
    assert cat.get("flood:leader") == FLOOD
    # With it: flood's stop closes its start, as the catalogue says.
    assert [(w["nemesis"], w["f"], w["start_s"], w["end_s"]) for w in fault_windows(ev, cat)] == [
        ("kill:majority", "kill", 1.0, 3.1), ("flood:leader", "start-flood", 2.0, 4.1)]


def test_runs_window_as_the_registry_says():
    """For a run of the registry's own nemeses, with the catalogue the runner writes: a mended fault closes at its
    mend, a one-shot fault spans its own op."""
    ev = hist((1, "invoke", "pause", "pause:majority"), (1.1, "ok", "pause", "pause:majority"),
              (2, "invoke", "roll", "rolling-restart"), (2.5, "ok", "roll", "rolling-restart"),
              (3, "invoke", "resume", "pause:majority"), (3.1, "ok", "resume", "pause:majority"),
              (4, "invoke", "elect-unclean", "elect-unclean"), (4.2, "info", "elect-unclean", "elect-unclean"))
    cat = FaultCatalogue(tuple(nemesis.fault_kind(s) for s in ("pause:majority", "rolling-restart", "elect-unclean")))
    windows = fault_windows(ev, cat)
    assert [(w["f"], w["end_s"]) for w in windows] == [("pause", 3.1), ("roll", 2.5), ("elect-unclean", 4.2)]


def test_plot_colours_come_from_the_catalogue():
    cat = FaultCatalogue((FLOOD, nemesis.fault_kind("kill")))
    assert plots.nemesis_color("flood:leader", cat) == "#123456"
    assert plots.nemesis_color("flood:leader") == plots.nemesis_color("flood:other")  # keyed by package name
    assert plots.nemesis_color("flood:leader") != "#123456"
    assert plots.nemesis_color("kill", cat) == nemesis.PACKAGES["kill"].colors["kill"]
    assert plots.nemesis_color("kill:majority", cat) == plots.nemesis_color("kill:x")  # not in it: keyed by name
    windows = [{"nemesis": "flood:leader", "f": "start-flood", "start_s": 1.0, "end_s": 2.0},
               {"nemesis": "kill", "f": "kill", "start_s": 3.0, "end_s": 4.0}]
    assert [s.color for s in plots.fault_spans(windows, catalogue=cat)] == ["#123456", "#e15759"]
    assert [s.color for s in plots.fault_spans(windows)] == [plots.nemesis_color("flood:other"),
                                                             plots.nemesis_color("kill:x")]


def test_observe_counts_the_catalogues_break_ops(tmp_path):
    lines = [{"index": i, "time": (i + 1) * S, "process": "nemesis", "type": t, "f": f, "nemesis": "flood:leader"}
             for i, (t, f) in enumerate((("invoke", "start-flood"), ("ok", "start-flood"),
                                         ("invoke", "stop-flood"), ("ok", "stop-flood")))]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "results.json").write_text(json.dumps({"valid": True, "counts": {}}))
    with pytest.raises(ObserveError, match="missing"):
        observe(tmp_path)  # no faults.json: which of flood's ops break is unknown
    write_faults(tmp_path, [])
    assert observe(tmp_path)["faults"] == 0  # a nemesis the catalogue does not describe breaks nothing
    write_faults(tmp_path, [FLOOD])
    assert observe(tmp_path)["faults"] == 1


def test_explainer_roles_come_from_the_catalogue():
    rec = {"index": 5, "time": 2 * S, "process": "nemesis", "type": "ok", "f": "stop-flood",
           "nemesis": "flood:leader", "nodes": ["n1"]}
    assert _nemesis_line(rec, FaultCatalogue())["role"] == "fault"  # a nemesis the catalogue does not describe
    assert _nemesis_line(rec, FaultCatalogue((FLOOD,)))["role"] == "mend"
    assert _nemesis_line({**rec, "f": "start-flood"}, FaultCatalogue((FLOOD,)))["role"] == "fault"
    assert _nemesis_line({**rec, "f": "start", "nemesis": "kill"}, FaultCatalogue((FLOOD,)))["role"] == "fault"
    kill = FaultCatalogue((nemesis.fault_kind("kill"),))
    assert _nemesis_line({**rec, "f": "start", "nemesis": "kill"}, kill)["role"] == "mend"


def test_a_malformed_catalogue_is_bad_input_to_check_and_observe(tmp_path):
    from kchaos.checkers import CheckInputError, check_path

    (tmp_path / "history.jsonl").write_text(json.dumps({"index": 0, "time": 1, "process": 0, "type": "invoke",
                                                        "f": "send", "value": 1, "partition": 0}) + "\n")
    (tmp_path / "results.json").write_text(json.dumps({"valid": True, "counts": {}}))
    (tmp_path / FAULTS_FILE).write_text("[{}]")
    with pytest.raises(CheckInputError, match="faults.json: entry 0"):
        check_path(tmp_path)  # before any checker runs: nothing is written
    assert not (tmp_path / "history.parquet").exists()
    with pytest.raises(ObserveError, match="faults.json: entry 0"):
        observe(tmp_path)


def test_a_missing_catalogue_of_a_history_with_nemesis_lines_is_bad_input_to_check(tmp_path):
    from kchaos.checkers import CheckInputError, check_path

    lines = [{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "send", "value": 1, "partition": 0},
             *hist((1, "invoke", "kill", "kill:majority"))]
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(CheckInputError, match="faults.json: missing, so it is unknown which ops of kill:majority"):
        check_path(tmp_path)  # before any checker runs: nothing is written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl"]


def test_the_command_line_describes_a_history_without_faults_json_by_the_registry(tmp_path, capsys):
    """Before it reads a history that has no faults.json, the command line writes one beside it: the registry's
    word on each spec the history names, less the specs it does not know. Bad input leaves nothing behind."""
    from kchaos.harness.cli.main import main

    ev = hist((1, "invoke", "kill", "kill:majority"), (1.2, "ok", "kill", "kill:majority"),
              (2, "invoke", "start-flood", "flood:leader"), (2.1, "ok", "start-flood", "flood:leader"),
              (3, "invoke", "start", "kill:majority"), (3.1, "ok", "start", "kill:majority"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in ev))
    (run / "test.json").write_text("{")
    assert main(["explain", str(run)]) == 3  # test.json unreadable
    assert "Expecting property name" in capsys.readouterr().err
    assert not (run / FAULTS_FILE).exists()
    (run / "test.json").write_text("{}")
    assert main(["report", str(run)]) == 0
    assert read_faults(run, ev) == FaultCatalogue((nemesis.fault_kind("kill:majority"),))
    write_faults(run, [FLOOD])
    assert main(["report", str(tmp_path)]) == 0
    assert read_faults(run, ev) == FaultCatalogue((FLOOD,))  # one it has is never rewritten
