"""The converter's fast path: a chunk of history lines parsed at C speed, or None to say "go slow".

Client lines go through pyarrow's JSON reader against a strict schema
(FAST_SCHEMA: `process`, `partition` and `value` integers); nemesis lines,
which may carry any JSON type in any field, through `json`; the validation
checks that can be done on a whole column are done vectorised. Whenever a
chunk might hold a line that validation would reject, or that the strict
schema cannot hold, `parse_chunk` returns None and the converter redoes
the chunk line by line, which raises the exact one-line error or converts
it leniently.
"""
from __future__ import annotations

import io
import json
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from kchaos.checkers.history_lines import CORRUPT, LINE_SCHEMA, RECORDS, row
from kchaos.core.history import OP_TYPES

# What a well-formed client line parses to: anything else sends its chunk to Python.
FAST_SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.int64()),
    ("type", pa.string()), ("f", pa.string()), ("topic", pa.string()),
    ("partition", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()),
    ("records", RECORDS), ("complete", pa.bool_()), ("node", pa.string()),
    ("error", pa.string()), ("producer", pa.int64()), ("generation", pa.int64()),
])
_PARSE = pj.ParseOptions(explicit_schema=FAST_SCHEMA, unexpected_field_behavior="ignore")
# A null where validation tells a present null from an absent field.
_NULLS = re.compile(rb'"(?:value|complete|process|f|type)"\s*:\s*null')
_NEMESIS = re.compile(rb'"process"\s*:\s*"nemesis"')


def parse_chunk(data: bytes, validate: bool) -> pa.Table | None:
    """The fast path for lines `data`, or None if the slow path must decide.

    Returns a table of LINE_SCHEMA, one row per line, in file order.
    Client lines go through pyarrow's JSON reader against a strict schema,
    nemesis lines (a few, of any shape) through `json`.
    """
    if validate and b"null" in data and _NULLS.search(data):
        return None
    nemesis: list[dict[str, Any]] = []
    nemesis_lines: list[int] = []  # line numbers within `data`
    if b"nemesis" in data:
        client, at, line_no = [], 0, 0
        for m in _NEMESIS.finditer(data):
            begin = data.rfind(b"\n", 0, m.start()) + 1
            if begin < at:
                continue  # a second mention on a line already taken
            end = data.find(b"\n", m.end())
            end = len(data) if end < 0 else end
            line = data[begin:end]
            try:
                rec = json.loads(line)
            except ValueError:
                return None
            if not (isinstance(rec, dict) and rec.get("process") == "nemesis"
                    and rec.get("type") in OP_TYPES and "f" in rec):
                return None
            line_no += data.count(b"\n", at, begin)  # now the nemesis line's number
            nemesis_lines.append(line_no)
            line_no += 1
            nemesis.append(row(rec, line.decode("utf-8")))
            client.append(data[at:begin])
            at = end + 1
        client.append(data[at:])
        data = b"".join(client)
    try:
        table = pj.read_json(io.BytesIO(data), parse_options=_PARSE,
                             read_options=pj.ReadOptions(block_size=4 << 20))
    except (pa.ArrowException, UnicodeDecodeError):
        return None
    if validate and not client_lines_valid(table):
        return None
    cols = {name: table.column(name) for name in FAST_SCHEMA.names}
    cols["process"] = pc.cast(cols["process"], pa.string())
    for name in ("nemesis", "detail", CORRUPT):
        cols[name] = pa.nulls(table.num_rows, pa.string())
    out = pa.table(cols, schema=LINE_SCHEMA)
    if not nemesis:
        return out
    if b"\n\n" in data or data[:1].isspace():
        return None  # blank lines: line numbers would not match rows
    total = out.num_rows + len(nemesis)
    is_nemesis = np.zeros(total, bool)
    is_nemesis[nemesis_lines] = True
    perm = np.empty(total, np.int64)
    perm[~is_nemesis] = np.arange(out.num_rows)
    perm[is_nemesis] = out.num_rows + np.arange(len(nemesis))
    # File order, which pairing needs (done here, in the parse thread).
    return pa.concat_tables([out, pa.Table.from_pylist(nemesis, schema=LINE_SCHEMA)]).take(pa.array(perm))


def client_lines_valid(t: pa.Table) -> bool:
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
