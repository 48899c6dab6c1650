"""The check layout: the history's sends and read records, bucketed so Spark tasks need no shuffle.

`convert` (`kchaos.checkers.parquet`) writes, beside history.parquet, a directory
`<stem>.buckets/` with two sets of Parquet files, filled chunk by chunk as the
history streams by (never held whole):

- `p<k>.parquet`, by Kafka partition (bucket p mod P_BUCKETS): every read
  record of an ok poll or drain, every ok send naming a partition, and one row
  per ok drain with `"complete": true`, and one per ok `committed` op (the
  consumer group's committed offset of a partition). Everything the offset kinds need
  (inconsistent_offset, acked_offset_mismatch, the poll kinds,
  nonmonotonic_send, the read bound) lies within one partition, so one file
  is one independent piece of work.
- `v<k>.parquet`, by value (bucket: a multiplicative hash of the value, mod
  V_BUCKETS): every send op with a value and every read record. Everything the
  value kinds need (acked, lost, unseen, duplicate, unexpected,
  failed_visible) lies within one value.

Only usable client ops contribute (`usable_mask` in `kchaos.checkers.pairing`), and only
well-formed records ([partition, offset, value], no nulls), with value,
partition and producer inherited by a completion from its invocation.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["P_BUCKETS", "P_SCHEMA", "V_BUCKETS", "V_SCHEMA", "BucketWriter", "bucket_dir", "bucket_files",
           "P_POLL", "P_DRAIN", "P_ACK", "P_DONE", "P_COMMITTED", "V_INVOKE", "V_OK", "V_FAIL", "V_INFO", "V_POLL",
           "V_DRAIN"]

P_BUCKETS = 8
V_BUCKETS = 8
# Row roles.
P_POLL, P_DRAIN, P_ACK, P_DONE, P_COMMITTED = 0, 1, 2, 3, 4
V_INVOKE, V_OK, V_FAIL, V_INFO, V_POLL, V_DRAIN = 0, 1, 2, 3, 4, 5
_SEND_ROLES = {"invoke": V_INVOKE, "ok": V_OK, "fail": V_FAIL, "info": V_INFO}
_NULL = np.iinfo(np.int64).min
ROW_GROUP_ROWS = 1 << 18  # rows a file buffers before writing them as one row group (about 16 MB for p)

# p: partition; o: offset (none: an ack without one); v: value; t: time; proc: the process;
# stream: the consumer's stream (polls); seq: reads, the record's place in the history;
# acks and committed offsets, the line number of the invocation; prod: an ack's producer instance (none: its
# process's); gen: a poll's consumer group generation (none: not a group member's).
# "None" is stored as the int64 minimum, not as a null: the files are the checker's own, and a column
# without a validity bitmap is written and read as one plain buffer.
P_SCHEMA = pa.schema([("role", pa.int8()), ("p", pa.int64()), ("o", pa.int64()), ("v", pa.int64()),
                      ("t", pa.int64()), ("proc", pa.int64()), ("stream", pa.int64()), ("seq", pa.int64()),
                      ("prod", pa.int64()), ("gen", pa.int64())])
V_SCHEMA = pa.schema([("role", pa.int8()), ("v", pa.int64()), ("p", pa.int64()), ("o", pa.int64()),
                      ("t", pa.int64())])


def bucket_dir(parquet: Path) -> Path:
    """The layout directory that goes with a history.parquet."""
    parquet = Path(parquet)
    return parquet.with_name(parquet.stem + ".buckets")


def bucket_files(parquet: Path) -> tuple[list[Path], list[Path]]:
    """(partition files, value files) of the layout of `parquet`, each sorted; empty when none."""
    d = bucket_dir(parquet)
    return sorted(d.glob("p*.parquet")), sorted(d.glob("v*.parquet"))


def value_bucket(v: np.ndarray) -> np.ndarray:
    """The value bucket of each value: the top bits of a multiplicative hash."""
    h = v.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return (h >> np.uint64(61)).astype(np.int64) % V_BUCKETS


def _ints(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.int64()).fill_null(_NULL).to_numpy(zero_copy_only=False)


def _process_ints(arr: pa.ChunkedArray) -> np.ndarray:
    """Client process names as integers (_NULL where one is not an integer)."""
    try:
        return _ints(pc.cast(arr, pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = []
        for s in arr.to_pylist():
            try:
                out.append(int(s))
            except (TypeError, ValueError):
                out.append(_NULL)
        return np.array(out, np.int64)


def _eq(col: pa.ChunkedArray, s: str) -> np.ndarray:
    return pc.fill_null(pc.equal(col, s), False).to_numpy(zero_copy_only=False)


class BucketWriter:
    """Writes the layout of one history into `tmp` (a fresh directory), chunk by chunk, in line order."""

    def __init__(self, tmp: Path):
        self.dir = Path(tmp)
        self.dir.mkdir(parents=True)
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.pending: dict[str, tuple[pa.Schema, list[dict[str, np.ndarray]], int]] = {}  # rows not yet written
        self.records = 0  # read records so far: the next one's seq

    def add(self, t: pa.Table, usable: np.ndarray) -> None:
        """Add the rows of one converted chunk (ARROW_SCHEMA plus `invoked_line`), `usable` its client ops."""
        if not t.num_rows or not usable.any():
            return
        type_, f = t.column("type"), t.column("f")
        send = usable & _eq(f, "send")
        ok = _eq(type_, "ok")
        ok_read = usable & ok & (_eq(f, "poll") | _eq(f, "drain"))
        proc = _process_ints(pc.if_else(pa.array(send | ok_read), t.column("process"), None))
        time, part = _ints(t.column("time")), _ints(t.column("partition"))
        self._sends(t, send, ok, type_, time, part, proc)
        self._reads(t, ok_read, _eq(f, "drain"), time, part, proc)
        offset = _ints(t.column("offset"))
        com = np.flatnonzero(usable & ok & _eq(f, "committed") & (part != _NULL) & (offset != _NULL))
        if len(com):
            z = np.zeros(len(com), np.int64)
            self._put("p", part[com] % P_BUCKETS, P_SCHEMA, {
                "role": np.full(len(com), P_COMMITTED), "p": part[com], "o": offset[com], "v": z, "t": time[com],
                "proc": z, "stream": z, "seq": _ints(t.column("invoked_line"))[com],
                "prod": np.full(len(com), _NULL), "gen": np.full(len(com), _NULL)})

    def _sends(self, t: pa.Table, send: np.ndarray, ok: np.ndarray, type_: pa.ChunkedArray,
               time: np.ndarray, part: np.ndarray, proc: np.ndarray) -> None:
        value, offset = _ints(t.column("value")), _ints(t.column("offset"))
        role = np.select([_eq(type_, ty) for ty in _SEND_ROLES], list(_SEND_ROLES.values()), -1)
        rows = np.flatnonzero(send & (value != _NULL) & (role >= 0))
        if not len(rows):
            return
        role = role[rows]
        acked = role == V_OK
        self._put("v", value_bucket(value[rows]), V_SCHEMA, {
            "role": role, "v": value[rows], "p": np.where(acked, part[rows], _NULL),
            "o": np.where(acked, offset[rows], _NULL), "t": time[rows]})
        acks = rows[acked & (part[rows] != _NULL)]
        if len(acks):
            self._put("p", part[acks] % P_BUCKETS, P_SCHEMA, {
                "role": np.full(len(acks), P_ACK), "p": part[acks], "o": offset[acks], "v": value[acks],
                "t": time[acks], "proc": proc[acks], "stream": np.zeros(len(acks), np.int64),
                "seq": _ints(t.column("invoked_line"))[acks], "prod": _ints(t.column("producer"))[acks],
                "gen": np.full(len(acks), _NULL)})

    def _reads(self, t: pa.Table, ok_read: np.ndarray, drain: np.ndarray, time: np.ndarray,
               part: np.ndarray, proc: np.ndarray) -> None:
        complete = t.column("complete").combine_chunks().fill_null(False).to_numpy(zero_copy_only=False)
        done = np.flatnonzero(ok_read & drain & complete & (part != _NULL))
        if len(done):
            z = np.zeros(len(done), np.int64)
            self._put("p", part[done] % P_BUCKETS, P_SCHEMA, {
                "role": np.full(len(done), P_DONE), "p": part[done], "o": np.full(len(done), _NULL),
                "v": z, "t": time[done], "proc": z, "stream": z, "seq": z, "prod": np.full(len(done), _NULL),
                "gen": np.full(len(done), _NULL)})
        ops = np.flatnonzero(ok_read)
        if not len(ops):
            return
        records = t.column("records").combine_chunks().filter(pa.array(ok_read))
        inner = records.flatten()  # one entry per record, in order
        if not len(inner):
            return
        per_op = pc.list_value_length(records).fill_null(0).to_numpy(zero_copy_only=False)
        op_of = np.repeat(np.arange(len(ops)), per_op)
        lengths = pc.list_value_length(inner).fill_null(0).to_numpy(zero_copy_only=False)
        flat = inner.flatten()
        starts = inner.offsets.to_numpy()[:-1] - inner.offsets[0].as_py()
        good = (lengths == 3) & inner.is_valid().to_numpy(zero_copy_only=False)
        if flat.null_count:
            nulls = np.concatenate([[0], np.cumsum(flat.is_null().to_numpy(zero_copy_only=False))])
            good &= nulls[starts + lengths] == nulls[starts]
        seq = self.records + np.arange(len(inner), dtype=np.int64)
        self.records += len(inner)
        if not good.any():
            return
        vals = flat.fill_null(0).to_numpy(zero_copy_only=False)
        at = starts[good]
        rp, ro, rv = vals[at], vals[at + 1], vals[at + 2]
        op = ops[op_of[good]]
        drained = drain[op]
        rt = time[op]
        self._put("p", rp % P_BUCKETS, P_SCHEMA, {
            "role": np.where(drained, P_DRAIN, P_POLL), "p": rp, "o": ro, "v": rv, "t": rt, "proc": proc[op],
            "stream": _ints(t.column("stream"))[op], "seq": seq[good], "prod": np.full(len(rp), _NULL),
            "gen": np.where(drained, _NULL, _ints(t.column("generation"))[op])})
        self._put("v", value_bucket(rv), V_SCHEMA, {
            "role": np.where(drained, V_DRAIN, V_POLL), "v": rv, "p": rp, "o": ro, "t": rt})

    def _put(self, kind: str, bucket: np.ndarray, schema: pa.Schema, cols: dict[str, np.ndarray]) -> None:
        # int8 keys take numpy's radix sort.
        order = np.argsort(bucket.astype(np.int8), kind="stable")
        b = bucket[order]
        cuts = np.flatnonzero(np.diff(b)) + 1
        for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(b)]])):
            sel = order[lo:hi]
            name = f"{kind}{int(b[lo])}.parquet"
            if name not in self.pending:
                self.pending[name] = (schema, [], 0)
            _, parts, rows = self.pending[name]
            parts.append({n: cols[n][sel].astype(np.int8 if n == "role" else np.int64, copy=False)
                          for n in schema.names})
            self.pending[name] = (schema, parts, rows + len(sel))
            if rows + len(sel) >= ROW_GROUP_ROWS:
                self._flush(name)

    def _flush(self, name: str) -> None:
        # Chunks arrive a few thousand rows per file: written one by one, their row groups
        # cost more to write and to read than the rows themselves.
        schema, parts, rows = self.pending.pop(name)
        if not rows:
            return
        arrays = [pa.array(np.concatenate([p[n] for p in parts])) for n in schema.names]
        if name not in self.writers:
            self.writers[name] = pq.ParquetWriter(self.dir / name, schema, compression="lz4",
                                                  use_dictionary=False, write_statistics=False)
        self.writers[name].write_table(pa.Table.from_arrays(arrays, schema=schema))

    def close(self) -> None:
        """Write what is buffered and finish every file."""
        for name in list(self.pending):
            self._flush(name)
        for w in self.writers.values():
            w.close()
        self.writers.clear()


def install(tmp: Path, final: Path) -> None:
    """Replace the layout directory `final` by the finished `tmp`."""
    old = final.with_name(final.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
