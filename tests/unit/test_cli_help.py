"""Help and commands a user expects: described subcommands, every option's help and default, run's
option groups, --version, the exit codes in --help, --dry-run that starts and creates nothing, "did you mean",
errors at the right line, and compare refusing a single run."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
from importlib import metadata
from pathlib import Path

import pytest

from kchaos.core.exit_codes import MEANINGS
from kchaos.harness.cli.main import build_parser, main
from kchaos.harness.options import COMMON, GROUPS, D
from kchaos.harness.scenarios.scenario import find_scenario, load_scenario
from kchaos.harness.suites.suite import SuiteError, load_suite

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _keep_sigterm():
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Any attempt to run a suite or scenario, or to reach Docker, fails the test."""
    def refuse(*a, **k):
        raise AssertionError("something was started")
    monkeypatch.setattr("kchaos.harness.suites.run.run_suite", refuse)
    monkeypatch.setattr("kchaos.harness.scenarios.run.run_scenario", refuse)
    monkeypatch.setattr("kchaos.clusters.engine.docker_client", refuse)


def _help(argv: list[str], capsys, flag: str = "--help") -> str:
    assert main([*argv, flag]) == 0
    return capsys.readouterr().out


def _all(name: str) -> str:
    """The flag that shows every option of command `name`."""
    return "--help-all" if getattr(build_parser().commands[name], "brief", None) else "--help"


def test_every_command_has_a_line_and_a_paragraph(capsys):
    top = _help([], capsys)
    parser = build_parser()
    for name, sub in parser.commands.items():
        line = next(x for x in top.splitlines() if x.strip().startswith(name + " "))
        assert len(line.split(maxsplit=1)) == 2, line  # the one-line description beside the name
        assert sub.description and len(sub.description) > 80, name
        assert " ".join(sub.description.split()[:6]) in " ".join(_help([name], capsys).split())


def test_every_option_has_help_and_shows_its_default(capsys):
    for name, sub in build_parser().commands.items():
        text = " ".join(_help([name], capsys, _all(name)).split())
        for action in sub._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction) or \
                    action.dest == argparse.SUPPRESS:  # --help, --help-all, --version
                continue
            assert action.help, f"{name} {action.option_strings}"
            shown = sub._get_formatter()._expand_help(action)  # what --help prints beside the option
            assert "default" in shown and " ".join(shown.split()) in text, f"{name} {action.option_strings}: {shown}"
        assert "(default: None)" not in text and "default: %" not in text, name


def test_run_help_shows_the_common_options_and_points_to_the_rest(capsys):
    short, full = _help(["run"], capsys), _help(["run"], capsys, "--help-all")
    assert len(short.splitlines()) <= 45 < len(full.splitlines())
    assert short.splitlines()[0] == "usage: kchaos run [OPTIONS]"
    shown = {o for line in short.splitlines() if (m := re.match(r"  (-\w, )?(--[\w-]+)(?:[ ,]|$)(?:.*?(--no-[\w-]+))?",
                                                                 line)) for o in m.groups()[1:] if o}
    assert shown == COMMON | {"--help", "--help-all", "--no-unclean"}
    hidden = [a for a in build_parser().commands["run"]._actions if not set(a.option_strings) & shown]
    assert short.rstrip().endswith(f"\n{len(hidden)} more options, in the same groups: kchaos run --help-all")


def test_run_options_are_grouped(capsys):
    text = _help(["run"], capsys, "--help-all")
    heads = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert heads == ["options", *GROUPS]
    section = text[text.index("\nproducer:"):text.index("\nconsumer:")]
    assert "--acks" in section and "--idempotence" in section and "--nodes" not in section
    body = text[text.index("\noptions:"):]
    assert body.index("--min-insync") > body.index("\ntopic:") and body.index("--quiet") > body.index("\noutput:")


def test_help_in_a_pipe_is_not_wrapped_and_lists_the_exit_codes(capsys):
    text = _help([], capsys)
    tail = text[text.index("exit codes:"):].splitlines()[1:]
    assert [int(line.split()[0]) for line in tail] == [code for code, _ in MEANINGS]
    assert all(meaning in text for _, meaning in MEANINGS)  # each on its one line, however long
    run = _help(["run"], capsys)
    assert any(len(line) > 150 for line in run.splitlines())
    assert "\x1b[" not in text + run


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == \
        f"kchaos {metadata.version('kchaos')} (Kafka {D.cluster.kafka_version} by default)\n"


def test_suite_dry_run_prints_the_cells_and_creates_nothing(tmp_path, monkeypatch, capsys, nothing_runs):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    demo = REPO / "suites" / "demo.yaml"
    assert main(["suite", str(demo), "--dry-run", "--store", str(store)]) == 0
    out, err = capsys.readouterr()
    suite = load_suite(demo)
    lines = out.splitlines()
    assert lines[0].startswith("suite demo: 3 cells × 1 repetition = 3 runs, seed 42, 3 min of workload")
    for cell in suite.cells:
        assert any(line.split()[:1] == [cell.name] and line.endswith(f"seed {suite.run_seed(42, cell, 0)}")
                   for line in lines), out
    assert err == "" and list(tmp_path.iterdir()) == []


def test_suite_dry_run_still_checks_the_file(tmp_path, capsys, nothing_runs):
    bad = tmp_path / "s.yaml"
    bad.write_text("matrix:\n  acks: [1, 2]\n")
    assert main(["suite", str(bad), "--dry-run", "--store", str(tmp_path / "store")]) == 3
    assert "s.yaml:2: matrix.acks[1]" in capsys.readouterr().err
    assert main(["suite", str(bad), "--dry-run", "--resume"]) == 3


def test_scenario_dry_run_prints_the_variants_and_creates_nothing(tmp_path, monkeypatch, capsys, nothing_runs):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    assert main(["scenario", "unclean-election", "--dry-run", "--repeat", "2", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    sc = load_scenario(find_scenario("unclean-election"))
    assert out.startswith(f"scenario unclean-election: {len(sc.variants)} variants × 2 repetitions")
    for v in sc.variants:
        assert f"  {v.name}: predicts {v.predict.text}\n" in out
    assert out.count("seeds ") == len(sc.variants)
    assert list(tmp_path.iterdir()) == []
    assert main(["scenario", "unclean-election", "--dry-run", "--variant", "clean", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "  clean: predicts" in out and out.count("predicts") == 1


@pytest.mark.parametrize("argv, hint", [
    (["run", "--acsk", "1"], "unrecognized arguments: --acsk 1 (did you mean --acks?)"),
    # an option's start is not taken for it: named, not guessed
    (["run", "--ack", "1"], "unrecognized arguments: --ack 1 (did you mean --acks?)"),
    (["run", "--time", "5"], "unrecognized arguments: --time 5 (did you mean --time-limit?)"),
    (["run", "--nemesis", ""], "argument --nemesis: names no fault"),
    (["run", "--nemesis", "mix", "--mix-families", ","], "argument --mix-families: names no family"),
    (["suite", "x.yaml", "--dryrun"], "(did you mean --dry-run?)"),
    (["run", "--nemesis", "kill-leadr"], "unknown nemesis 'kill-leadr' (did you mean kill-leader"),
    (["run", "--nemesis", "kill:majorty"], "unknown target 'majorty' (did you mean majority"),
    (["sute", "x.yaml"], "invalid choice: 'sute' (did you mean suite?)"),
    (["--color", "allways", "run"], "invalid choice: 'allways' (did you mean always?)"),
    (["scenario", "uncleen-election"], "unknown scenario 'uncleen-election' (did you mean unclean-election?)"),
    (["scenario", "unclean-election", "--variant", "claen"], "--variant claen (did you mean clean?)"),
])
def test_did_you_mean(tmp_path, capsys, argv, hint):
    store = tmp_path / "store"
    assert main([*argv, "--store", str(store)] if argv[0] == "run" else argv) == 3
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith("kchaos: error: ") and hint in lines[0], err
    assert not store.exists()


@pytest.mark.parametrize("argv, says", [
    (["prepare", "--checker-only", "--upgrade-to", "4.4"], "--upgrade-to prepares Kafka's nodes"),
    (["prepare", "--upgrade-to", "2.8"], "2.8"),
])
def test_prepare_refuses_an_upgrade_it_cannot_prepare_before_it_prepares_anything(capsys, monkeypatch, argv, says):
    import kchaos.clusters.distribution
    monkeypatch.setattr(kchaos.clusters.distribution, "resolve", lambda *a: pytest.fail("resolved a release"))
    assert main(argv) == 3
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kchaos: error: ") and says in lines[0], lines


def test_a_suite_file_suggests_the_option_meant(tmp_path):
    (tmp_path / "s.yaml").write_text("matrix:\n  min_insnc: [1, 2]\n")
    with pytest.raises(SuiteError, match=r"s.yaml:2: matrix.min_insnc: unknown run option \(did you mean min_insync"):
        load_suite(tmp_path / "s.yaml")


@pytest.mark.parametrize("text, where", [
    ("base:\n  time_limit: 5\n  min_insync: 4\ninclude:\n  - {acks: '1'}\n",
     "s.yaml:3: base.min_insync: --min-insync 4"),
    ("base:\n  rf: 2\n  min_insync: 3\nmatrix:\n  acks: ['1', all]\n", "s.yaml:3: base.min_insync: --min-insync 3"),
    ("base:\n  min_insync: 2\nmatrix:\n  rf: [1, 3]\n", "s.yaml:4: matrix.rf[0]: --min-insync 2 is larger"),
])
def test_an_error_of_the_base_is_reported_at_the_base(tmp_path, where, text):
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SuiteError) as e:
        load_suite(tmp_path / "s.yaml")
    assert str(e.value).startswith(where), str(e.value)


def test_compare_refuses_a_single_run(tmp_path, capsys):
    run = tmp_path / "queue" / "20261124T000000.000Z"
    run.mkdir(parents=True)
    (run / "history.jsonl").write_text("")
    (run / "results.json").write_text(json.dumps({"valid": True}))
    before = sorted(os.listdir(run))
    assert main(["compare", str(run)]) == 3
    err = capsys.readouterr().err
    assert "one run, not a suite or a directory of runs" in err and len(err.splitlines()) == 1
    assert sorted(os.listdir(run)) == before  # no compare.csv, no compare.html


def test_compare_prints_the_table_with_the_severity_in_words(tmp_path, capsys):
    import shutil
    root = tmp_path / "runs"
    shutil.copytree(REPO / "tests" / "fixtures" / "runs", root)
    assert main(["compare", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"compare {root}: 4 configurations, 4 runs · 4 of 4 configurations kept Kafka's promise · 2 of "
                      "them lost acknowledged writes it does not cover (13.4%, 17.3%)")
    rows = {line.split()[2]: line.split()[:2] for line in out if line.startswith("pass ")}
    assert rows == {"00_acks-1_misr-1": ["pass", "severe"], "01_acks-1_misr-2": ["pass", "severe"],
                    "02_acks-all_misr-1": ["pass", "noted"], "03_acks-all_misr-2": ["pass", "clean"]}
    assert out[-1] == f"compare: {root / 'compare.html'}  csv: {root / 'compare.csv'}"
    assert all(len(line) <= 160 for line in out[1:-1])


def test_the_mix_families_help_names_every_family_and_the_default(capsys):
    from kchaos.core.config import NemesisConfig
    from kchaos.nemesis.mix import FAMILIES
    assert main(["run", "--help-all"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.lstrip().startswith("--mix-families"))
    assert all(f in line for f in FAMILIES) and f"(default: {', '.join(NemesisConfig().mix_families)})" in line


def test_run_dry_run_prints_the_plan_and_starts_and_creates_nothing(tmp_path, capsys, nothing_runs):
    from kchaos.core.config import NemesisConfig, TestConfig
    from kchaos.nemesis.schedule import make_schedule
    store = tmp_path / "store"
    argv = ["run", "--dry-run", "--nemesis", "kill-leader,partition-one", "--interval", "7", "--seed", "5",
            "--acks", "1", "--store", str(store)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"run queue: seed 5, 60 s of workload → {store}/queue/<UTC stamp>"
    assert "producers: acks=1, idempotence off" in out
    ops = make_schedule(TestConfig(seed=5, nemesis=NemesisConfig(names=("kill-leader", "partition-one"), interval=7)))
    shown = [line for line in out if line.startswith("  ") and " s  " in line]
    assert [(float(x.split()[0]), x.split()[2], x.split()[3]) for x in shown] == \
        [(round(o.at, 1), o.nemesis, o.op["f"]) for o in ops]
    assert out[-1].startswith("note: kills 6.0 s apart, under broker.session.timeout.ms (9 s)")
    assert not store.exists()
    assert main([*argv[:-2], "--rf", "5", "--store", str(store)]) == 3  # bad input is still bad
    assert not store.exists()
