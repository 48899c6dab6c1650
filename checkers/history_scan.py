"""What a history file shows of itself before any checker reads it: how many lines it has, whether its last line
was cut off, and its nemesis lines.

`scan(history)` reads the file once, in large chunks, at the speed of a byte search: it counts the lines and
parses only those that mention the nemesis (a few hundred in a run of millions). It raises CheckInputError, before
anything is written, for a file that holds no operation at all (empty, blank, or a single cut-off line): such a
file is not a history, and checking it would judge nothing.

A harness killed mid-run leaves at worst one cut-off last line: a final line without a newline
that is not JSON. Every checker skips it; `scan` says so (`cut_off_last_line`), so that the verdict can say it
judged the lines before it. Any other damaged line is bad input, which the checkers' own validation raises.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from kchaos.checkers.parquet import CheckInputError
from kchaos.core.faults import FaultCatalogue
from kchaos.core.history import HistoryError, read_history

__all__ = ["HistoryScan", "nemesis_section", "read_ops", "scan", "split"]

CHUNK_BYTES = 16 << 20  # bytes read at a time
_NEMESIS = b'"nemesis"'
_SOMETHING = re.compile(rb"\S")
_END_BLOCK = 64 << 10
_LINE_BLOCK = 64 << 10


@dataclass(frozen=True)
class HistoryScan:
    """One history file at a glance: `lines` (the lines the checkers judge: every complete line, and a last line
    without a newline when it is JSON), `cut_off_last_line` (a last line without a newline that is not JSON, which
    the checkers skip), `nemesis` (every nemesis line, parsed, in history order), and the history times of its
    first client line and of its last line (None when no such line carries an integer `time`)."""

    lines: int
    cut_off_last_line: bool
    nemesis: tuple[dict[str, Any], ...]
    first_client_ns: int | None = None
    last_ns: int | None = None

    def as_json(self) -> dict[str, Any]:
        """results.json's `history` section: `lines`, `cut_off_last_line` and `unparsed_lines` (1 for a cut-off
        last line: a line anywhere else that does not parse is bad input and never reaches results.json)."""
        return {"lines": self.lines, "cut_off_last_line": self.cut_off_last_line,
                "unparsed_lines": int(self.cut_off_last_line)}


def scan(history: Path) -> HistoryScan:
    """The HistoryScan of `history`. Raises CheckInputError (one line naming the file) when it cannot be read, or
    holds no operation: empty, only blank lines, or only a cut-off line."""
    history = Path(history)
    lines = 0
    nemesis: list[dict[str, Any]] = []
    first_client: int | None = None
    anything = False
    tail = end_block = b""  # the line begun and not ended yet; the last 64 KB before the last newline
    try:
        with open(history, "rb") as fh:
            # Each chunk is searched where it lies, never copied: only the line that straddles two chunks is.
            while chunk := fh.read(CHUNK_BYTES):
                first_nl = chunk.find(b"\n")
                if first_nl < 0:
                    tail += chunk
                    continue
                last_nl = chunk.rfind(b"\n")
                lines += chunk.count(b"\n")
                head = tail + chunk[:first_nl + 1]
                for data, lo, hi in ((head, 0, len(head)), (chunk, first_nl + 1, last_nl + 1)):
                    nemesis += _nemesis_lines(data, lo, hi)
                    if first_client is None:
                        first_client = _first_client_time(data, lo, hi)
                    anything = anything or _SOMETHING.search(data, lo, hi) is not None
                end_block = (head + chunk[first_nl + 1:last_nl + 1])[-_END_BLOCK:] if last_nl - first_nl < _END_BLOCK \
                    else chunk[last_nl + 1 - _END_BLOCK:last_nl + 1]
                tail = chunk[last_nl + 1:]
    except OSError as e:
        raise CheckInputError(f"{history}: unreadable ({e.strerror or e})") from None
    cut, last = False, None
    if tail.strip():
        last = _json(tail)
        if last is None:
            cut = True
        else:
            lines += 1
            nemesis += [last] if _is_nemesis(last) else []
            first_client = first_client if first_client is not None else _first_client_time(tail, 0, len(tail))
    if not anything and last is None:
        what = "its only line is cut off" if cut else "it is empty"
        raise CheckInputError(f"{history}: not a history: {what}, so it records no operation to check")
    last_ns = _time(last) if last is not None else _last_time(end_block)
    return HistoryScan(lines, cut, tuple(nemesis), first_client, last_ns)


def _lines(data: bytes, lo: int, hi: int) -> Iterator[bytes]:
    """The lines of data[lo:hi], one copied at a time."""
    while lo < hi:
        nl = data.find(b"\n", lo, hi)
        nl = hi if nl < 0 else nl
        yield data[lo:nl]
        lo = nl + 1


def _first_client_time(data: bytes, lo: int, hi: int) -> int | None:
    for raw in _lines(data, lo, hi):
        op = _json(raw)
        if op is not None and not _is_nemesis(op) and (t := _time(op)) is not None:
            return t
    return None


def _last_time(data: bytes) -> int | None:
    for raw in reversed(data.split(b"\n")):
        if (op := _json(raw)) is not None and (t := _time(op)) is not None:
            return t
    return None


def _json(raw: bytes) -> dict[str, Any] | None:
    if not raw.strip():
        return None
    try:
        op = json.loads(raw)
    except ValueError:
        return None
    return op if isinstance(op, dict) else None


def _time(op: dict[str, Any]) -> int | None:
    t = op.get("time")
    return t if isinstance(t, int) and not isinstance(t, bool) else None


def _nemesis_lines(data: bytes, lo: int, hi: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    at = data.find(_NEMESIS, lo, hi)
    while at >= 0:
        start = data.rfind(b"\n", lo, at) + 1 or lo
        end = data.find(b"\n", at, hi)
        end = hi if end < 0 else end
        op = _json(data[start:end])  # a malformed line is the checkers' to name
        if _is_nemesis(op):
            out.append(op)
        at = data.find(_NEMESIS, end, hi)
    return out


def _is_nemesis(op: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(op, dict) and op.get("process") == "nemesis"


def nemesis_section(scan_: HistoryScan, catalogue: FaultCatalogue, asked: tuple[str, ...]) -> dict[str, Any]:
    """results.json's `nemesis` section: what the nemesis was asked for and what it did. `asked`: the nemesis specs
    test.json names ("none" left out); for a bare history, the specs its nemesis lines name. `invoked` counts the
    invocations of break ops (`catalogue`: faults.json), `applied` their `ok` completions, `not_applied` their
    `info` and `fail` ones, with `why_not` counting each reason (the completion's `error`)."""
    breaks = [op for op in scan_.nemesis if catalogue.role(op.get("nemesis"), str(op.get("f"))) == "break"]
    why_not: dict[str, int] = {}
    for op in breaks:
        if op.get("type") in ("info", "fail"):
            reason = str(op.get("error") or "no reason recorded")
            why_not[reason] = why_not.get(reason, 0) + 1
    named = asked or tuple(dict.fromkeys(str(op["nemesis"]) for op in breaks if op.get("nemesis")))
    return {"asked": [s for s in named if s != "none"],
            "invoked": sum(op.get("type") == "invoke" for op in breaks),
            "applied": sum(op.get("type") == "ok" for op in breaks),
            "not_applied": sum(why_not.values()), "why_not": why_not}


def read_ops(history: Path) -> Iterator[dict[str, Any]]:
    """The ops of a history.jsonl, for the checkers that read its JSON rather than its Parquet form
    (core.history.read_history: a killed run's cut-off last line is skipped); CheckInputError `path:line: why`
    for a line that is not an op."""
    try:
        yield from read_history(history)
    except HistoryError as e:
        raise CheckInputError(str(e)) from None


def split(path: str, parts: int) -> list[tuple[int, int, int]]:
    """(start byte, end byte, line number of the first line) of `parts` stretches of the file, cut at newlines."""
    # Read a block at a time into one buffer: a whole 10M-line history (1.7 GB) read at once cost seconds of
    # page faults and its size in memory.
    buf = bytearray(CHUNK_BYTES)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size

        look = memoryview(buf)[:min(_LINE_BLOCK, CHUNK_BYTES)]  # a line's end is near: read little to find it

        def newline_from(at: int) -> int:
            while at < size:
                fh.seek(at)
                n = fh.readinto(look)
                if n <= 0:
                    break
                i = buf.find(b"\n", 0, n)
                if i >= 0:
                    return at + i
                at += n
            return -1

        cuts = [0]
        for k in range(1, parts):
            at = newline_from(max(cuts[-1], size * k // parts))
            if at < 0 or at + 1 >= size:
                break
            cuts.append(at + 1)
        cuts.append(size)
        out, line = [], 1
        for a, b in zip(cuts, cuts[1:]):
            if b > a:
                out.append((a, b, line))
                fh.seek(a)
                while a < b:
                    n = fh.readinto(memoryview(buf)[:min(CHUNK_BYTES, b - a)])
                    if n <= 0:
                        break
                    line += buf.count(b"\n", 0, n)
                    a += n
    return out or [(0, 0, 1)]
