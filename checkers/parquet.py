"""history.jsonl -> history.parquet, once, validating the history on the way.

`convert(history)` writes `<stem>.parquet` beside the history (history.jsonl ->
history.parquet) with the columns of checkers.spark.HISTORY_SCHEMA, in line
order, plus the columns `Pairing` derives from that order
(latency_ns, stream, epoch, acked_before; docs/history.md), and reuses
it while it is up to date: written by this converter version, from a source
of the same size and modification time (a killed run's history that grew is
converted again). It writes to a hidden temporary name, then renames.

The file is read in chunks of lines (CHUNK_BYTES), never whole. Each chunk
takes the fast path (`parse_chunk`): client lines parsed by
pyarrow's JSON reader against a strict schema (`process`, `partition` and
`value` integers), nemesis lines (which may carry any JSON type in any field)
by `json`, and the checks below vectorised. A chunk the fast path cannot vouch
for (pyarrow rejects it, or some check might fail) is redone line by line in
Python, which either raises the exact one-line error or converts it leniently.

Validation (`validate=True`, as `checkers.check_path` does) raises
CheckInputError naming the line for: a line that is not JSON, not an object,
has an unknown `type` or lacks `process` or `f`; a client op whose fields
have types the checker cannot use; a completion with no outstanding
invocation of the same f by that process. Nemesis ops may carry anything.
A final line without newline that is not JSON is the harmless tail of a killed
run: it is kept as a row holding only `_corrupt_record` (so the checker's
`unparsed_lines` counts it). Fields of a line that do not fit the schema (a
nemesis `offset` of 1.5, say) are null and the line's text goes in
`_corrupt_record`, as Spark's PERMISSIVE JSON reader did; a `partition` or
`value` that is not an integer is null without that (nemesis lines use them
freely; `detail` keeps every other field of a nemesis line as JSON).

Without validation (`validate=False`, used when a checker is handed a history
directly) nothing raises: such problems become rows the checker flags.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kchaos.checkers.buckets import BucketWriter, bucket_dir, install
from kchaos.checkers.fast_parse import parse_chunk
from kchaos.checkers.history_lines import (
    CORRUPT,
    LINE_SCHEMA,
    client_op_problem,
    corrupt_row,
    is_int,
    pairing_problem,
    row,
)
from kchaos.checkers.history_lines import text as json_text
from kchaos.checkers.pairing import Pairing, usable_mask
from kchaos.core.history import OP_TYPES

__all__ = ["ARROW_SCHEMA", "CONVERTER_VERSION", "CheckInputError", "client_op_problem", "convert", "pairing_problem",
           "parquet_path", "with_derived", "write_tables"]

CONVERTER_VERSION = "5"
CHUNK_BYTES = 16 << 20
PARSE_AHEAD = 2  # chunks parsed at once, ahead of the one being derived and written
_META = b"kchaos.history"

_DERIVED = ("latency_ns", "stream", "epoch", "acked_before")
_DICTIONARY = ("process", "type", "f", "topic", "node", "error", "nemesis")
ARROW_SCHEMA = pa.schema(list(LINE_SCHEMA) + [(c, pa.int64()) for c in _DERIVED])


class CheckInputError(ValueError):
    """The thing to check is missing or malformed; the message is one line naming it."""


def parquet_path(history: Path) -> Path:
    """Where `convert` writes the Parquet form of `history` (history.jsonl -> history.parquet)."""
    history = Path(history)
    return history.with_name(history.stem + ".parquet")


def cache_path(history: Path) -> Path:
    """Where `convert` writes the Parquet form of a history in a directory it cannot write to:
    under $XDG_CACHE_HOME (default ~/.cache)/kchaos/parquet, named after the history's real path."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kchaos" / "parquet"
    name = hashlib.sha256(str(Path(history).resolve()).encode()).hexdigest()[:24]
    return base / f"{name}.parquet"


def convert(history: Path, *, validate: bool = True) -> Path:
    """The Parquet form of `history`, written beside it unless already up to date; its path.

    With `validate`, raises CheckInputError (one line, naming the line) for a
    malformed history, and writes nothing. An up-to-date file written without
    validation is converted again when validation is asked for. A history in
    a directory that cannot be written (a read-only archive) is converted to
    `cache_path(history)` instead.
    """
    history = Path(history)
    try:
        st = os.stat(history)
    except OSError as e:
        raise CheckInputError(f"{history}: unreadable ({e.strerror or e})") from None
    meta = {"version": CONVERTER_VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    for out in (parquet_path(history), cache_path(history)):
        if _up_to_date(out, meta, validate):
            return out
    try:
        return _write(history, parquet_path(history), meta, validate, st.st_size)
    except PermissionError:
        pass
    except OSError as e:
        if e.errno != errno.EROFS:
            raise CheckInputError(f"{history}: unreadable or unwritable ({e})") from None
    out = cache_path(history)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return _write(history, out, meta, validate, st.st_size)
    except OSError as e:
        raise CheckInputError(f"{history}: unreadable or unwritable ({e})") from None


def _write(history: Path, out: Path, meta: dict[str, Any], validate: bool, size: int) -> Path:
    with open(history, "rb") as fh:
        return write_tables(_Converter(history, validate).tables(fh, size), out, {**meta, "validated": validate})


def write_tables(tables: Iterator[tuple[pa.Table, np.ndarray]], out: Path, meta: dict[str, Any]) -> Path:
    """Write converted chunks (with their usable masks) as `out` and its bucket layout; return `out`."""
    mine = f"{os.getpid()}.{threading.get_ident()}"  # two threads converting one history never share a file
    tmp = out.with_name(f".{out.name}.{mine}.tmp")
    tmp_buckets = out.with_name(f".{out.name}.{mine}.buckets.tmp")
    shutil.rmtree(tmp_buckets, ignore_errors=True)
    try:
        writer = pq.ParquetWriter(
            tmp, ARROW_SCHEMA.with_metadata({_META: json.dumps(meta)}),
            # Dictionaries only where values repeat: on the integer columns they cost
            # a third of the write time and save nothing.
            compression="lz4", use_dictionary=list(_DICTIONARY), write_statistics=["index", "time"])
        buckets = BucketWriter(tmp_buckets)
        # history.parquet is written in a second thread (pyarrow releases the GIL) while the
        # bucket layout is written here; one write at a time, in order.
        with ThreadPoolExecutor(1, thread_name_prefix="kchaos-write") as pool:
            pending: Future | None = None
            try:
                for table, usable in tables:
                    if table.num_rows:
                        if pending is not None:
                            pending.result()
                        pending = pool.submit(writer.write_table, table.drop_columns(["invoked_line"]))
                        buckets.add(table, usable)
                if pending is not None:
                    pending.result()
            finally:
                if pending is not None:
                    pending.exception()
                writer.close()
                buckets.close()
        install(tmp_buckets, bucket_dir(out))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(tmp_buckets, ignore_errors=True)
    return out


def _up_to_date(out: Path, meta: dict[str, Any], validate: bool) -> bool:
    try:
        if out.stat().st_mtime_ns < meta["mtime_ns"] or not bucket_dir(out).is_dir():
            return False
        raw = (pq.read_schema(out).metadata or {}).get(_META)
        have = json.loads(raw) if raw else {}
    except (OSError, ValueError, pa.ArrowException):
        return False
    return (all(have.get(k) == v for k, v in meta.items())
            and (have.get("validated") is True or not validate))


def _chunks(fh: BinaryIO, size: int) -> Iterator[tuple[bytes, bool]]:
    """(lines ending in a newline, False) of about CHUNK_BYTES from the first `size` bytes of
    `fh`, then (the last line, True) if it has no newline."""
    left = size
    rest = b""
    while left > 0:
        block = fh.read(min(CHUNK_BYTES, left))
        if not block:
            break
        left -= len(block)
        buf = rest + block
        cut = buf.rfind(b"\n") + 1
        if cut == 0 and left > 0:
            rest = buf  # one line longer than a chunk: read on
            continue
        chunk, rest = buf[:cut], buf[cut:]
        if chunk:
            yield chunk, False
    if rest:
        yield rest, True


class _Converter:
    """The state carried from chunk to chunk: line and record counts, the pairing state."""

    def __init__(self, path: Path, validate: bool):
        self.path = path
        self.validate = validate
        self.lines = 0  # lines before the current chunk
        self.records = 0  # JSON records so far (validate_history's "record N")
        self.pairing = Pairing()

    def tables(self, fh: BinaryIO, size: int) -> Iterator[tuple[pa.Table, np.ndarray]]:
        """(table of ARROW_SCHEMA plus `invoked_line`, usable mask) for the first `size` bytes of
        `fh`, chunk by chunk, in order."""
        # The next chunks are parsed (pyarrow, GIL released) while this one is derived and written.
        with ThreadPoolExecutor(PARSE_AHEAD, thread_name_prefix="kchaos-parse") as pool:
            ahead: deque[tuple[bytes, bool, Future | None]] = deque()
            for data, tail in _chunks(fh, size):
                ahead.append((data, tail, None if tail else pool.submit(parse_chunk, data, self.validate)))
                if len(ahead) > PARSE_AHEAD:
                    yield self._finish(*ahead.popleft())
            while ahead:
                yield self._finish(*ahead.popleft())

    def _finish(self, data: bytes, tail: bool, parsed: Future | None = None) -> tuple[pa.Table, np.ndarray]:
        if tail:
            return self.tail(data)
        table = self.chunk(data, parsed.result() if parsed is not None else parse_chunk(data, self.validate))
        self.lines += data.count(b"\n")
        return table

    def chunk(self, data: bytes, lines: pa.Table | None) -> tuple[pa.Table, np.ndarray]:
        """Lines `data` (ending in a newline) as a table: the fast path's `lines`, else line by line."""
        if lines is None:
            return self._slow(data)
        usable = usable_mask(lines, lines.column(CORRUPT))
        derived, paired, state = self.pairing.derive(lines, usable)
        if self.validate:
            completes = pc.fill_null(pc.not_equal(lines.column("type"), "invoke"), False)
            if np.any(usable & completes.to_numpy(zero_copy_only=False) & ~paired):
                return self._slow(data)
        self.pairing = state
        self.records += lines.num_rows
        return with_derived(lines, derived), usable

    def tail(self, data: bytes) -> tuple[pa.Table, np.ndarray]:
        """The last line, without newline: a record if it is JSON, else a corrupt row."""
        text = data.decode("utf-8", errors="replace")
        try:
            json.loads(text)
        except ValueError:
            if not text.strip():
                return with_derived(LINE_SCHEMA.empty_table(), {}), np.zeros(0, bool)
            return self._derive(pa.Table.from_pylist([corrupt_row(text)], schema=LINE_SCHEMA))
        return self._slow(data)

    def _derive(self, lines: pa.Table) -> tuple[pa.Table, np.ndarray]:
        usable = usable_mask(lines, lines.column(CORRUPT))
        derived, _, self.pairing = self.pairing.derive(lines, usable)
        return with_derived(lines, derived), usable

    # --- slow path: line by line, validate_history's exact messages ------------------
    def _slow(self, data: bytes) -> tuple[pa.Table, np.ndarray]:
        if self.validate:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CheckInputError(f"{self.path}: unreadable ({e})") from None
        else:
            text = data.decode("utf-8", errors="replace")
        outstanding = self.pairing.outstanding() if self.validate else {}
        rows = []
        for i, line in enumerate(text.split("\n")):
            if not line.strip():
                continue
            n = self.lines + i + 1
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                self._fail(f"{self.path}:{n}: not JSON ({e.msg})")
                rows.append(corrupt_row(line))
                continue
            if not isinstance(rec, dict):
                self._fail(f"{self.path}:{n}: not a JSON object")
                rows.append(corrupt_row(line))
                continue
            if rec.get("type") not in OP_TYPES:
                self._fail(f"{self.path}:{n}: unknown type {rec.get('type')!r}")
            elif "process" not in rec or "f" not in rec:
                self._fail(f"{self.path}:{n}: missing 'process' or 'f'")
            else:
                self.records += 1
                if self.validate and rec["process"] != "nemesis":
                    keyed = {**rec, "process": json_text(rec["process"])}
                    problem = client_op_problem(rec) or pairing_problem(keyed, outstanding)
                    if problem:
                        # `index` is the 0-based line number; fall back to the record's position.
                        where = rec["index"] + 1 if is_int(rec.get("index")) else f"record {self.records}"
                        raise CheckInputError(f"{self.path}:{where}: {problem}")
            rows.append(row(rec, line))
        return self._derive(pa.Table.from_pylist(rows, schema=LINE_SCHEMA))

    def _fail(self, message: str) -> None:
        if self.validate:
            raise CheckInputError(message)


def with_derived(lines: pa.Table, derived: dict[str, pa.Array]) -> pa.Table:
    """`lines` with the derived columns: value, partition and producer replaced, the others
    appended (and `invoked_line`, for the bucket layout only)."""
    cols = {name: derived.get(name, lines.column(name) if name in lines.column_names else None)
            for name in ARROW_SCHEMA.names}
    arrays = [pa.nulls(lines.num_rows, ARROW_SCHEMA.field(n).type) if c is None else c for n, c in cols.items()]
    inv = derived.get("invoked_line", pa.nulls(lines.num_rows, pa.int64()))
    return pa.Table.from_arrays(arrays + [inv], schema=ARROW_SCHEMA.append(pa.field("invoked_line", pa.int64())))
