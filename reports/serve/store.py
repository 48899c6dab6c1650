"""What `kchaos serve` shows of a results store: its suites, their nights and its runs, read from the store's
results index, rendered as pages.

A run's verdict is checkers.verdict.judge's word from results.json's essentials and test.json, coloured by
severity; the index lists every run of the store, those inside suites too. A suite's folder
(`/suites/<suite>/`) shows the suite across its nights, regressions first.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from kchaos.checkers.verdict.judge import FAIL, PASS, UNKNOWN, judge, of_valid
from kchaos.reports.html import render, yes
from kchaos.reports.serve.trend import trend_page
from kchaos.reports.serve.versions import version_table
from kchaos.reports.severity import level
from kchaos.reports.suite.regressions import Regression, of_night
from kchaos.reports.suite.run_index import INDEX_FILE, RunIndex, open_store_index
from kchaos.reports.suite.trends import trend, when

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


def _when(stamp: str) -> str:
    m = STAMP.match(stamp)
    return f"{m[1]}-{m[2]}-{m[3]} {m[4]}:{m[5]}:{m[6]}Z" if m else stamp


SUITE_FILES = ("compare.html", "compare.csv", "report.xml", "suite.yaml", "suite.json")


class Store:
    """The store below `root` (resolved): what is in it, read through the store's results index
    (refreshed for the part a page shows), and the page of each of its directories."""

    def __init__(self, root: Path):
        self.root = root
        self._index: RunIndex | None = None
        self._lock = threading.Lock()  # one connection, many request threads

    def rel(self, real: Path) -> tuple[str, ...] | None:
        """`real` (resolved) relative to the root, as parts; None if it is outside."""
        try:
            return real.relative_to(self.root).parts
        except ValueError:
            return None

    def _opened(self) -> RunIndex:
        """The store's index, opened on first use; the caller holds the lock."""
        if self._index is None:
            self._index = open_store_index(self.root)
        return self._index

    def _rows(self, top: Path | None = None, night: str | None = None) -> list[dict[str, Any]]:
        """The index's run rows below `top` (or of a suite night), after bringing that part up to date."""
        with self._lock:
            index = self._opened()
            index.refresh(top if night is None else self.root / night)
            return index.runs(top, night=night)

    def _nights(self, top: Path | None = None, refresh: bool = True) -> list[dict[str, Any]]:
        """The index's suite nights at or below `top` (default: all), oldest first, after bringing them up to date."""
        with self._lock:
            index = self._opened()
            if refresh:
                index.refresh(top)
            rel = "/".join(self.rel(top) or ()) if top is not None else ""
            return [n for n in index.nights() if not rel or n["night"] == rel or n["night"].startswith(rel + "/")]

    def _info(self, row: dict[str, Any]) -> dict[str, Any]:
        """A runs-table row from an index row: the verdict (checkers.verdict.judge's, kept in the index) coloured by
        severity, the settings, the counts and the links."""
        test = row["test"] or {}
        rel = tuple(row["run"].split("/"))
        names = _get(test, "nemesis", "names")
        night = tuple(row["night"].split("/")) if row["night"] else None
        return {"rel": rel, "href": href(rel, True), "name": row["name"], "stamp": row["stamp"],
                "started": _when(row["stamp"]), "checked": bool(row["checked"]), "verdict": row["verdict"] or UNKNOWN,
                "severity": row["severity"], "row": row,
                "suite": None if night is None else {"href": href(night, True), "name": "/".join(night[-2:])},
                "acks": _get(test, "producer", "acks"), "min_insync": _get(test, "topic", "min_insync"),
                "nemesis": ",".join(map(str, names)) if isinstance(names, list) else None,
                "acked": row["acked"], "lost": row["lost"],
                "files": [(href(rel + ("report.html",)) if row["has_report"] else None, "report"),
                          (href(rel + ("results.json",)) if row["checked"] else None, "results.json"),
                          (href(rel + ("history.jsonl",)), "history.jsonl"), (href(rel, True), "files")]}

    def run_info(self, run: Path) -> dict[str, Any]:
        """A runs-table row for run directory `run` (the index knows the suite night it belongs to)."""
        rows = self._rows(run)
        row = next((r for r in rows if r["run"] == "/".join(self.rel(run) or ())), None)
        if row is None:
            raise ValueError(f"{run}: not a run directory of {self.root}")
        return self._info(row)

    def suite_info(self, night: dict[str, Any], runs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """A suite night's name, stamp, run rows (progress.jsonl's cell, rep, status + the run's row) and verdict
        counts, from its index row (and its runs' rows, when the caller has them)."""
        suite = self.root / night["night"]
        by_rel = {r["run"]: r for r in (runs if runs is not None else self._rows(night=night["night"]))}
        entries = night["progress"] or [{"run": str(PurePosixPath(r).relative_to(night["night"]))}
                                        for r in sorted(by_rel)]  # nothing recorded yet: every run below it
        out = []
        for e in (e if isinstance(e, dict) else {} for e in entries):
            rel = (PurePosixPath(night["night"]) / e["run"]).as_posix() if isinstance(e.get("run"), str) else None
            row = by_rel.get(rel) if rel else None
            info = self._info(row) if row else {"checked": False, "verdict": UNKNOWN, "severity": "unknown"}
            if not info["checked"] and (e.get("verdict") or e.get("valid") is not None):  # gone: progress's word
                word = e.get("verdict") or of_valid(e.get("valid"))
                info.update(checked=True, verdict=word, severity=level(word))
            cell = e.get("cell")
            cell = " ".join(f"{k}={v}" for k, v in cell.items()) if isinstance(cell, dict) else cell
            out.append({**info, "cell": cell, "rep": e.get("rep"), "status": e.get("status")})
        v = [r["verdict"] if r["checked"] else UNKNOWN for r in out]
        rel = tuple(night["night"].split("/"))
        return {"rel": rel, "href": href(rel, True), "name": night["suite"], "file": night["file"],
                "stamp": night["stamp"], "started": _when(night["stamp"]), "run_rows": out, "runs": len(out),
                "pass": v.count(PASS), "fail": v.count(FAIL), "unknown": v.count(UNKNOWN),
                "trend": href(rel[:2], True) if len(rel) == 3 else None,
                "files": [(href(rel + (f,)) if (suite / f).is_file() else None, f) for f in SUITE_FILES]}

    def _night_regressions(self, night: dict[str, Any]) -> tuple[list[Regression], str | None]:
        """The regressions of suite night `night` (an index row) against the nights of its suite before it, and
        when the night before it started (None: the suite's first night, or a night no cell ran)."""
        with self._lock:
            tr = trend(self._opened(), night["suite"], night["kind"], last=10_000)
        regs, before = of_night(tr, night["night"])
        return regs, when(before.stamp) if before else None

    def page(self, real: Path, rel: tuple[str, ...]) -> str:
        """The HTML page for directory `real`: suite night, suite across nights, run, index or listing."""
        crumbs = [("/", self.root.name or "store")] + [(href(rel[:i + 1], True), p) for i, p in enumerate(rel)]
        page: dict[str, Any] = {"crumbs": crumbs, "path": "/".join(rel), "listing": self._listing(real, rel)}
        nights = self._nights(real) if (real / "suite.json").is_file() or len(rel) == 2 else []
        if (real / "suite.json").is_file() and nights:
            page["suite"] = self.suite_info(nights[0])
            if page["suite"]["trend"]:
                page["regressions"], page["regressions_since"] = self._night_regressions(nights[0])
        elif len(rel) == 2 and rel[0] in ("suites", "scenarios") and nights:
            with self._lock:
                page["trend"] = trend_page(self._opened(), nights[-1]["suite"], rel[0], self.root)

        elif (real / "history.jsonl").is_file():
            r = page["run"] = self.run_info(real)
            test, res = r["row"]["test"] or {}, r["row"]["results"]
            counts = _get(res, "counts")
            page["counts"] = counts if isinstance(counts, dict) else {}
            page["judgement"] = judge(res, test) if res is not None else None
            page["settings"] = {"acks": r["acks"], "min.insync.replicas": r["min_insync"],
                                "unclean election": yes(_get(test, "topic", "unclean")),
                                "idempotence": yes(_get(test, "producer", "idempotence")), "nemeses": r["nemesis"],
                                "seed": test.get("seed"), "time limit (s)": test.get("time_limit"),
                                "nodes": _get(test, "cluster", "nodes"),
                                "kafka": _get(test, "cluster", "kafka_version")}
        elif real == self.root:
            runs = self._rows()
            by_night: dict[str, list[dict[str, Any]]] = {}
            for r in runs:
                by_night.setdefault(r["night"], []).append(r)
            latest = (self.root / "latest").resolve()
            shown = (self.root / "latest").is_symlink() and latest.is_dir() and self.rel(latest)
            page["index"] = {"name": self.root.name, "latest": "/".join(self.rel(latest) or ()) if shown else None,
                             "suites": sorted((self.suite_info(n, by_night.get(n["night"], []))
                                               for n in self._nights(refresh=False)),
                                              key=lambda x: (x["stamp"], x["rel"]),
                                              reverse=True),
                             "runs": sorted(map(self._info, runs), key=lambda x: (x["stamp"], x["rel"]), reverse=True)}
        if rel[:1] == ("scenarios",) and len(rel) <= 2:  # every scenario's variants by Kafka line, or one's
            page["versions"] = version_table(self.root / "scenarios", self.root, href,
                                             only=rel[1] if len(rel) == 2 else None)
        return render("serve.html.j2", **page)

    def _listing(self, d: Path, rel: tuple[str, ...]) -> list[dict[str, Any]]:
        """The entries of directory `d` that may be shown (directories first): link, size, modification time."""
        rows = []
        try:
            entries = sorted(os.scandir(d), key=lambda e: (not e.is_dir(), e.name))
        except OSError:
            entries = []
        for e in (e for e in entries if not e.name.startswith(".") and not e.name.startswith(INDEX_FILE + "-")):
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
                         "modified": datetime.fromtimestamp(st.st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%SZ")})
        return rows
