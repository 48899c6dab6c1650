"""What `kchaos serve` shows of a results store: its suites and runs read through a cache, rendered as pages.

A run's verdict is checkers.verdict.judge's word from results.json's essentials and test.json, coloured by
severity (reports/severity.py); the index lists every run of the store, those inside suites too.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from checkers.verdict import FAIL, PASS, UNKNOWN, essentials, judge, of_valid
from core.suite_files import STATE_FILE, latest, read_progress
from reports.html import render
from reports.severity import level

log = logging.getLogger("kchaos.serve")

STAMP = re.compile(r"^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)")


def href(parts: tuple[str, ...] | list[str], is_dir: bool = False) -> str:
    """The URL path of `parts` below the store (a trailing slash for a directory)."""
    path = "/" + "/".join(quote(p, safe="") for p in parts)
    return path + "/" if is_dir and parts else path


def _get(d: Any, *path: str) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def _stamp(d: Path) -> str:
    if STAMP.match(d.name):
        return d.name
    try:
        return datetime.fromtimestamp(d.stat().st_mtime, timezone.utc).strftime("%Y%m%dT%H%M%S")
    except OSError:
        return ""


def _when(stamp: str) -> str:
    m = STAMP.match(stamp)
    return f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}:{m[6]}Z" if m else stamp


SUITE_FILES = ("compare.html", "compare.csv", "report.xml", "suite.yaml", "suite.json")


class Store:
    """The store below `root` (resolved): what is in it, read through a cache keyed by mtime and size, and the
    page of each of its directories."""

    def __init__(self, root: Path):
        self.root = root
        self._cache: dict[tuple[str, Any], tuple[int, int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def rel(self, real: Path) -> tuple[str, ...] | None:
        """`real` (resolved) relative to the root, as parts; None if it is outside."""
        try:
            return real.relative_to(self.root).parts
        except ValueError:
            return None

    def json(self, path: Path, slim: Callable[[dict[str, Any]], dict[str, Any]] | None = None
             ) -> dict[str, Any] | None:
        """The JSON object in `path` (only what `slim` keeps of it, if given): None if absent, {} if unreadable."""
        try:
            st = path.stat()
        except OSError:
            return None
        with self._lock:
            hit = self._cache.get((str(path), slim))
        if hit and hit[:2] == (st.st_mtime_ns, st.st_size):
            return hit[2]
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("%s: unreadable (%s)", path, e)
            value = {}
        value = value if isinstance(value, dict) else {}
        if slim:  # keep only what pages show: results.json can be megabytes
            value = slim(value)
        with self._lock:
            self._cache[(str(path), slim)] = (st.st_mtime_ns, st.st_size, value)
        return value

    def scan(self, top: Path) -> tuple[list[Path], list[tuple[Path, Path | None]]]:
        """(suite directories, run directories each with the suite it belongs to or None) below `top`: every run,
        those inside suites too; not descending into a run; no symlinks or hidden names."""
        suites: list[Path] = []
        runs: list[tuple[Path, Path | None]] = []
        known: set[Path] = set()
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            if dirpath != str(top) and "suite.json" in filenames:
                suites.append(here)
                known.add(here)
            if dirpath != str(top) and "history.jsonl" in filenames:
                runs.append((here, next((p for p in here.parents if p in known), None)))
                dirnames[:] = []
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and not os.path.islink(os.path.join(dirpath, d)))
        return suites, runs

    def run_info(self, run: Path, suite: Path | None = None) -> dict[str, Any]:
        """A runs-table row for `run` (inside `suite`, if given), from test.json and results.json's essentials: the
        verdict as checkers.verdict.judge gives it, coloured by severity, and the counts."""
        test = self.json(run / "test.json") or {}
        res = self.json(run / "results.json", essentials)
        rel = self.rel(run) or ()
        names = _get(test, "nemesis", "names")
        stamp = _stamp(run)
        j = judge(res, test) if res is not None else None
        lost, acked = _get(res, "counts", "lost"), _get(res, "counts", "acked")
        srel = self.rel(suite) if suite is not None else None
        return {"rel": rel, "href": href(rel, True), "name": test.get("name") or run.parent.name, "stamp": stamp,
                "started": _when(stamp), "checked": res is not None, "verdict": j.verdict if j else UNKNOWN,
                "severity": level(j.verdict, lost, acked, bool(j.allowed)) if j else "unknown",
                "suite": None if srel is None else {"href": href(srel, True), "name": "/".join(srel[-2:])},
                "acks": _get(test, "producer", "acks"), "min_insync": _get(test, "topic", "min_insync"),
                "nemesis": ",".join(map(str, names)) if isinstance(names, list) else None,
                "acked": acked, "lost": lost,
                "files": [(href(rel + ("report.html",)) if (run / "report.html").is_file() else None, "report"),
                          (href(rel + ("results.json",)) if res is not None else None, "results.json"),
                          (href(rel + ("history.jsonl",)), "history.jsonl"), (href(rel, True), "files")]}

    def suite_info(self, suite: Path) -> dict[str, Any]:
        """A suite's name, stamp, run rows (progress.jsonl's cell, rep, status + run_info) and verdict counts."""
        from dataclasses import asdict

        meta = self.json(suite / STATE_FILE) or {}
        entries = [asdict(e) for e in latest(read_progress(suite)).values()]
        if not entries:  # nothing recorded yet: every run below the suite
            entries = [{"run": str(r.relative_to(suite))} for r, _ in sorted(self.scan(suite)[1])]
        runs = []
        for e in (e if isinstance(e, dict) else {} for e in entries):
            where = [(base / e["run"]).resolve() for base in (suite, self.root) if isinstance(e.get("run"), str)]
            run = next((p for p in where if self.rel(p) is not None and (p / "history.jsonl").is_file()), None)
            info = self.run_info(run) if run else {"checked": False, "verdict": UNKNOWN, "severity": "unknown"}
            if not info["checked"] and (e.get("verdict") or e.get("valid") is not None):  # gone: progress's word
                word = e.get("verdict") or of_valid(e.get("valid"))
                info.update(checked=True, verdict=word, severity=level(word))
            cell = e.get("cell")
            cell = " ".join(f"{k}={v}" for k, v in cell.items()) if isinstance(cell, dict) else cell
            runs.append({**info, "cell": cell, "rep": e.get("rep"), "status": e.get("status")})
        v = [r["verdict"] if r["checked"] else UNKNOWN for r in runs]
        rel = self.rel(suite) or ()
        return {"rel": rel, "href": href(rel, True), "name": meta.get("name") or suite.parent.name,
                "file": meta.get("file"), "stamp": _stamp(suite), "started": _when(_stamp(suite)), "run_rows": runs,
                "runs": len(runs), "pass": v.count(PASS), "fail": v.count(FAIL), "unknown": v.count(UNKNOWN),
                "files": [(href(rel + (f,)) if (suite / f).is_file() else None, f) for f in SUITE_FILES]}

    def page(self, real: Path, rel: tuple[str, ...]) -> str:
        """The HTML page for directory `real`: suite, run, index or listing."""
        crumbs = [("/", self.root.name or "store")] + [(href(rel[:i + 1], True), p) for i, p in enumerate(rel)]
        page: dict[str, Any] = {"crumbs": crumbs, "path": "/".join(rel), "listing": self._listing(real, rel)}
        if (real / "suite.json").is_file():
            page["suite"] = self.suite_info(real)
        elif (real / "history.jsonl").is_file():
            r = page["run"] = self.run_info(real)
            test = self.json(real / "test.json") or {}
            res = self.json(real / "results.json", essentials)
            counts = _get(res, "counts")
            page["counts"] = counts if isinstance(counts, dict) else {}
            page["judgement"] = judge(res, test) if res is not None else None
            page["settings"] = {"acks": r["acks"], "min.insync.replicas": r["min_insync"],
                                "unclean election": _get(test, "topic", "unclean"),
                                "idempotence": _get(test, "producer", "idempotence"), "nemeses": r["nemesis"],
                                "seed": test.get("seed"), "time limit (s)": test.get("time_limit"),
                                "nodes": _get(test, "cluster", "nodes"),
                                "kafka": _get(test, "cluster", "kafka_version")}
        elif real == self.root:
            suites, runs = self.scan(self.root)
            latest = (self.root / "latest").resolve()
            shown = (self.root / "latest").is_symlink() and latest.is_dir() and self.rel(latest)
            page["index"] = {"name": self.root.name, "latest": "/".join(self.rel(latest) or ()) if shown else None,
                             "suites": sorted(map(self.suite_info, suites), key=lambda x: (x["stamp"], x["rel"]),
                                              reverse=True),
                             "runs": sorted((self.run_info(r, s) for r, s in runs), key=lambda x: (x["stamp"], x["rel"]),
                                            reverse=True)}
        return render("serve.html.j2", **page)

    def _listing(self, d: Path, rel: tuple[str, ...]) -> list[dict[str, Any]]:
        """The entries of directory `d` that may be shown (directories first): link, size, modification time."""
        rows = []
        try:
            entries = sorted(os.scandir(d), key=lambda e: (not e.is_dir(), e.name))
        except OSError:
            entries = []
        for e in (e for e in entries if not e.name.startswith(".")):
            try:
                real = Path(e.path).resolve(strict=True)
                st = real.stat()
            except (OSError, RuntimeError):
                continue
            inside = self.rel(real)
            if inside is None or any(p.startswith(".") for p in inside):
                continue  # a symlink out of the store, or into a hidden place
            is_dir = real.is_dir()
            rows.append({"href": href(rel + (e.name,), is_dir), "name": e.name + ("/" if is_dir else ""),
                         "size": None if is_dir else st.st_size,
                         "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")})
        return rows
