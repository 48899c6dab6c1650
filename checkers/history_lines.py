"""One history line as the converter sees it: validation messages and its row of the Parquet schema.

Helpers of the Parquet converter for the lines that take the slow path (and
for nemesis lines, which always go through `json`).
"""
from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

__all__ = ["LINE_SCHEMA", "RECORDS", "CORRUPT", "client_op_problem", "corrupt_row", "pairing_problem", "is_int", "row",
           "text"]

CORRUPT = "_corrupt_record"
_INT64 = (-(1 << 63), (1 << 63) - 1)
_LONGS = ("index", "time", "offset")
_STRINGS = ("process", "type", "f", "topic", "node", "error")
# Fields the nemesis columns spell out; the rest of a nemesis line goes to `detail`.
_NEMESIS_OWN = frozenset(("index", "time", "process", "type", "f", "nemesis"))
RECORDS = pa.list_(pa.list_(pa.int64()))

# A line's own columns (the first ones of checkers.parquet.ARROW_SCHEMA). `nemesis`
# and `detail` (the rest of a nemesis line, as JSON) are set on nemesis lines.
LINE_SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()),
    ("type", pa.string()), ("f", pa.string()), ("topic", pa.string()),
    ("partition", pa.int64()), ("value", pa.int64()), ("offset", pa.int64()),
    ("records", RECORDS), ("complete", pa.bool_()), ("node", pa.string()),
    ("error", pa.string()), ("producer", pa.int64()), ("generation", pa.int64()),
    ("nemesis", pa.string()), ("detail", pa.string()),
    (CORRUPT, pa.string()),
])


def is_int(v: Any) -> bool:
    """An integer that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def _long(v: Any) -> bool:
    return is_int(v) and _INT64[0] <= v <= _INT64[1]


def client_op_problem(rec: dict[str, Any]) -> str | None:
    """What is wrong with client op `rec` for the queue checker, or None."""
    f, type_ = rec["f"], rec["type"]
    for key in ("partition", "offset", "producer", "generation"):
        if rec.get(key) is not None and not is_int(rec[key]):
            return f"{key} must be an integer, got {rec[key]!r}"
    if f == "send" and not is_int(rec.get("value")) and (type_ == "invoke" or "value" in rec):
        return f"send value must be an integer, got {rec.get('value')!r}"
    if type_ == "ok" and f in ("poll", "drain"):
        records = rec.get("records")
        if not isinstance(records, list):
            return f"ok {f} needs a records list, got {records!r:.80}"
        for r in records:
            if not (isinstance(r, list) and len(r) == 3 and all(is_int(x) for x in r)):
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


def text(v: Any) -> str | None:
    # As Spark's JSON reader fills a string column: strings verbatim, other tokens as JSON text.
    return v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def row(rec: dict[str, Any], raw: str) -> dict[str, Any]:
    """`rec` as a row of LINE_SCHEMA; fields that do not fit are null and flag the line corrupt.

    `partition`, `value`, `producer` and `generation` that are not 64-bit integers are null without
    flagging (a nemesis op may carry anything there: its `detail` keeps it).
    """
    row: dict[str, Any] = {k: text(rec.get(k)) for k in _STRINGS}
    bad = False
    for k in _LONGS:
        v = rec.get(k)
        if v is not None and not _long(v):
            v, bad = None, True
        row[k] = v
    for k in ("partition", "value", "producer", "generation"):
        row[k] = rec[k] if _long(rec.get(k)) else None
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
    if rec.get("process") == "nemesis":
        row["nemesis"] = text(rec.get("nemesis"))
        rest = {k: v for k, v in rec.items() if k not in _NEMESIS_OWN}
        row["detail"] = json.dumps(rest, separators=(",", ":"), sort_keys=True) if rest else None
    else:
        row["nemesis"] = row["detail"] = None
    row[CORRUPT] = raw.rstrip("\r\n") if bad else None
    return row


def corrupt_row(raw: str) -> dict[str, Any]:
    return {**dict.fromkeys(LINE_SCHEMA.names), CORRUPT: raw.rstrip("\r\n")}
