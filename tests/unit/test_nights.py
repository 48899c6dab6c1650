"""Nightly suites across nights: the results index (reports/suite/run_index.py), regressions
(reports/suite/regressions.py), the suite page across nights in `kchaos serve`, `kchaos suite`'s regression lines
and --fail-on-regression.

Three nights of a stand-in suite are recorded (tests/unit/test_suite.py's StandIn writes run directories as
run_test does); the third breaks one cell.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_serve import serving
from test_suite import SMALL, StandIn

from kchaos.core.exit_codes import EXIT_REGRESSION
from kchaos.harness.cli.main import main
from kchaos.harness.suites.run import run_suite
from kchaos.harness.suites.suite import load_suite
from kchaos.reports.suite.run_index import INDEX_FILE, RunIndex
from kchaos.reports.suite.trends import when

NIGHTLY = SMALL.replace("name: small", "name: nightly").replace("repeat: 2", "repeat: 1")


class Night(StandIn):
    """StandIn that also records a p99 send latency and availability, as run_test's results.json has them."""

    def __init__(self, p99: float, **kw):
        super().__init__(**kw)
        self.p99 = p99

    def __call__(self, cfg, **kw):
        run, results = super().__call__(cfg, **kw)
        results = {**results, "latency_ms": {"send": {"ok": {"p50": self.p99 / 4, "p99": self.p99}}},
                   "timeline": {"availability": {"overall": {"ok": 90, "invoked": 100},
                                                 "outside_faults": {"ok": 50, "invoked": 50}}}}
        (run / "results.json").write_text(json.dumps(results))
        return run, results


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """A store with three nights of suite `nightly`; on the third, cell acks=all min_insync=2 loses writes inside
    the promise (a regression) and acks=1 min_insync=1 first loses writes (a new, allowed anomaly kind)."""
    tmp = tmp_path_factory.mktemp("nights")
    suite = load_suite(_write(tmp, NIGHTLY))
    names = [c.name for c in suite.cells]
    store = tmp / "results"
    sdirs = [run_suite(suite, store, runner=Night(p99))[0] for p99 in (20.0, 25.0)]
    sdirs.append(run_suite(suite, store, runner=Night(80.0, lost={names[3]: 4, names[0]: 2}))[0])
    return store, sdirs, names


def _write(tmp: Path, text: str) -> Path:
    (tmp / "nightly.yaml").write_text(text)
    return tmp / "nightly.yaml"


def test_third_night_regression_is_found_against_the_second(nights):
    from kchaos.reports.suite.regressions import FAILS_NOW, NEW_KIND, night_regressions

    store, sdirs, names = nights
    assert night_regressions(store, sdirs[0]) == ([], None)
    assert night_regressions(store, sdirs[1])[0] == []
    regs, before = night_regressions(store, sdirs[2])
    assert before == sdirs[1].relative_to(store.resolve()).as_posix()
    assert [(r.cell, r.what) for r in regs] == [(names[3], FAILS_NOW), (names[0], NEW_KIND)]
    assert regs[0].text.startswith("acks=all min_insync=2: passed on ") and "4 lost (new)" in regs[0].text
    assert "new anomaly kind lost (2, observed, allowed)" in regs[1].text


@pytest.fixture(scope="module")
def url(nights):
    with serving(nights[0]) as u:
        yield u


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


def test_suite_page_across_nights_lists_the_regression_first(nights, url):
    store, sdirs, names = nights
    body = _get(url + "/suites/nightly/")
    assert "Suite nightly: 3 nights" in body
    regs = body.index("Regressions since")
    assert regs < body.index("Cells across nights") < body.index("Nights (3)")
    top = body[regs:body.index("Cells across nights")]
    assert "fails now" in top and "acks=all min_insync=2: passed on" in top and "new anomaly" in top
    broken = next(r for r in body.split("<tr")[1:] if "acks=all min_insync=2" in r and "sq " in r)
    assert 'class="regressed"' in broken and broken.count('class="sq sev-clean"') == 2 and "sev-severe" in broken
    assert broken.count("<svg") == 2 and "80 ms" in broken and "4.0%" in broken  # p99 and loss rate, last night
    for d in sdirs:  # every night links to its runs
        assert f'href="/{d.relative_to(store.resolve()).as_posix()}/' in body
    night = _get(f"{url}/{sdirs[2].relative_to(store.resolve()).as_posix()}/")
    assert "Regressions since" in night and 'href="/suites/nightly/"' in night
    middle = _get(f"{url}/{sdirs[1].relative_to(store.resolve()).as_posix()}/")  # against its own night before
    assert f"No regressions since {when(sdirs[0].name)}." in middle and "fails now" not in middle
    assert 'href="/suites/nightly/"' in _get(url + "/")


def test_kchaos_suite_prints_regressions_last_and_fails_on_them(tmp_path, monkeypatch, capsys):
    from kchaos.harness import runner as harness_runner

    path = _write(tmp_path, NIGHTLY)
    names = [c.name for c in load_suite(path).cells]
    store = str(tmp_path / "results")
    monkeypatch.setattr(harness_runner, "run_test", Night(10.0))
    assert main(["suite", str(path), "--store", store, "--fail-on-regression"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "regressions: none (no earlier night of this suite to " \
                                                      "compare with)"
    assert main(["suite", str(path), "--store", store, "--fail-on-regression"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("regressions: none since 2")
    monkeypatch.setattr(harness_runner, "run_test", Night(10.0, lost={names[3]: 4}))
    assert main(["suite", str(path), "--store", store, "--fail-on-regression"]) == EXIT_REGRESSION
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("regressions since 2") and out[-2].endswith(": 1")
    assert out[-1].startswith("  fails now: acks=all min_insync=2: passed on ") and len(out[-1]) > 100  # not wrapped
    assert main(["suite", str(path), "--store", store]) == 1  # without the flag: the verdict's code


def _rows(store: Path) -> list[dict]:
    with RunIndex(store) as index:
        index.refresh()
        return [{k: v for k, v in r.items()} for r in index.runs()] + index.nights()


def test_rebuild_after_deleting_the_index_gives_the_same_rows(nights, capsys):
    store = nights[0]
    before = _rows(store)
    assert len([r for r in before if "run" in r]) == 12
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store / INDEX_FILE}{suffix}").unlink(missing_ok=True)
    assert _rows(store) == before
    assert main(["index", "--store", str(store), "--rebuild"]) == 0
    assert capsys.readouterr().out.startswith("index: 12 runs, 3 suite nights (rebuilt)")
    assert _rows(store) == before
    assert main(["index", "--store", str(store / "missing")]) == 3


def test_another_schema_or_a_damaged_file_is_rebuilt(nights):
    store = nights[0]
    before = _rows(store)
    with sqlite3.connect(store / INDEX_FILE) as c:
        c.execute("PRAGMA user_version = 999")
    assert _rows(store) == before
    for suffix in ("-wal", "-shm"):
        Path(f"{store / INDEX_FILE}{suffix}").unlink(missing_ok=True)
    (store / INDEX_FILE).write_bytes(b"not a database" * 100)
    assert _rows(store) == before


def test_a_changed_or_removed_run_is_noticed(tmp_path):
    s = load_suite(_write(tmp_path, NIGHTLY))
    store = tmp_path / "results"
    sdir, _ = run_suite(s, store, runner=Night(5.0))
    run = next(sdir.glob("03_*/2*"))
    (run / "results.json").write_text(json.dumps({"counts": {"acked": 100, "lost": 9}, "loss": {"lost_in_promise": 9}}))
    with RunIndex(store) as index:
        assert index.refresh().updated == 1
        assert {r["run"]: r["verdict"] for r in index.runs()}[run.relative_to(store.resolve()).as_posix()] == "fail"
        (run / "history.jsonl").unlink()
        assert index.refresh().removed == 1 and len(index.runs()) == 3


SLOW_SUITE = """
import time
from pathlib import Path
from test_suite import StandIn
from kchaos.harness.suites.suite import load_suite
from kchaos.harness.suites.run import run_suite

class Slow(StandIn):
    def __call__(self, cfg, **kw):
        time.sleep(0.3)
        return super().__call__(cfg, **kw)

run_suite(load_suite(Path({path!r})), Path({store!r}), runner=Slow())
"""


def test_index_survives_a_suite_killed_halfway(tmp_path):
    path = _write(tmp_path, NIGHTLY.replace("repeat: 1", "repeat: 3"))
    store = tmp_path / "results"
    code = SLOW_SUITE.format(path=str(path), store=str(store))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            progress = list(store.glob("suites/nightly/2*/progress.jsonl"))
            if progress and len(progress[0].read_text().splitlines()) >= 4:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    with sqlite3.connect(store / INDEX_FILE) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        indexed = c.execute("SELECT count(*) FROM runs").fetchone()[0]
    on_disk = len(list(store.glob("suites/nightly/2*/*/2*/history.jsonl")))
    recorded = len(progress[0].read_text().splitlines())
    assert recorded - 1 <= indexed <= on_disk < 12  # the run being recorded when it died may be missing
    with RunIndex(store) as index:
        index.refresh()
        assert len(index.runs()) == on_disk


WRITER = """
import sys
from pathlib import Path
from kchaos.reports.suite.run_index import RunIndex
with RunIndex(Path({store!r})) as index:
    while True:
        index.refresh(rebuild=True)
"""


def test_a_concurrent_writer_never_corrupts_what_a_reader_sees(nights):
    store = nights[0]
    want = len(_rows(store))
    proc = subprocess.Popen([sys.executable, "-c", WRITER.format(store=str(store))], cwd=Path(__file__).parents[2])
    seen = []
    try:
        time.sleep(1.0)  # the writer is rebuilding over and over
        with RunIndex(store) as index:
            for _ in range(200):
                seen.append(len(index.runs()) + len(index.nights()))
        os.kill(proc.pid, signal.SIGKILL)  # mid-transaction, most likely
    finally:
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert set(seen) == {want}  # every read saw a whole state: never a rebuild halfway
    with sqlite3.connect(store / INDEX_FILE) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert len(_rows(store)) == want
