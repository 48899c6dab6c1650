"""history.parquet from a table of history lines rather than JSON: `write_from_lines`.

For runs the harness recorded in columnar form: the same Parquet file and
bucket layout `convert` writes, without parsing history.jsonl.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kchaos.checkers.fast_parse import client_lines_valid
from kchaos.checkers.history_lines import CORRUPT, LINE_SCHEMA
from kchaos.checkers.pairing import Pairing, usable_mask
from kchaos.checkers.parquet import CONVERTER_VERSION, cache_path, convert, parquet_path, with_derived, write_tables

__all__ = ["write_from_lines"]


WRITE_FROM_LINES_ROWS = 1 << 20  # rows derived at a time


def write_from_lines(lines: pa.Table, history: Path) -> Path:
    """Write the up-to-date Parquet form of `history` (and its bucket layout) from `lines`; its path.

    Contract: `history` already holds the same lines as JSON (history.jsonl is
    the record; this only spares a later `convert(history)` the JSON parsing,
    which then reuses what was written here, as long as `history`'s size and
    modification time do not change). `lines` has one row per line of
    `history`, every line (client and nemesis), in the same order, with
    columns named like the JSON fields: `index`, `time` (integers), `process`
    (string: "3", "nemesis"), `type`, `f`, `topic`, `partition`, `value`,
    `offset` (integers), `records` (list of [partition, offset, value]
    integer lists), `complete` (bool), `node`, `error` (strings), `producer`,
    `generation` (integers), `nemesis` (string) and `detail` (on nemesis lines: every other
    field of the line as a JSON object text; its `partition` and `value`
    columns hold those fields only when they are integers). A missing column
    is null on every row; a null is an absent field. On a nemesis line without `detail`,
    the non-null values of the columns not listed above (and of `topic`,
    `partition`, `value`, `offset`, `records`, `complete`, `node`, `error`,
    `producer`, `generation`) become its `detail`; elsewhere unlisted columns are ignored.
    Integers must fit in 64 bits; castable types (int32, large_string, ...)
    are cast.

    The checks `convert(history, validate=True)` makes are made on the table;
    when one fails (or the table cannot be cast), the file is written from the
    JSON without validation instead, so that a later check reports the exact
    line. Raises what `convert` raises for an unreadable history.
    """
    history = Path(history)
    st = os.stat(history)
    meta = {"version": CONVERTER_VERSION, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        table = _line_table(lines)
        chunks = list(_derive_checked(table))
    except (pa.ArrowException, ValueError, TypeError):
        chunks = None
    if chunks is None:
        return convert(history, validate=False)
    try:
        return write_tables(iter(chunks), parquet_path(history), {**meta, "validated": True})
    except (PermissionError, OSError):
        out = cache_path(history)
        out.parent.mkdir(parents=True, exist_ok=True)
        return write_tables(iter(chunks), out, {**meta, "validated": True})


def _line_table(lines: pa.Table) -> pa.Table:
    """`lines` as a table of LINE_SCHEMA (nemesis `detail` filled in)."""
    n = lines.num_rows
    cols = []
    for field in LINE_SCHEMA:
        if field.name in lines.column_names:
            col = lines.column(field.name)
            if field.name == "process" and not pa.types.is_string(col.type):
                col = pc.cast(col, pa.string())
            cols.append(col.cast(field.type))
        else:
            cols.append(pa.nulls(n, field.type))
    table = pa.Table.from_arrays(cols, schema=LINE_SCHEMA)
    nemesis = np.flatnonzero(pc.fill_null(pc.equal(table.column("process"), "nemesis"), False)
                             .to_numpy(zero_copy_only=False))
    if len(nemesis) and "detail" not in lines.column_names:
        own = {"index", "time", "process", "type", "f", "nemesis", "detail", CORRUPT}
        rows = lines.take(pa.array(nemesis)).to_pylist()
        detail = [json.dumps(d, separators=(",", ":"), sort_keys=True) if d else None
                  for d in ({k: v for k, v in r.items() if k not in own and v is not None} for r in rows)]
        full = np.full(n, None, object)
        full[nemesis] = detail
        table = table.set_column(LINE_SCHEMA.get_field_index("detail"), "detail", pa.array(full, pa.string()))
    return table


def _derive_checked(table: pa.Table) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """Converted chunks of `table`; ValueError when a validation check fails."""
    pairing = Pairing()
    for start in range(0, max(table.num_rows, 1), WRITE_FROM_LINES_ROWS):
        lines = table.slice(start, WRITE_FROM_LINES_ROWS)
        client = lines.filter(pc.invert(pc.fill_null(pc.equal(lines.column("process"), "nemesis"), False)))
        if not client_lines_valid(client):
            raise ValueError("not valid")
        usable = usable_mask(lines, lines.column(CORRUPT))
        derived, paired, pairing = pairing.derive(lines, usable)
        completes = pc.fill_null(pc.not_equal(lines.column("type"), "invoke"), False)
        if np.any(usable & completes.to_numpy(zero_copy_only=False) & ~paired):
            raise ValueError("a completion completes nothing")
        yield with_derived(lines, derived), usable
