"""One-off checks on a warm Spark: `kchaos serve --warm-check` answers `kchaos check` for the runs below its store.

A `kchaos check RUN` pays Spark's start (a JVM and its Python workers, several seconds) for a job that takes
about one. A `CheckService` keeps one process's Spark session and checks runs for other processes: it listens on
a Unix socket at the store's root (`SOCKET`, a hidden name that `serve` never lists or serves, readable and
writable by its owner only), reads one request a connection, checks the run with the function it was given, and
answers with the run's results. `ask` is the other side: `kchaos check` finds the socket of the nearest store
above the run, and checks locally, as before, when nothing answers there.

Requests are one JSON line each way: `{"run": PATH, "report": true|false}` in (`report`: rewrite the run's
report.html too, as `kchaos check` does; a `kchaos run` writes its own once it has explained the results);
`{"results": {...}, "said": [LINE, ...]}` (the lines the check said as it went, such as where it wrote the
report), or `{"error": LINE, "input": true|false}` out. An input error (not a run, a damaged history) is the
check's own answer; any other error lets the caller check locally. Checks run one at a time: they share the
process's Spark context.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("kchaos.warm_check")

SOCKET = ".kchaos-check.sock"
MAX_REQUEST = 64 * 1024
# A check of a large history takes minutes; one of a demo run, a second or two.
ANSWER_TIMEOUT_S = 3600.0


class CheckRefused(Exception):
    """The service checked the run and found bad input: the message is the check's own one-line error."""


def socket_for(path: Path) -> Path | None:
    """The check socket of the nearest directory at or above `path` that has one, or None."""
    here = Path(path).resolve()
    for d in (here, *here.parents):
        s = d / SOCKET
        if s.is_socket():
            return s
    return None


def ask(path: Path, timeout: float = ANSWER_TIMEOUT_S, report: bool = True
        ) -> tuple[dict[str, Any], list[str], Path] | None:
    """The results of checking the run at `path` by the service of the nearest store above it (rewriting its
    report.html when `report`), the lines the check said, and that store's root; None when no service answers
    there (no socket, a stale one, a service that failed), so the caller checks locally. Raises CheckRefused when
    the service found the input bad."""
    sock_path = socket_for(path)
    if sock_path is None:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(str(sock_path))
            s.settimeout(timeout)
            s.sendall(json.dumps({"run": str(Path(path).resolve()), "report": report}).encode() + b"\n")
            answer = json.loads(_read_line(s))
    except (OSError, ValueError) as e:
        log.info("no warm check at %s (%s): checking here", sock_path, e)
        return None
    if "results" in answer:
        return answer["results"], [str(x) for x in answer.get("said") or []], sock_path.parent
    if answer.get("input"):
        raise CheckRefused(answer.get("error") or "refused")
    log.info("the warm check at %s failed (%s): checking here", sock_path, answer.get("error"))
    return None


def _read_line(s: socket.socket) -> bytes:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


class CheckService:
    """Checks runs below `root` for other processes, one at a time, with `check` (a run directory, a function for
    the lines it says and whether to rewrite the run's report in, its results out; it raises `input_errors` for
    bad input). `start` binds the socket and returns; `close` removes it."""

    def __init__(self, root: Path, check: Callable[[Path, Callable[[str], Any], bool], dict[str, Any]],
                 input_errors: tuple[type[BaseException], ...] = ()):
        self.root = Path(root).resolve()
        self.path = self.root / SOCKET
        self._check = check
        self._input_errors = input_errors
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None

    def start(self) -> None:
        """Listen at `path`, replacing a socket nobody answers on; raise OSError when another service answers
        there or the socket cannot be made."""
        if self.path.is_socket() or self.path.exists():
            if answers(self.path):
                raise OSError(f"{self.path}: another kchaos serve already checks this store")
            self.path.unlink()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is its owner's alone from the moment it exists
        try:
            s.bind(str(self.path))
        finally:
            os.umask(old)
        s.listen(8)
        self._sock = s
        threading.Thread(target=self._accept, name="warm-check", daemon=True).start()

    def close(self) -> None:
        """Stop listening and remove the socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> CheckService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="warm-check-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(10.0)
                line = _read_line(conn)
                if len(line) > MAX_REQUEST:
                    raise ValueError("request too long")
                request = json.loads(line)
                answer = self._answer(Path(request["run"]).resolve(), bool(request.get("report", True)))
            except (OSError, ValueError, KeyError, TypeError) as e:
                answer = {"error": f"bad request: {e}", "input": False}
            try:
                conn.sendall(json.dumps(answer, default=str).encode() + b"\n")
            except OSError:
                pass

    def _answer(self, run: Path, report: bool) -> dict[str, Any]:
        if run != self.root and self.root not in run.parents:
            return {"error": f"{run}: not below {self.root}", "input": False}
        with self._lock:
            said: list[str] = []
            try:
                return {"results": self._check(run, said.append, report), "said": said}
            except self._input_errors as e:
                return {"error": str(e).splitlines()[0] if str(e) else type(e).__name__, "input": True}
            except Exception as e:
                log.exception("warm check of %s failed", run)
                return {"error": f"{type(e).__name__}: {e}", "input": False}


def answers(path: Path) -> bool:
    """Whether a service listens on the socket `path` (one a killed service left behind answers nobody)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(path))
        return True
    except OSError:
        return False
