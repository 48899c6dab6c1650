"""The results index: one SQLite file beside the store (`<store>/index.sqlite`) with a row per run and per suite night.

The run directories stay the source of truth. The index holds what the pages, `kchaos compare` and the trend view
read of each run (its test.json, the essentials of its results.json, the verdict, the loss, the latency), so they
query one file instead of opening every run. A row remembers the size and modification time of the files it was
read from. `refresh` looks at those (a directory walk and a few `stat` calls per run, no JSON read) and reads again
only what changed, came or went. A file of another schema version, or one that is not a database, is rebuilt from
the tree. The file is in WAL mode and every write is one transaction, so a reader always sees a whole state, a
second writer waits its turn, and a writer killed halfway leaves the last committed state.
"""
from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kchaos.checkers.send_errors import KEY as SEND_ERRORS
from kchaos.checkers.verdict.judge import essentials, judge, lost_in_promise
from kchaos.checkers.verdict.table import in_faults
from kchaos.core.suite_files import PROGRESS_FILE, STATE_FILE, latest, read_progress
from kchaos.reports.severity import level

__all__ = ["INDEX_FILE", "SCHEMA_VERSION", "Refreshed", "RunIndex", "index_for", "open_store_index", "stamp_of"]

log = logging.getLogger("kchaos.index")

INDEX_FILE = "index.sqlite"
SCHEMA_VERSION = 3  # 2: unseen_undecided and the txn isolation; 3: the history and nemesis sections (unknown runs)
STAMP = re.compile(r"^\d{8}T\d{6}")
RUN_FILES = ("test.json", "results.json", "report.html")
NIGHT_FILES = (STATE_FILE, PROGRESS_FILE)
# A path column at or below a prefix (the prefix given four times; '' is the whole store). Not LIKE: `_` in a
# suite's name would match any character.
BELOW = "(? = '' OR {0} = ? OR substr({0}, 1, length(?) + 1) = ? || '/')"
BUSY_MS = 30_000  # how long a writer waits for another (a suite and serve refreshing at once)

RUN_COLUMNS = ("run", "name", "stamp", "night", "suite", "cell", "kafka", "config", "checked", "verdict", "severity",
               "acked", "lost", "lost_in_promise", "loss_rate", "availability", "p50", "p99", "failed", "allowed",
               "has_report", "test", "results", "sig")
NIGHT_COLUMNS = ("night", "suite", "kind", "stamp", "file", "description", "cells", "progress", "sig")
SCHEMA = f"""
CREATE TABLE runs (run TEXT PRIMARY KEY, name TEXT, stamp TEXT, night TEXT, suite TEXT, cell TEXT, kafka TEXT,
  config TEXT, checked INTEGER, verdict TEXT, severity TEXT, acked INTEGER, lost INTEGER, lost_in_promise INTEGER,
  loss_rate REAL, availability REAL, p50 REAL, p99 REAL, failed TEXT, allowed TEXT, has_report INTEGER, test TEXT,
  results TEXT, sig TEXT);
CREATE INDEX runs_night ON runs(night);
CREATE TABLE nights (night TEXT PRIMARY KEY, suite TEXT, kind TEXT, stamp TEXT, file TEXT, description TEXT,
  cells TEXT, progress TEXT, sig TEXT);
CREATE INDEX nights_suite ON nights(suite, kind, stamp);
PRAGMA user_version = {SCHEMA_VERSION};
"""


@dataclass(frozen=True)
class Refreshed:
    """What a refresh did: rows now in the index, rows read again, rows removed, and whether it started empty."""

    runs: int
    nights: int
    updated: int
    removed: int
    rebuilt: bool


def stamp_of(d: Path) -> str:
    """A directory's UTC stamp: its name when it is one (20261122T035547.035Z), else its modification time."""
    if STAMP.match(d.name):
        return d.name
    try:
        return datetime.fromtimestamp(d.stat().st_mtime, UTC).strftime("%Y%m%dT%H%M%S")
    except OSError:
        return ""


def _sig(d: Path, names: tuple[str, ...]) -> str:
    """Size and modification time of each of `names` in `d` ("-" when absent): what tells a row is stale."""
    out = []
    for n in names:
        try:
            st = os.stat(d / n)
            out.append(f"{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            out.append("-")
    return " ".join(out)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("%s: unreadable (%s)", path, e)
        return {}
    return value if isinstance(value, dict) else {}


def _get(d: Any, *path: str) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def config_summary(test: dict[str, Any]) -> str:
    """The settings a reader compares runs by, in one line: `acks=all min_insync=2 rf=3 nemesis=kill-leader`."""
    names = _get(test, "nemesis", "names")
    pairs = [("acks", _get(test, "producer", "acks")), ("min_insync", _get(test, "topic", "min_insync")),
             ("rf", _get(test, "topic", "replication_factor")), ("unclean", _get(test, "topic", "unclean")),
             ("idempotence", _get(test, "producer", "idempotence")),
             ("nemesis", ",".join(map(str, names)) if isinstance(names, list) else names)]
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in pairs if v is not None)


OUTAGE_TOTALS = ("span_s", "total_s", "longest_s", "acked_share", "count")  # compare's, of a run's outages


def slim_results(results: dict[str, Any]) -> dict[str, Any]:
    """What the index keeps of a results.json: `essentials` (all `judge` reads), send latency p50/p99, and the
    availability and outage totals and the sends' errors compare needs; a few hundred bytes of what can be megabytes."""
    out = essentials(results)
    ok = _get(results, "latency_ms", "send", "ok")
    if isinstance(ok, dict):
        out["latency_ms"] = {"send": {"ok": {k: ok[k] for k in ("p50", "p99") if k in ok}}}
    avail = _get(results, "timeline", "availability")
    if isinstance(avail, dict):
        out["timeline"] = {"availability": {k: avail[k] for k in ("overall", "outside_faults")
                                            if isinstance(avail.get(k), dict)}}
    if isinstance(results.get(SEND_ERRORS), dict):
        out[SEND_ERRORS] = results[SEND_ERRORS]  # at most MOST names
    outages = _get(results, "timeline", "outages")
    if isinstance(outages, dict):
        out.setdefault("timeline", {})["outages"] = {k: outages.get(k) for k in OUTAGE_TOTALS}
    return out


def run_row(root: Path, run: Path, night: Path | None, suite: str | None,
            cells: dict[str, str] | None = None) -> dict[str, Any]:
    """The index row of run directory `run` below `root` (inside suite night `night` of suite `suite`, if any;
    `cells` maps run directories below the night to their cell, as its progress.jsonl records them)."""
    sig = _sig(run, RUN_FILES)
    test = _json(run / "test.json") or {}
    full = _json(run / "results.json")
    res = slim_results(full) if full is not None else None
    j = judge(res, test) if res is not None else None
    counts = _get(res, "counts") or {}
    acked, lost = counts.get("acked"), counts.get("lost")
    ok, invoked = in_faults(_get(res, "timeline", "availability") or {})
    latency = _get(res, "latency_ms", "send", "ok") or {}
    rel = run.relative_to(root)
    below = run.relative_to(night) if night is not None else None
    cell = (cells or {}).get(below.as_posix()) if below is not None else None
    cell = cell or (below.parts[0] if below is not None and len(below.parts) > 1 else None)
    return {"run": rel.as_posix(), "name": test.get("name") or run.parent.name, "stamp": stamp_of(run),
            "night": night.relative_to(root).as_posix() if night is not None else None, "suite": suite,
            "cell": cell or (test.get("name") if night is not None else None),
            "kafka": _get(test, "cluster", "kafka_version") or _get(test, "versions", "kafka"),
            "config": config_summary(test), "checked": int(res is not None),
            "verdict": j.verdict if j else None,
            "severity": level(j.verdict, lost, acked, bool(j.allowed)) if j else "unknown",
            "acked": acked, "lost": lost,
            "lost_in_promise": lost_in_promise(res) if counts and res is not None else None,
            "loss_rate": round(lost / acked, 6) if acked and lost is not None else None,
            "availability": round(ok / invoked, 4) if invoked else None,
            "p50": latency.get("p50"), "p99": latency.get("p99"),
            "failed": json.dumps(dict(j.failed)) if j else "{}", "allowed": json.dumps(dict(j.allowed)) if j else "{}",
            "has_report": int((run / "report.html").is_file()), "test": json.dumps(test),
            "results": json.dumps(res) if res is not None else None, "sig": sig}


def night_row(root: Path, night: Path) -> dict[str, Any]:
    """The index row of a suite (or scenario) night: suite.json's name, cells and file, progress.jsonl's entries."""
    sig = _sig(night, NIGHT_FILES)
    meta = _json(night / STATE_FILE) or {}
    try:
        progress = [asdict(e) for e in latest(read_progress(night)).values()]
    except (OSError, UnicodeDecodeError) as e:
        log.warning("%s: unreadable (%s)", night / PROGRESS_FILE, e)
        progress = []
    rel = night.relative_to(root)
    cells = [{"name": c.get("name"), "label": c.get("label")} for c in meta.get("cells") or [] if isinstance(c, dict)]
    return {"night": rel.as_posix(), "suite": meta.get("name") or night.parent.name, "kind": rel.parts[0],
            "stamp": stamp_of(night), "file": meta.get("file") if isinstance(meta.get("file"), str) else None,
            "description": meta.get("description"), "cells": json.dumps(cells),
            "progress": json.dumps(progress), "sig": sig}


def cells_of(progress: list[dict[str, Any]]) -> dict[str, str]:
    """Run directory (below its night) → cell, from a night's progress entries."""
    return {e["run"]: str(e.get("cell")) for e in progress if isinstance(e.get("run"), str) and e.get("cell")}


def walk(root: Path, top: Path) -> Iterator[tuple[str, Path, Path | None]]:
    """("night", dir, None) for each suite night and ("run", dir, its night or None) for each run below `top`
    (inside `root`): no symbolic links, no hidden names, not into a run."""
    nights: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        if here != root and STATE_FILE in filenames:
            nights.append(here)
            yield "night", here, None
        if here != root and "history.jsonl" in filenames:
            yield "run", here, next((n for n in reversed(nights) if n in here.parents), None)
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                             and not os.path.islink(os.path.join(dirpath, d)))


class RunIndex:
    """The index of the store at `root`, in `root/index.sqlite` (in memory when the store cannot hold it)."""

    def __init__(self, root: Path, in_memory: bool = False):
        self.root = Path(root).resolve()
        self.path = None if in_memory else self.root / INDEX_FILE
        self.conn = self._connect()

    def _connect(self) -> sqlite3.Connection:
        """Open the file (WAL, waiting for other writers), making or remaking the schema when it is not ours."""
        for attempt in (1, 2):
            try:
                conn = sqlite3.connect(str(self.path) if self.path else ":memory:", timeout=BUSY_MS / 1000,
                                       isolation_level=None, check_same_thread=False)
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
                if self.path:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")  # in WAL: a crash loses no committed transaction
                if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    self._make_schema(conn)
                return conn
            except sqlite3.DatabaseError as e:
                if self.path is None or attempt == 2 or isinstance(e, sqlite3.OperationalError) and \
                        "locked" in str(e):
                    raise
                log.warning("%s: %s; rebuilding it from the run directories", self.path, e)
                for suffix in ("", "-wal", "-shm"):  # not a database: the run directories rebuild it
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        raise AssertionError("unreachable")

    @staticmethod
    def _make_schema(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:  # another process may have
                for t in ("runs", "nights"):
                    conn.execute(f"DROP TABLE IF EXISTS {t}")
                for stmt in filter(str.strip, SCHEMA.split(";")):
                    conn.execute(stmt)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _write(self, runs: list[dict[str, Any]], nights: list[dict[str, Any]], gone_runs: Sequence[str] = (),
               gone_nights: Sequence[str] = (), wipe: str | None = None) -> None:
        """One transaction: delete (everything under `wipe`, or the rows named gone), then upsert the rows."""
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            if wipe is not None:
                for table, col in (("runs", "run"), ("nights", "night")):
                    c.execute(f"DELETE FROM {table} WHERE {BELOW.format(col)}", (wipe,) * 4)
            c.executemany("DELETE FROM runs WHERE run = ?", [(r,) for r in gone_runs])
            c.executemany("DELETE FROM nights WHERE night = ?", [(n,) for n in gone_nights])
            c.executemany(f"INSERT OR REPLACE INTO runs ({','.join(RUN_COLUMNS)}) VALUES "
                          f"({','.join('?' * len(RUN_COLUMNS))})", [tuple(r[k] for k in RUN_COLUMNS) for r in runs])
            c.executemany(f"INSERT OR REPLACE INTO nights ({','.join(NIGHT_COLUMNS)}) VALUES "
                          f"({','.join('?' * len(NIGHT_COLUMNS))})",
                          [tuple(n[k] for k in NIGHT_COLUMNS) for n in nights])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def _rel(self, top: Path | None) -> str:
        rel = Path(top).resolve().relative_to(self.root).as_posix() if top is not None else ""
        return "" if rel == "." else rel

    def refresh(self, top: Path | None = None, rebuild: bool = False) -> Refreshed:
        """Bring the rows below `top` (default: the whole store) up to date with the run directories: read again
        the runs and nights whose files changed, add the new, drop the gone. `rebuild` reads every one again and
        replaces the rows in one transaction."""
        top = Path(top).resolve() if top is not None else self.root
        prefix = self._rel(top)
        args = (prefix,) * 4
        known_runs = dict(self.conn.execute(f"SELECT run, sig FROM runs WHERE {BELOW.format('run')}", args).fetchall())
        known_nights = dict(self.conn.execute(f"SELECT night, sig FROM nights WHERE {BELOW.format('night')}",
                                              args).fetchall())
        runs, nights, seen_runs, seen_nights = [], [], set(), set()
        suites: dict[Path, tuple[str | None, dict[str, str]]] = {}
        for kind, d, night in walk(self.root, top) if top.is_dir() else ():
            rel = d.relative_to(self.root).as_posix()
            if kind == "night":
                seen_nights.add(rel)
                row = night_row(self.root, d) if rebuild or known_nights.get(rel) != _sig(d, NIGHT_FILES) else None
                if row:
                    nights.append(row)
                if row is None:
                    row = _decoded(self.conn.execute("SELECT suite, progress FROM nights WHERE night = ?",
                                                     (rel,)).fetchone())
                    row["progress"] = row["progress"] or []
                else:
                    row = {**row, "progress": json.loads(row["progress"])}
                suites[d] = (row["suite"], cells_of(row["progress"]))
            else:
                seen_runs.add(rel)
                if rebuild or known_runs.get(rel) != _sig(d, RUN_FILES):
                    suite, cells = suites.get(night, (None, {})) if night else (None, {})
                    runs.append(run_row(self.root, d, night, suite, cells))
        gone_r, gone_n = sorted(set(known_runs) - seen_runs), sorted(set(known_nights) - seen_nights)
        if runs or nights or gone_r or gone_n or rebuild:
            self._write(runs, nights, gone_r, gone_n, wipe=prefix if rebuild else None)
        return Refreshed(len(seen_runs), len(seen_nights), len(runs) + len(nights), len(gone_r) + len(gone_n),
                         rebuild or not (known_runs or known_nights))

    def add_run(self, run: Path, night: Path | None = None) -> None:
        """Index one run directory now (inside suite night `night`, if any), with its night's row."""
        run, night = Path(run).resolve(), Path(night).resolve() if night is not None else None
        nrow = night_row(self.root, night) if night is not None else None
        cells = cells_of(json.loads(nrow["progress"])) if nrow else {}
        self._write([run_row(self.root, run, night, nrow["suite"] if nrow else None, cells)], [nrow] if nrow else [])

    def add_night(self, night: Path) -> None:
        """Index one suite night's suite.json and progress.jsonl now."""
        self._write([], [night_row(self.root, Path(night).resolve())])

    def runs(self, top: Path | None = None, night: str | None = None) -> list[dict[str, Any]]:
        """The run rows below `top` (or of suite night `night`, a path below the store), by path."""
        if night is not None:
            cur = self.conn.execute("SELECT * FROM runs WHERE night = ? ORDER BY run", (night,))
        else:
            prefix = self._rel(top)
            cur = self.conn.execute(f"SELECT * FROM runs WHERE {BELOW.format('run')}", (prefix,) * 4)
        return sorted((_decoded(r) for r in cur.fetchall()), key=lambda r: r["run"].split("/"))

    def nights(self, suite: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """The suite nights (of `suite` in folder `kind`, if given), oldest first."""
        cur = self.conn.execute("SELECT * FROM nights WHERE (? IS NULL OR suite = ?) AND (? IS NULL OR kind = ?) "
                                "ORDER BY stamp, night", (suite, suite, kind, kind))
        return [_decoded(r) for r in cur.fetchall()]


def _decoded(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    for k in ("failed", "allowed", "test", "results", "cells", "progress"):
        if k in out and isinstance(out[k], str):
            out[k] = json.loads(out[k])
    return out


def index_for(path: Path) -> RunIndex:
    """The index that covers `path`: the store's, found in `path` or a directory above it; otherwise an index kept
    in memory with `path` as its root (a directory of runs that is not a store)."""
    path = Path(path).resolve()
    for d in (path, *path.parents):
        if (d / INDEX_FILE).is_file():
            return RunIndex(d)
    return RunIndex(path, in_memory=True)


def open_store_index(root: Path) -> RunIndex:
    """The index of the store at `root`, made if missing; in memory when the store is not writable."""
    try:
        return RunIndex(root)
    except sqlite3.OperationalError as e:
        if "locked" in str(e):
            raise
        log.warning("%s: cannot keep an index there (%s); keeping it in memory", root, e)
        return RunIndex(root, in_memory=True)
