"""history.jsonl -> history.parquet, once, validating the history on the way.

`convert(history)` writes `<stem>.parquet` beside the history (history.jsonl ->
history.parquet) with the columns of checkers.spark.HISTORY_SCHEMA, and reuses
it while it is up to date: written by this converter version, from a source
of the same size and modification time (a killed run's history that grew is
converted again). It writes to a hidden temporary name, then renames.

The file is read in chunks of lines (CHUNK_BYTES), never whole. Each chunk
takes a fast path: client lines parsed by pyarrow's JSON reader against a
strict schema (`process`, `partition` and `value` integers), nemesis lines
(which may carry any JSON type in any field) by `json`, and the checks below
vectorised. A chunk the fast path cannot vouch for (pyarrow rejects it, or
some check might fail) is redone line by line in Python, which either raises
the exact one-line error or converts it leniently.

Validation (`validate=True`, as `checkers.check_path` does) raises
CheckInputError naming the line for: a line that is not JSON, not an object,
has an unknown `type` or lacks `process` or `f`; a client op whose fields
have types the checker cannot use; a completion with no outstanding
invocation of the same f by that process. Nemesis ops may carry anything.
A final line without newline that is not JSON is the harmless tail of a killed
run: it is kept as a row holding only `_corrupt_record` (so the checker's
`unparsed_lines` counts it). Fields of a line that do not fit the schema (a
nemesis `offset` of 1.5, say) are null and the line's text goes in
`_corrupt_record`, as Spark's PERMISSIVE JSON reader did.

Without validation (`validate=False`, used when a checker is handed a history
directly) nothing raises: such problems become rows the checker flags.
"""
from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from harness.history import OP_TYPES

__all__ = ["ARROW_SCHEMA", "CONVERTER_VERSION", "CheckInputError", "convert", "parquet_path"]

CONVERTER_VERSION = "1"
CHUNK_BYTES = 16 << 20
CORRUPT = "_corrupt_record"
_META = b"kchaos.history"

_INT64 = (-(1 << 63), (1 << 63) - 1)
_LONGS = ("index", "time", "offset")
_STRINGS = ("process", "type", "f", "topic", "partition", "value", "node", "error")
_RECORDS = pa.list_(pa.list_(pa.int64()))

# The Parquet columns: checkers.spark.HISTORY_SCHEMA, in its order.
ARROW_SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()),
    ("type", pa.string()), ("f", pa.string()), ("topic", pa.string()),
    ("partition", pa.string()), ("value", pa.string()), ("offset", pa.int64()),
    ("records", _RECORDS), ("complete", pa.bool_()), ("node", pa.string()),
    ("error", pa.string()), (CORRUPT, pa.string()),
])
# What a well-formed client line parses to: anything else sends its chunk to Python.
_FAST_SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.int64()),
    ("type", pa.string()), ("f", pa.string()), ("topic", pa.string()),
    ("partition", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()),
    ("records", _RECORDS), ("complete", pa.bool_()), ("node", pa.string()),
    ("error", pa.string()),
])
_PARSE = pj.ParseOptions(explicit_schema=_FAST_SCHEMA, unexpected_field_behavior="ignore")
# A null where validation tells a present null from an absent field.
_NULLS = re.compile(rb'"(?:value|complete|process|f|type)"\s*:\s*null')


class CheckInputError(ValueError):
    """The thing to check is missing or malformed; the message is one line naming it."""


def parquet_path(history: Path) -> Path:
    """Where `convert` writes the Parquet form of `history` (history.jsonl -> history.parquet)."""
    history = Path(history)
    return history.with_name(history.stem + ".parquet")


def convert(history: Path, *, validate: bool = True) -> Path:
    """The Parquet form of `history`, written beside it unless already up to date; its path.

    With `validate`, raises CheckInputError (one line, naming the line) for a
    malformed history, and writes nothing. An up-to-date file written without
    validation is converted again when validation is asked for.
    """
    history = Path(history)
    out = parquet_path(history)
    try:
        st = os.stat(history)
    except OSError as e:
        raise CheckInputError(f"{history}: unreadable ({e.strerror or e})") from None
    meta = {"version": CONVERTER_VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    if _up_to_date(out, meta, validate):
        return out
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(history, "rb") as fh:
            writer = pq.ParquetWriter(
                tmp, ARROW_SCHEMA.with_metadata({_META: json.dumps({**meta, "validated": validate})}),
                compression="snappy")
            try:
                for table in _Converter(history, validate).tables(fh, st.st_size):
                    if table.num_rows:
                        writer.write_table(table)
            finally:
                writer.close()
        os.replace(tmp, out)
    except OSError as e:
        raise CheckInputError(f"{history}: unreadable or unwritable ({e})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _up_to_date(out: Path, meta: dict[str, Any], validate: bool) -> bool:
    try:
        if out.stat().st_mtime_ns < meta["mtime_ns"]:
            return False
        raw = (pq.read_schema(out).metadata or {}).get(_META)
        have = json.loads(raw) if raw else {}
    except (OSError, ValueError, pa.ArrowException):
        return False
    return (all(have.get(k) == v for k, v in meta.items())
            and (have.get("validated") is True or not validate))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _long(v: Any) -> bool:
    return _int(v) and _INT64[0] <= v <= _INT64[1]


def client_op_problem(rec: dict[str, Any]) -> str | None:
    """What is wrong with client op `rec` for the queue checker, or None."""
    f, type_ = rec["f"], rec["type"]
    for key in ("partition", "offset"):
        if rec.get(key) is not None and not _int(rec[key]):
            return f"{key} must be an integer, got {rec[key]!r}"
    if f == "send" and not _int(rec.get("value")) and (type_ == "invoke" or "value" in rec):
        return f"send value must be an integer, got {rec.get('value')!r}"
    if type_ == "ok" and f in ("poll", "drain"):
        records = rec.get("records")
        if not isinstance(records, list):
            return f"ok {f} needs a records list, got {records!r:.80}"
        for r in records:
            if not (isinstance(r, list) and len(r) == 3 and all(_int(x) for x in r)):
                return f"record {r!r:.80} is not [partition, offset, value]"
    if "complete" in rec and not isinstance(rec["complete"], bool):
        return f"complete must be true or false, got {rec['complete']!r}"
    return None


def pairing_problem(rec: dict[str, Any], outstanding: dict[Any, Any]) -> str | None:
    """Track invocations per process; say what is wrong if `rec` completes nothing."""
    proc, f = rec["process"], rec["f"]
    if rec["type"] == "invoke":
        outstanding[proc] = f
        return None
    if outstanding.pop(proc, None) != f:
        return f"{rec['type']} {f} of process {proc} completes no invocation (no {f} of that process is outstanding)"
    return None


def _text(v: Any) -> str | None:
    # As Spark's JSON reader fills a string column: strings verbatim, other tokens as JSON text.
    return v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def _row(rec: dict[str, Any], raw: str) -> dict[str, Any]:
    """`rec` as a row of ARROW_SCHEMA; fields that do not fit are null and flag the line corrupt."""
    row: dict[str, Any] = {k: _text(rec.get(k)) for k in _STRINGS}
    bad = False
    for k in _LONGS:
        v = rec.get(k)
        if v is not None and not _long(v):
            v, bad = None, True
        row[k] = v
    records = rec.get("records")
    if records is not None and not (isinstance(records, list) and all(
            r is None or (isinstance(r, list) and all(x is None or _long(x) for x in r))
            for r in records)):
        records, bad = None, True
    row["records"] = records
    complete = rec.get("complete")
    if complete is not None and not isinstance(complete, bool):
        complete, bad = None, True
    row["complete"] = complete
    row[CORRUPT] = raw.rstrip("\r\n") if bad else None
    return row


def _corrupt_row(raw: str) -> dict[str, Any]:
    return {**dict.fromkeys(ARROW_SCHEMA.names), CORRUPT: raw.rstrip("\r\n")}


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


Parsed = tuple  # (table, client process, client is-invoke, client f, records)


def _parse(data: bytes, validate: bool) -> Parsed | None:
    """The fast path for lines `data`, without state: None if the slow path must decide.

    Returns the chunk as a table of ARROW_SCHEMA, the columns the pairing
    check needs for its client lines (in order), and its record count.
    """
    if validate and b"null" in data and _NULLS.search(data):
        return None
    nemesis: list[dict[str, Any]] = []
    if b"nemesis" in data:
        client = []
        for line in data.split(b"\n"):
            if b"nemesis" not in line:
                client.append(line)
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                return None
            if not (isinstance(rec, dict) and rec.get("process") == "nemesis"
                    and rec.get("type") in OP_TYPES and "f" in rec):
                return None
            nemesis.append(_row(rec, line.decode("utf-8")))
        data = b"\n".join(client)
    try:
        table = pj.read_json(io.BytesIO(data), parse_options=_PARSE,
                             read_options=pj.ReadOptions(block_size=4 << 20))
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    if validate and not _valid(table):
        return None
    cols = {name: table.column(name) for name in _FAST_SCHEMA.names}
    for name in ("process", "partition", "value"):
        cols[name] = pc.cast(cols[name], pa.string())
    cols[CORRUPT] = pa.nulls(table.num_rows, pa.string())
    out = pa.table(cols, schema=ARROW_SCHEMA)
    if nemesis:
        out = pa.concat_tables([out, pa.Table.from_pylist(nemesis, schema=ARROW_SCHEMA)])
    return (out, table.column("process").to_numpy(),
            pc.equal(table.column("type"), "invoke").to_numpy(),
            table.column("f").combine_chunks(), table.num_rows + len(nemesis))


def _valid(t: pa.Table) -> bool:
    """Whether client lines `t` pass validation but for pairing (False: let the slow path decide)."""
    if t.num_rows == 0:
        return True
    type_, f = t.column("type"), t.column("f")
    if (t.column("process").null_count or f.null_count
            or not pc.all(pc.fill_null(pc.is_in(type_, pa.array(OP_TYPES)), False)).as_py()):
        return False
    send = pc.equal(f, "send")
    if pc.any(pc.and_(pc.and_(send, pc.equal(type_, "invoke")),
                      pc.is_null(t.column("value")))).as_py():
        return False
    reads = t.filter(pc.and_(pc.equal(type_, "ok"), pc.is_in(f, pa.array(["poll", "drain"]))))
    if reads.num_rows:
        records = reads.column("records").combine_chunks()
        if records.null_count:
            return False
        inner = records.flatten()
        if inner.null_count or inner.flatten().null_count:
            return False
        if len(inner) and not pc.all(pc.equal(pc.list_value_length(inner), 3)).as_py():
            return False
    return True


class _Converter:
    """The state carried from chunk to chunk: line and record counts, outstanding invocations."""

    def __init__(self, path: Path, validate: bool):
        self.path = path
        self.validate = validate
        self.lines = 0  # lines before the current chunk
        self.records = 0  # JSON records so far (validate_history's "record N")
        self.outstanding: dict[Any, Any] = {}  # process -> f of its invocation awaiting completion

    def tables(self, fh: BinaryIO, size: int) -> Iterator[pa.Table]:
        """Tables of ARROW_SCHEMA for the first `size` bytes of `fh`, chunk by chunk, in order."""
        for data, tail in _chunks(fh, size):
            yield self._finish(data, tail)

    def _finish(self, data: bytes, tail: bool) -> pa.Table:
        if tail:
            return self.tail(data)
        table = self.chunk(data)
        self.lines += data.count(b"\n")
        return table

    def chunk(self, data: bytes) -> pa.Table:
        """Lines `data` (ending in a newline) as a table: the fast path, else line by line."""
        parsed = _parse(data, self.validate)
        if parsed is None:
            return self._slow(data)
        table, proc, invoke, f, records = parsed
        if self.validate and not self._paired(proc, invoke, f):
            return self._slow(data)
        self.records += records
        return table

    def tail(self, data: bytes) -> pa.Table:
        """The last line, without newline: a record if it is JSON, else a corrupt row."""
        text = data.decode("utf-8", errors="replace")
        try:
            json.loads(text)
        except ValueError:
            if not text.strip():
                return ARROW_SCHEMA.empty_table()
            return pa.Table.from_pylist([_corrupt_row(text)], schema=ARROW_SCHEMA)
        return self._slow(data)

    def _paired(self, proc: np.ndarray, invoke: np.ndarray, f: pa.Array) -> bool:
        """Whether every completion follows an invocation of its f by its process; carries state.

        A completion is fine iff the process's previous client op (this
        chunk's or carried over) is an invocation of the same f.
        """
        carry = [(p, g) for p, g in self.outstanding.items() if type(p) is int]
        if any(not isinstance(g, str) for _, g in carry):
            return False
        procs = np.concatenate([np.array([p for p, _ in carry], dtype=np.int64), proc])
        inv = np.concatenate([np.ones(len(carry), dtype=bool), invoke])
        fs = pa.concat_arrays([pa.array([g for _, g in carry], pa.string()), f]).dictionary_encode()
        fi = fs.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(procs, kind="stable")
        p, iv, fo = procs[order], inv[order], fi[order]
        prev_ok = np.zeros(len(p), dtype=bool)
        prev_ok[1:] = (p[1:] == p[:-1]) & iv[:-1] & (fo[1:] == fo[:-1])
        if np.any(~iv & ~prev_ok):
            return False
        last = np.ones(len(p), dtype=bool)
        last[:-1] = p[1:] != p[:-1]
        names = fs.dictionary.to_pylist()
        for q, is_inv, g in zip(p[last].tolist(), iv[last].tolist(), fo[last].tolist()):
            if is_inv:
                self.outstanding[q] = names[g]
            else:
                self.outstanding.pop(q, None)
        return True

    # --- slow path: line by line, validate_history's exact messages ------------------
    def _slow(self, data: bytes) -> pa.Table:
        if self.validate:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CheckInputError(f"{self.path}: unreadable ({e})") from None
        else:
            text = data.decode("utf-8", errors="replace")
        rows = []
        for i, line in enumerate(text.split("\n")):
            if not line.strip():
                continue
            n = self.lines + i + 1
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                self._fail(f"{self.path}:{n}: not JSON ({e.msg})")
                rows.append(_corrupt_row(line))
                continue
            if not isinstance(rec, dict):
                self._fail(f"{self.path}:{n}: not a JSON object")
                rows.append(_corrupt_row(line))
                continue
            if rec.get("type") not in OP_TYPES:
                self._fail(f"{self.path}:{n}: unknown type {rec.get('type')!r}")
            elif "process" not in rec or "f" not in rec:
                self._fail(f"{self.path}:{n}: missing 'process' or 'f'")
            else:
                self.records += 1
                if self.validate and rec["process"] != "nemesis":
                    problem = client_op_problem(rec) or pairing_problem(rec, self.outstanding)
                    if problem:
                        # `index` is the 0-based line number; fall back to the record's position.
                        where = rec["index"] + 1 if _int(rec.get("index")) else f"record {self.records}"
                        raise CheckInputError(f"{self.path}:{where}: {problem}")
            rows.append(_row(rec, line))
        return pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)

    def _fail(self, message: str) -> None:
        if self.validate:
            raise CheckInputError(message)
