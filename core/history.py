"""The history: every operation, appended to `history.jsonl` and flushed within FLUSH_S.

One JSON object per line, in the order events happened; see docs/history.md.
Lines are buffered and a background thread hands them to the OS every
FLUSH_S (a write per line would cap a pipelined workload). A harness killed
mid-run leaves every line older than FLUSH_S, plus at worst one truncated
last line, which readers tolerate.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OP_TYPES = ("invoke", "ok", "fail", "info")
FLUSH_S = 0.05


class HistoryError(ValueError):
    """A history line that cannot be read; the message names the line."""


@dataclass(frozen=True)
class Op:
    """One recorded event: an invocation or a completion."""

    process: int | str
    type: str
    f: str
    fields: dict[str, Any]

    def completion(self, type_: str, **fields: Any) -> Op:
        """The completion of this invocation, carrying its partition/topic/value unless overridden."""
        keep = {k: v for k, v in self.fields.items() if k in ("topic", "partition", "value")}
        return Op(self.process, type_, self.f, {**keep, **fields})


class History:
    """Thread-safe append-only history file. `append` assigns index and time; lines reach the OS
    within FLUSH_S (at once, and fsynced, with `fsync=True`).

    The flusher waits FLUSH_S between passes with `wait(closed, FLUSH_S)`, true once the history is
    closed: `threading.Event.wait` on the real clock, unless a test passes a manual clock's."""

    def __init__(self, path: Path, *, fsync: bool = False,
                 wait: Callable[[threading.Event, float], bool] = threading.Event.wait):
        self.path = Path(path)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._t0 = time.monotonic_ns()
        self._index = 0
        self._fsync = fsync
        self._closed = threading.Event()
        self._wait = wait
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flush", daemon=True)
        self._flusher.start()

    @property
    def t0_ns(self) -> int:
        """The CLOCK_MONOTONIC reading `time` counts from: other processes record on the same clock."""
        return self._t0

    def now(self) -> int:
        """Nanoseconds since the history was opened (monotonic)."""
        return time.monotonic_ns() - self._t0

    def _flush_loop(self) -> None:
        while not self._wait(self._closed, FLUSH_S):
            with self._lock:
                if not self._fh.closed:
                    self._fh.flush()

    def append(self, op: Op) -> dict[str, Any]:
        """Write `op` as the next line; return the written record."""
        if op.type not in OP_TYPES:
            raise ValueError(f"bad op type {op.type!r}")
        with self._lock:
            rec = {"index": self._index, "time": self.now(), "process": op.process,
                   "type": op.type, "f": op.f, **op.fields}
            self._fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
            if self._fsync:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._index += 1
        return rec

    def invoke(self, process: int | str, f: str, **fields: Any) -> Op:
        """Record an invocation and return it, to complete later with `complete`."""
        op = Op(process, "invoke", f, fields)
        self.append(op)
        return op

    def complete(self, invoke: Op, type_: str, **fields: Any) -> dict[str, Any]:
        """Record the completion (ok/fail/info) of `invoke`."""
        return self.append(invoke.completion(type_, **fields))

    def close(self) -> None:
        """Flush and close; later appends raise."""
        self._closed.set()
        with self._lock:
            if not self._fh.closed:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a history file.

    A final line without a newline that is not valid JSON is the harmless tail
    of a killed run and is skipped; any other bad line raises HistoryError
    naming its line number.
    """
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines) and not line.endswith("\n"):
                return
            raise HistoryError(f"{path}:{n}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise HistoryError(f"{path}:{n}: not a JSON object")
        if rec.get("type") not in OP_TYPES:
            raise HistoryError(f"{path}:{n}: unknown type {rec.get('type')!r}")
        if "process" not in rec or "f" not in rec:
            raise HistoryError(f"{path}:{n}: missing 'process' or 'f'")
        yield rec
