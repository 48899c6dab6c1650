"""`kchaos serve`: browse a results store on a local web page (standard library http.server only).

A URL path is a path below the store root. A suite directory (holding suite.json), a run directory
(holding history.jsonl) and the root get pages of their own; any other directory gets a listing and
any file is served as it is. Nothing outside the root, and no hidden name, is ever listed or served.
"""
from __future__ import annotations

import errno
import http.server
import ipaddress
import logging
import os
import shutil
import socket
import socketserver
import sys
from collections.abc import Callable
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from kchaos.reports import ReportsInputError
from kchaos.reports.serve.store import Store
from kchaos.reports.serve.store import href as _href

__all__ = ["ServeError", "make_server", "serve", "server_url"]

log = logging.getLogger("kchaos.serve")

TEXT = "text/plain; charset=utf-8"
TYPES = {".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8", ".png": "image/png",
         ".svg": "image/svg+xml", ".json": "application/json; charset=utf-8", ".csv": "text/csv; charset=utf-8",
         ".xml": "text/xml; charset=utf-8", ".parquet": "application/octet-stream",
         **{s: TEXT for s in (".jsonl", ".log", ".yaml", ".yml", ".properties", ".txt", ".out", ".err", ".md")}}
# Our own pages: no scripts, inline styles, images from data: URIs or this server.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"


class ServeError(ReportsInputError):
    """The store cannot be served: the root is not a directory, or the address cannot be bound."""


def make_server(root: Path, host: str = "127.0.0.1", port: int = 8000) -> _Server:
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
    return f"http://{_hostport(str(host), port)}/"


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
        self.store = Store(root)
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

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def _not_allowed(self) -> None:
        self._send(405, TEXT, b"only GET and HEAD\n", False, [("Allow", "GET, HEAD"), ("Connection", "close")])

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def log_message(self, format: str, *args: Any) -> None:
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


