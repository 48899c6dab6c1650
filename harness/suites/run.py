"""Running a suite: every repetition of every cell, in order, going on past failed runs; resumable.

A suite run lives in `<store>/suites/<suite>/<UTC stamp>/` (and
`<store>/suites/<suite>/latest` points at the newest):

    suite.yaml      the suite file as it was run
    suite.json      name, seed, repeat, the cells with their options, the command line
    progress.jsonl  one line per finished repetition (appended and flushed): cell, rep, seed, run, status
    <cell>/<stamp>/ each repetition's run directory (test.json, history.jsonl, results.json, report.html)
    compare.csv, compare.html, report.xml (JUnit)   written at the end

`--resume` continues the newest suite run of the same suite: repetitions
progress.jsonl records as done are kept; a run directory the interruption
left behind, or of a repetition that errored, is moved to `.interrupted/`
(hidden, so never compared); the rest run, with the seeds the suite seed
gives them.
"""
from __future__ import annotations

import json
import secrets
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from kchaos.checkers import HISTORY_FILE, find_runs, judge_run
from kchaos.core.config import TestConfig
from kchaos.core.store import check_store, point_latest, stamped_dir
from kchaos.core.suite_files import STATE_FILE, Entry, latest, read_progress, record_progress
from kchaos.harness.suites.shard import WHOLE, Shard, of_night, require_seed, share
from kchaos.harness.suites.suite import Suite, SuiteError
from kchaos.harness.terminal import heading, make_console
from kchaos.reports.suite.compare import write_compare
from kchaos.reports.suite.junit import CellOutcome, write_junit
from kchaos.reports.suite.run_index import open_store_index

JUNIT_FILE = "report.xml"
Runner = Callable[..., tuple[Path, dict[str, Any]]]


def _cells_json(suite: Suite) -> list[dict[str, Any]]:
    return [{"name": c.name, "label": c.label(), "params": dict(c.params), "options": dict(c.options)}
            for c in suite.cells]



def start(suite: Suite, store: Path, seed: int, argv: list[str], kind: str = "suites", shard: Shard = WHOLE) -> Path:
    """Create a fresh suite directory `store/kind/name/stamp` holding suite.yaml and suite.json (with the shard,
    when it runs one); return it."""
    parent = store / kind / suite.name
    sdir = stamped_dir(parent)
    (sdir / "suite.yaml").write_text(suite.text, encoding="utf-8")
    state = {"name": suite.name, "description": suite.description, "file": str(suite.path), "seed": seed,
             "repeat": suite.repeat, "cells": _cells_json(suite), "argv": argv, "started": sdir.name}
    if not shard.whole:
        state["shard"] = str(shard)
    (sdir / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    point_latest(parent, sdir)
    return sdir


def resumable(suite: Suite, store: Path, kind: str = "suites", shard: Shard = WHOLE) -> tuple[Path, int]:
    """The newest suite directory of `suite` (of `shard` of it) below `store/kind`, and its seed; SuiteError if it
    cannot be resumed."""
    parent = store / kind / suite.name
    dirs = sorted(d for d in parent.glob("2*") if (d / STATE_FILE).is_file()) if parent.is_dir() else []
    states = [(d, json.loads((d / STATE_FILE).read_text(encoding="utf-8"))) for d in dirs]
    states = [(d, st) for d, st in states if of_night(st) == shard]
    if not states:
        what = f"suite {suite.name!r}" + ("" if shard.whole else f" shard {shard}")
        raise SuiteError(f"--resume: no earlier run of {what} in {parent}")
    sdir, state = states[-1]
    if state.get("cells") != json.loads(json.dumps(_cells_json(suite))) or state.get("repeat") != suite.repeat:
        raise SuiteError(f"--resume: {suite.path.name} no longer describes the suite run in {sdir} "
                         f"(cells or repeat changed); run it afresh without --resume")
    done = {k for k, e in latest(read_progress(sdir)).items() if e.status == "done"}
    if all((c.name, r) in done for _, c, r in share(suite, shard)):
        raise SuiteError(f"--resume: the suite run in {sdir} already finished; run it afresh without --resume")
    return sdir, int(state["seed"])


def _set_aside(sdir: Path, known: set[str]) -> list[str]:
    """Move run directories no progress line accounts for (an interrupted run) to .interrupted/."""
    moved = []
    for run in find_runs(sdir):
        rel = str(run.relative_to(sdir))
        if rel not in known:
            dest = sdir / ".interrupted" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(run), dest)
            moved.append(rel)
    return moved


def index_night(store: Path, sdir: Path, run: str | None, console: Console | None = None) -> None:
    """Put a finished run (or, with `run` None, the night alone) in the store's index; a broken index is only
    worth a warning: the run directories are the truth, and `kchaos index --rebuild` remakes it."""
    console = console or make_console()
    try:
        with open_store_index(store) as index:
            if run and (sdir / run).is_dir():
                index.add_run(sdir / run, sdir)
            else:
                index.add_night(sdir)
    except (sqlite3.Error, OSError) as e:
        console.print(f"[yellow]results index not updated ({e}); kchaos index --rebuild remakes it[/]")


def _fmt(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


def run_suite(suite: Suite, store: Path, *, resume: bool = False, seed: int | None = None,
              spark_master: str = "local[*]", console: Console | None = None, argv: list[str] | None = None,
              runner: Runner | None = None, kind: str = "suites",
              shard: Shard = WHOLE) -> tuple[Path, list[CellOutcome]]:
    """Run (or resume) `suite`, or only `shard` of it; return its directory and one outcome per cell it ran.

    Every cell is preflighted before anything is created. A repetition that
    raises (cluster failure, harness bug) is recorded as an error and the
    suite goes on; missing Docker, Kafka jars or node image end the suite
    (EngineError, DistributionError, ImageError propagate), as does Ctrl-C
    (KeyboardInterrupt propagates; `resume=True` continues later). `kind`
    is the folder of the store it goes in ("suites", or "scenarios"). A
    shard needs the suite's seed fixed (`seed`, or the file's): SuiteError
    otherwise, before anything is created.
    """
    from kchaos.clusters.distribution import DistributionError
    from kchaos.clusters.engine import EngineError
    from kchaos.clusters.image import ImageError
    from kchaos.harness.build import preflight
    from kchaos.harness.runner import run_test

    console = console or make_console()
    runner = runner or run_test
    store = check_store(str(store))
    if resume:
        sdir, seed = resumable(suite, store, kind, shard)
    else:
        require_seed(shard, seed if seed is not None else suite.seed)
        seed = seed if seed is not None else suite.seed if suite.seed is not None else secrets.randbelow(2**31)
    total = len(suite.cells) * suite.repeat
    todo: list[tuple[int, Any, int, TestConfig]] = []
    for k, cell, rep in share(suite, shard):
        cfg = suite.config(cell, suite.run_seed(seed, cell, rep), Path("/tmp"), spark_master)
        todo.append((k, cell, rep, preflight(cfg)))
    if not resume:
        sdir = start(suite, store, seed, argv or [], kind, shard)
    # Runs that finished stay; a run cut short or one that errored is set aside and run again.
    done = {k for k, e in latest(read_progress(sdir)).items() if e.status == "done"}
    moved = _set_aside(sdir, {e.run for k, e in latest(read_progress(sdir)).items() if e.run and k in done})
    if moved:
        console.print(f"[yellow]set aside {len(moved)} interrupted or failed run(s) in {sdir / '.interrupted'}[/]")
    pending = [t for t in todo if (t[1].name, t[2]) not in done]
    index_night(store, sdir, None, console)
    part = "" if shard.whole else f", shard {shard}: {len(todo)} of them"
    console.print(f"[bold]suite {suite.name}[/] {len(suite.cells)} cells × {suite.repeat} = {total} runs{part}, "
                  f"seed {seed}{f', resuming: {len(pending)} left' if resume else ''} → {sdir}")
    began, finished = time.monotonic(), 0
    for k, cell, rep, cfg in pending:
        elapsed = time.monotonic() - began
        eta = f", about {_fmt(elapsed / finished * (len(pending) - finished))} left" if finished else ""
        heading(console, f"suite {suite.name}: run {k + 1}/{total} · {cell.label()} · "
                         f"rep {rep + 1}/{suite.repeat} · {len(done) + finished} done{eta}")
        cfg = cfg.with_(store=str(sdir))
        before = ({str(r.relative_to(sdir)) for r in find_runs(sdir / cell.name)} if (sdir / cell.name).exists()
                  else set())
        t0 = time.monotonic()
        try:
            run, results = runner(cfg, argv=argv, console=console, label=f"[{k + 1}/{total}] {cell.name}")
            entry = Entry(cell.name, rep, cfg.seed, str(run.relative_to(sdir)), "done", results.get("valid"),
                          round(time.monotonic() - t0, 1), verdict=judge_run(run).verdict)
        except (EngineError, DistributionError, ImageError):
            raise
        except KeyboardInterrupt:
            _set_aside(sdir, {e.run for e in read_progress(sdir) if e.run})  # only this run is unrecorded
            raise
        except Exception as e:
            new = sorted({str(r.relative_to(sdir)) for r in find_runs(sdir / cell.name)} - before) \
                if (sdir / cell.name).exists() else []
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            console.print(f"[red]run {k + 1} failed: {msg}; going on[/]")
            entry = Entry(cell.name, rep, cfg.seed, new[-1] if new else None, "error", None,
                          round(time.monotonic() - t0, 1), msg)
        record_progress(sdir, entry)
        index_night(store, sdir, entry.run, console)
        finished += 1
    return sdir, finish(suite, sdir)


def finish(suite: Suite, sdir: Path) -> list[CellOutcome]:
    """Write compare.csv/html and report.xml for a suite directory; return one outcome per cell (per cell the
    night's shard ran, when it ran one: suite.json says)."""
    entries = list(latest(read_progress(sdir)).values())
    rows = {r["cell"]: r for r in write_compare(sdir, f"suite {suite.name}")} \
        if any((sdir / e.run / HISTORY_FILE).exists() for e in entries if e.run) else {}
    shard = of_night(json.loads((sdir / STATE_FILE).read_text(encoding="utf-8")))
    ran = {cell.name for _, cell, _ in share(suite, shard)}
    outcomes = []
    for cell in (c for c in suite.cells if c.name in ran):
        mine = [e for e in entries if e.cell == cell.name]
        outcomes.append(CellOutcome(cell.name, cell.label(), rows.get(cell.name),
                                    [f"rep {e.rep + 1}: {e.error}" for e in mine if e.status == "error"],
                                    sum(e.seconds for e in mine), cell.short()))
    write_junit(sdir / JUNIT_FILE, suite.name, outcomes)
    return outcomes
