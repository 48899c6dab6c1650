"""`kchaos serve`: browse a results store on a local web page (standard library http.server only).

A URL path is a path below the store root. A suite directory (holding suite.json), a run directory
(holding history.jsonl) and the root get pages of their own; any other directory gets a listing and
any file is served as it is. Nothing outside the root, and no hidden name, is ever listed or served.
"""
from __future__ import annotations

import errno
import http.server
import ipaddress
import json
import logging
import os
import re
import shutil
import socket
import socketserver
import sys
import threading
from datetime import datetime, timezone
from email.utils import formatdate
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, unquote, urlsplit

from reports import ReportsInputError
from reports.html import render

__all__ = ["ServeError", "make_server", "serve", "server_url"]

log = logging.getLogger("kchaos.serve")

TEXT = "text/plain; charset=utf-8"
TYPES = {".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8", ".png": "image/png",
         ".svg": "image/svg+xml", ".json": "application/json; charset=utf-8", ".csv": "text/csv; charset=utf-8",
         ".xml": "text/xml; charset=utf-8", ".parquet": "application/octet-stream",
         **{s: TEXT for s in (".jsonl", ".log", ".yaml", ".yml", ".properties", ".txt", ".out", ".err", ".md")}}
# Our own pages: no scripts, inline styles, images from data: URIs or this server.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
STAMP = re.compile(r"^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)")


class ServeError(ReportsInputError):
    """The store cannot be served: the root is not a directory, or the address cannot be bound."""


def make_server(root: Path, host: str = "127.0.0.1", port: int = 8000) -> http.server.ThreadingHTTPServer:
    """A bound, listening (not yet serving) server for the store at `root`; port 0 picks a free port.

    The caller runs `serve_forever()` and `server_close()`. Raises ServeError (one line) when `root`
    is not a directory or `host:port` cannot be bound (in use, no permission, unknown host).
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ServeError(f"{root}: not a directory")
    where = _hostport(host, port)
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ServeError(f"cannot listen on {where}: port must be 0-65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return _Server(root.resolve(), (host, port), family)
    except OSError as e:
        reason = "address already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        raise ServeError(f"cannot listen on {where}: {reason[:1].lower()}{reason[1:]}") from None


def server_url(server: http.server.HTTPServer) -> str:
    """The http:// URL of the root page of a server from make_server (its real port when 0 was asked)."""
    host, port = server.server_address[:2]
    return f"http://{_hostport(host, port)}/"


def serve(root: Path, host: str = "127.0.0.1", port: int = 8000, say: Callable[[str], Any] = print) -> None:
    """Serve the store at `root` until KeyboardInterrupt, then close the socket.

    Says the URL first (and a warning when not bound to a loopback address). Raises ServeError as
    make_server does, before anything is served.
    """
    server = make_server(root, host, port)
    try:
        say(f"serving {root} at {server_url(server)} (Ctrl-C to stop)")
        if not server.loopback:
            say(f"warning: {host} is not a loopback address: anyone who can reach it can read these results")
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _is_loopback(host: str) -> bool:
    """Whether a host name or a Host header ("name:port", "[v6]:port") names this machine's loopback."""
    host = host.strip().lower()
    host = host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # rebinding over TIME_WAIT; Linux still refuses a port someone listens on
    allow_reuse_port = False

    def __init__(self, root: Path, address: tuple[str, int], family: int):
        self.address_family = family
        self.store = _Store(root)
        self.loopback = _is_loopback(address[0])
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn); we need none.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # the client went away
            return log.debug("%s disconnected", client_address)
        log.exception("error serving %s", client_address)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    server_version = "kchaos-serve"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._route(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._route(head=True)

    def _not_allowed(self) -> None:
        self._send(405, TEXT, b"only GET and HEAD\n", False, [("Allow", "GET, HEAD"), ("Connection", "close")])

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        log.info("%s %s", self.address_string(), format % args)

    def _route(self, head: bool) -> None:
        if self.server.loopback and not _is_loopback(self.headers.get("Host", "localhost")):
            return self.send_error(403, "unexpected Host header")  # DNS rebinding
        segs = _segments(self.path)
        if segs is None:
            return self.send_error(404)
        store = self.server.store
        target = store.root.joinpath(*segs)
        try:
            real = target.resolve(strict=True)
        except (OSError, RuntimeError):
            if segs == ["favicon.ico"]:
                return self._send(204, TEXT, b"", head)
            return self.send_error(404)
        rel = store.rel(real)
        if rel is None:
            return self.send_error(403)
        if any(p.startswith(".") for p in rel):
            return self.send_error(404)
        if real.is_dir():
            if list(rel) != segs:  # through a symlink such as `latest`: go to the real place
                return self._send(302, TEXT, b"", True, [("Location", _href(rel, True))])
            if not self.path.split("?", 1)[0].split("#", 1)[0].endswith("/"):
                return self._send(301, TEXT, b"", True, [("Location", _href(rel, True))])
            return self._send(200, "text/html; charset=utf-8", store.page(real, rel).encode(), head,
                              [("Content-Security-Policy", CSP), ("Cache-Control", "no-cache")])
        if real.is_file():
            return self._file(real, head)
        return self.send_error(404)

    def _send(self, status: int, ctype: str, body: bytes, head: bool, extra: Any = (), length: int = -1) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length < 0 else length))
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _file(self, path: Path, head: bool) -> None:
        try:
            fh = open(path, "rb")
        except OSError:
            return self.send_error(403)
        with fh:
            st = os.fstat(fh.fileno())
            ctype = next((TYPES[x.lower()] for x in reversed(path.suffixes) if x.lower() in TYPES),  # server.log.1
                         "application/octet-stream" if path.suffix else TEXT)
            self._send(200, ctype, b"", True, [("Last-Modified", formatdate(st.st_mtime, usegmt=True))],
                       length=st.st_size)
            if not head:
                shutil.copyfileobj(fh, self.wfile)


def _segments(raw: str) -> list[str] | None:
    """The decoded path segments of a request target; None for anything refused (hidden, '..', NUL)."""
    if not raw.startswith("/"):
        if "://" not in raw:
            return None
        raw = urlsplit(raw).path or "/"
    path = raw.split("?", 1)[0].split("#", 1)[0]  # not urlsplit: it reads "//x/y" as host x
    try:
        decoded = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return None
    if "\x00" in decoded or "\\" in decoded:
        return None
    segs = [s for s in decoded.split("/") if s]
    return None if any(s.startswith(".") for s in segs) else segs


def _href(parts: tuple[str, ...] | list[str], is_dir: bool = False) -> str:
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


class _Store:
    """The store below `root` (resolved): what is in it, read through a cache keyed by mtime and size."""

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

    def json(self, path: Path, keys: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        """The JSON object in `path` (only `keys` if given): None if absent, {} if unreadable."""
        try:
            st = path.stat()
        except OSError:
            return None
        with self._lock:
            hit = self._cache.get((str(path), keys))
        if hit and hit[:2] == (st.st_mtime_ns, st.st_size):
            return hit[2]
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            log.warning("%s: unreadable (%s)", path, e)
            value = {}
        value = value if isinstance(value, dict) else {}
        if keys:  # keep only what pages show: results.json can be megabytes
            value = {k: value[k] for k in keys if k in value}
        with self._lock:
            self._cache[(str(path), keys)] = (st.st_mtime_ns, st.st_size, value)
        return value

    def scan(self, top: Path) -> tuple[list[Path], list[Path]]:
        """(suite directories, run directories) below `top`, not descending into either; no symlinks or hidden names."""
        suites, runs = [], []
        for dirpath, dirnames, filenames in os.walk(top):
            if dirpath != str(top) and ("suite.json" in filenames or "history.jsonl" in filenames):
                (suites if "suite.json" in filenames else runs).append(Path(dirpath))
                dirnames[:] = []
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".")
                                 and not os.path.islink(os.path.join(dirpath, d)))
        return suites, runs

    def run_info(self, run: Path) -> dict[str, Any]:
        """A runs-table row for `run`, from test.json and only results.json's "valid" and "counts"."""
        test = self.json(run / "test.json") or {}
        res = self.json(run / "results.json", ("valid", "counts"))
        rel = self.rel(run) or ()
        names = _get(test, "nemesis", "names")
        stamp = _stamp(run)
        return {"rel": rel, "href": _href(rel, True), "name": test.get("name") or run.parent.name, "stamp": stamp,
                "started": _when(stamp), "checked": res is not None, "valid": (res or {}).get("valid", "unknown"),
                "acks": _get(test, "producer", "acks"), "min_insync": _get(test, "topic", "min_insync"),
                "nemesis": ",".join(map(str, names)) if isinstance(names, list) else None,
                "acked": _get(res, "counts", "acked"), "lost": _get(res, "counts", "lost"),
                "files": [(_href(rel + ("report.html",)) if (run / "report.html").is_file() else None, "report"),
                          (_href(rel + ("results.json",)) if res is not None else None, "results.json"),
                          (_href(rel + ("history.jsonl",)), "history.jsonl"), (_href(rel, True), "files")]}

    def suite_info(self, suite: Path) -> dict[str, Any]:
        """A suite's name, stamp, run rows (progress.jsonl's cell, rep, status + run_info) and verdict counts."""
        from dataclasses import asdict

        from harness.suite_run import latest, read_progress

        meta = self.json(suite / "suite.json") or {}
        entries = [asdict(e) for e in latest(read_progress(suite)).values()]
        if not entries:  # nothing recorded yet: every run below the suite
            entries = [{"run": str(r.relative_to(suite))} for r in sorted(self.scan(suite)[1])]
        runs = []
        for e in (e if isinstance(e, dict) else {} for e in entries):
            where = [(base / e["run"]).resolve() for base in (suite, self.root) if isinstance(e.get("run"), str)]
            run = next((p for p in where if self.rel(p) is not None and (p / "history.jsonl").is_file()), None)
            info = self.run_info(run) if run else {"checked": False, "valid": "unknown"}
            if not info["checked"] and e.get("valid") is not None:  # not checked (or gone): suite.json's word
                info.update(checked=True, valid=e["valid"])
            cell = e.get("cell")
            cell = " ".join(f"{k}={v}" for k, v in cell.items()) if isinstance(cell, dict) else cell
            runs.append({**info, "cell": cell, "rep": e.get("rep"), "status": e.get("status")})
        v = [r["valid"] if r["checked"] else None for r in runs]
        rel = self.rel(suite) or ()
        return {"rel": rel, "href": _href(rel, True), "name": meta.get("name") or suite.parent.name,
                "file": meta.get("file"), "stamp": _stamp(suite), "started": _when(_stamp(suite)), "run_rows": runs,
                "runs": len(runs), "valid": sum(x is True for x in v), "invalid": sum(x is False for x in v),
                "unknown": sum(x is not True and x is not False for x in v),
                "files": [(_href(rel + (f,)) if (suite / f).is_file() else None, f) for f in SUITE_FILES]}

    def page(self, real: Path, rel: tuple[str, ...]) -> str:
        """The HTML page for directory `real`: suite, run, index or listing."""
        crumbs = [("/", self.root.name or "store")] + [(_href(rel[:i + 1], True), p) for i, p in enumerate(rel)]
        page: dict[str, Any] = {"crumbs": crumbs, "path": "/".join(rel), "listing": self._listing(real, rel)}
        if (real / "suite.json").is_file():
            page["suite"] = self.suite_info(real)
        elif (real / "history.jsonl").is_file():
            r = page["run"] = self.run_info(real)
            test = self.json(real / "test.json") or {}
            counts = _get(self.json(real / "results.json", ("valid", "counts")), "counts")
            page["counts"] = counts if isinstance(counts, dict) else {}
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
                             "runs": sorted(map(self.run_info, runs), key=lambda x: (x["stamp"], x["rel"]),
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
            rows.append({"href": _href(rel + (e.name,), is_dir), "name": e.name + ("/" if is_dir else ""),
                         "size": None if is_dir else st.st_size,
                         "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")})
        return rows
