"""Output fit for terminals and logs: nothing wrapped or cut off a terminal, plain progress lines,
colour only where it belongs (--color, NO_COLOR), --quiet, and verdicts on stdout.

The suite runs with a stand-in runner that writes a small run directory, so no cluster is needed.
"""
from __future__ import annotations

import io
import json
import re
import signal
from pathlib import Path

import pytest

from kchaos.core.store import new_run_dir
from kchaos.harness.cli.main import main
from kchaos.harness.suites.suite import load_suite
from kchaos.harness.terminal import interactive, make_console, track

ANSI = re.compile(r"\x1b\[")
# Long cell names and a long store path: rich used to hard-wrap both at 80 columns in a pipe.
SUITE = """\
name: a-suite-with-rather-long-cell-names
seed: 3
base: {time_limit: 5}
matrix:
  acks: ['1', all]
  nemesis: [partition-majorities-ring, [power-fail-leader, slow-follower]]
  controllers: [3]
"""


class StandIn:
    """Writes a run directory as run_test would, says a step on the console it was given; acks=all loses nothing."""

    def __call__(self, cfg, *, argv=None, console=None, label=""):
        run = new_run_dir(Path(cfg.store), cfg.name)
        (run / "test.json").write_text(json.dumps(cfg.to_dict()))
        (run / "history.jsonl").write_text("")
        lost = 5 if cfg.producer.acks == "1" else 0
        results = {"valid": lost == 0, "counts": {"acked": 100, "lost": lost, "duplicate": 0}}
        (run / "results.json").write_text(json.dumps(results))
        console.print(f"[bold cyan]•[/] run directory {run}")
        return run, results


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def suite_cli(tmp_path, monkeypatch):
    """main() for `kchaos suite` on SUITE with the stand-in runner, its store deep below tmp_path."""
    from kchaos.harness import runner as harness_runner

    monkeypatch.setattr(harness_runner, "run_test", StandIn())
    monkeypatch.delenv("NO_COLOR", raising=False)
    path = tmp_path / "s.yaml"
    path.write_text(SUITE)
    store = tmp_path / "a" / "store" / "whose" / "path" / "is" / "long" / "enough" / "to" / "be" / "wrapped"
    before = signal.getsignal(signal.SIGTERM)

    def run(*extra: str) -> int:
        return main(["suite", str(path), "--store", str(store), *extra])

    run.suite, run.store = load_suite(path), store
    yield run
    signal.signal(signal.SIGTERM, before)


def test_piped_suite_output_is_neither_wrapped_nor_cut_nor_coloured(suite_cli, capsys):
    assert suite_cli() == 0
    out, err = capsys.readouterr()
    sdir = next((suite_cli.store / "suites" / suite_cli.suite.name).glob("2*"))
    out_lines, err_lines = out.splitlines(), err.splitlines()
    for cell in suite_cli.suite.cells:  # each table row holds the whole cell, each heading its whole label
        assert any(line.startswith("pass") and cell.short() in line for line in out_lines), out
        assert any(line.startswith("── ") and cell.label() in line for line in err_lines), err
        assert any(str(sdir / cell.name) in line for line in err_lines), err  # the whole run directory
    assert out_lines[0] == (f"suite {suite_cli.suite.name}: 4 of 4 cells kept Kafka's promise · 2 of them lost "
                            f"acknowledged writes it does not cover (5.0%, 5.0%) · {sdir}")
    assert f"compare: {sdir / 'compare.html'}  junit: {sdir / 'report.xml'}" in out_lines
    assert any(line.startswith("runs pass/fail/?: ") for line in out_lines)  # the legend under the table
    # acks=1 cells lost 5 of 100: allowed, so they pass, and say what they observed
    assert sum("observed, allowed: 5 lost (acks=1 promises no durability)" in line for line in out_lines) == 2
    assert not ANSI.search(out + err)


def test_color_always_colours_a_pipe_and_never_stays_plain(suite_cli, capsys, monkeypatch):
    assert suite_cli("--color", "always") == 0
    out, err = capsys.readouterr()
    assert ANSI.search(out) and ANSI.search(err)
    monkeypatch.setenv("NO_COLOR", "1")  # an explicit --color always wins over NO_COLOR
    assert main(["--color", "always", "suite", str(suite_cli.suite.path), "--store", str(suite_cli.store)]) == 0
    assert ANSI.search(capsys.readouterr().out)
    assert suite_cli("--color", "never") == 0
    assert not ANSI.search("".join(capsys.readouterr()))


def test_a_terminal_gets_colour_unless_no_color_or_never(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)

    def printed(**kw) -> str:
        tty = FakeTTY()
        make_console(tty, **kw).print("[red]BROKEN[/]")
        return tty.getvalue()

    assert ANSI.search(printed())
    assert not ANSI.search(printed(color="never"))
    monkeypatch.setenv("NO_COLOR", "1")
    assert printed() == "BROKEN\n"
    assert ANSI.search(printed(color="always"))
    assert not ANSI.search(printed(color="auto")) and "BROKEN" in printed()


def test_quiet_prints_only_the_verdict(suite_cli, capsys):
    assert suite_cli("--quiet") == 0
    out, err = capsys.readouterr()
    assert err == ""  # no header, no headings, no steps
    assert "4 of 4 cells kept Kafka's promise" in out and all(c.short() in out for c in suite_cli.suite.cells)
    assert main(["-q", "suite", str(suite_cli.suite.path), "--store", str(suite_cli.store)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "4 of 4 cells kept Kafka's promise" in out


def test_a_table_too_wide_for_the_terminal_leaves_out_columns_but_not_the_cell(suite_cli, capsys, monkeypatch):
    from kchaos.harness.cli import main as harness_cli

    tty = FakeTTY()
    monkeypatch.setattr(harness_cli, "make_console",
                        lambda stream, **kw: make_console(tty if stream is harness_cli.sys.stdout else stream, **kw))
    monkeypatch.setenv("COLUMNS", "72")
    assert suite_cli("--color", "never") == 0
    text = tty.getvalue()
    assert interactive(make_console(tty))
    rows = [line for line in text.splitlines() if line.split()[:1] in (["pass"], ["fail"])]
    assert len(rows) == 4 and all(any(c.short() in r for r in rows) for c in suite_cli.suite.cells)
    # the colour still says the severity
    assert "left out to fit the terminal: in faults, severity, promise, acked" in text
    table = text[text.index("verdict"):text.index("acks=1 partition-majorities-ring controllers=3: observed")]
    assert all(len(line) <= 72 for line in table.splitlines()), table


def test_progress_off_a_terminal_is_one_plain_line_every_10_seconds():
    now = [0.0]
    out = io.StringIO()
    console = make_console(out)
    assert not interactive(console)
    track(console, "[1/4] cell", 35, lambda: f"sent {int(now[0] * 10)}", clock=lambda: now[0],
          sleep=lambda s: now.__setitem__(0, now[0] + s))
    lines = out.getvalue().splitlines()
    assert lines == ["[1/4] cell 10/35s sent 100", "[1/4] cell 20/35s sent 200", "[1/4] cell 30/35s sent 300",
                     "[1/4] cell 35/35s sent 350"]


def test_progress_on_a_terminal_is_a_live_bar_and_quiet_prints_none():
    now = [0.0]
    tick = dict(clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    tty = FakeTTY()
    track(make_console(tty, color="never"), "bar", 3, lambda: "sent 1", **tick)
    assert "bar 3/3s" not in tty.getvalue() and "━" in tty.getvalue()  # rich's bar, not the plain line
    now[0], quiet = 0.0, io.StringIO()
    track(make_console(quiet, quiet=True), "bar", 30, lambda: "sent 1", **tick)
    assert quiet.getvalue() == ""


def test_check_prints_its_summary_on_stdout(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("")
    summary = {"valid": False, "verdict": "fail", "counts": {"acked": 10, "lost": 2}, "examples": {"lost": [3, 7]}}
    results = {**summary, "timeline": [{"second": s, "ok": 1} for s in range(1000)], "checkers": {"queue": {}}}
    monkeypatch.setattr("kchaos.checkers.check_path", lambda path, master, find_libs: results)
    assert main(["check", str(run)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "verdict: fail · severe: 20% of acknowledged writes lost (2 of 10)"
    assert "e.g. lost: [3, 7]" in out
    assert err == ""
    assert main(["check", str(run), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == summary  # what grows with the run is left out
    assert main(["check", str(run), "--json", "--full"]) == 1
    assert json.loads(capsys.readouterr().out) == results
    assert main(["check", str(run), "--full"]) == 3
    assert capsys.readouterr().err == "kchaos: error: --full only applies to --json\n"


def test_check_of_many_runs_never_cuts_a_run_path(tmp_path, monkeypatch, capsys):
    long = "suites/nightly/20261124T000000.000Z/17_acks-all_misr-2_partition-majorities-ring/20261124T010203.456Z"
    row = {"run": long, "verdict": "pass", "valid": True, "acks": "all", "min_insync": 2, "acked": 5, "lost": 0,
           "loss_promised": True, "availability_in_faults": 0.5, "error": None}
    monkeypatch.setattr("kchaos.checkers.check_tree",
                        lambda path, master, find_libs: {"verdict": "pass", "valid": True, "runs": [row]})
    assert main(["check", str(tmp_path)]) == 0
    assert any(line.startswith(long + " ") for line in capsys.readouterr().out.splitlines())
