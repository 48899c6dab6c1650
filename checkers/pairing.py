"""Columns the converter derives from history order, so the Spark checker needs no per-process window.

Every line of a history belongs to a process; a completion answers the
previous line of its process when that line is an invocation of the same f.
`Pairing.derive(table)` takes the lines of one chunk in file order and
returns, carrying state from chunk to chunk:

- `latency_ns`: on a paired completion, its time minus its invocation's;
- `value`, `partition`, `producer`: a paired completion's own, else its invocation's;
- `invoked_line`: the line number (0-based, in the file) of a paired completion's
  invocation, else of the line itself: a send's place in invocation order;
- `stream`: how many resets (an assign op, or a poll completed `info`) the
  line's process had up to and including this line: a consumer's poll
  stream is one value of `stream`;
- `epoch`: how many nemesis lines came before the line's invocation (before
  the line itself when unpaired), so client ops can be placed in fault
  windows exactly, by group rather than by time range;
- `acked_before`: on an ok send with a partition and offset, the highest
  offset its process had been acknowledged earlier in that partition (null
  if none): a send acknowledged at or below it was reordered;
- `paired`: whether the line is a paired completion (for validation).

All of it is vectorised with numpy: one stable sort by process per chunk.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Pairing", "TYPE_CODES"]

TYPE_CODES = {"invoke": 0, "ok": 1, "fail": 2, "info": 3}
_INVOKE, _OK, _INFO = 0, 1, 3
_NONE = -1
_NULL = np.iinfo(np.int64).min  # stands for a missing integer inside numpy arrays
_CARRIED = ("type", "f", "time", "value", "partition", "producer", "line", "epoch", "stream")


def _codes(arr: pa.ChunkedArray, table: dict[str, int], grow: bool) -> np.ndarray:
    """Each string of `arr` as its code in `table` (new strings added if `grow`), -1 for null/unknown."""
    enc = arr.combine_chunks().dictionary_encode() if len(arr) else pa.array([], pa.string()).dictionary_encode()
    names = enc.dictionary.to_pylist()
    if grow:
        for s in names:
            table.setdefault(s, len(table))
    lookup = np.array([table.get(s, _NONE) for s in names] + [_NONE], dtype=np.int64)
    idx = enc.indices.fill_null(len(names)).to_numpy(zero_copy_only=False).astype(np.int64)
    return lookup[idx]


def _ints(arr: pa.ChunkedArray) -> np.ndarray:
    return arr.combine_chunks().cast(pa.int64()).fill_null(_NULL).to_numpy(zero_copy_only=False)


def _arrow(a: np.ndarray) -> pa.Array:
    return pa.array(a, pa.int64(), mask=a == _NULL)


@dataclass
class Pairing:
    """The state carried between chunks: per process, its last line and its stream count."""

    procs: dict[str, int] = field(default_factory=dict)
    fs: dict[str, int] = field(default_factory=dict)
    nemesis_lines: int = 0
    # Indexed by process code; `last_type` _NONE until the process has a line.
    last: dict[str, np.ndarray] = field(default_factory=lambda: {
        k: np.empty(0, np.int64) for k in _CARRIED})
    high: dict[tuple[int, int], int] = field(default_factory=dict)  # (process, partition) -> top acked offset
    lines: int = 0  # lines before the next chunk

    def outstanding(self) -> dict[str, str]:
        """process -> f of its invocation awaiting completion (processes as strings)."""
        fnames = {c: s for s, c in self.fs.items()}
        return {p: fnames[int(self.last["f"][c])] for p, c in self.procs.items()
                if c < len(self.last["type"]) and self.last["type"][c] == _INVOKE and self.last["f"][c] >= 0}

    def derive(self, t: pa.Table, usable: np.ndarray) -> tuple[dict[str, pa.Array], np.ndarray, Pairing]:
        """(derived columns, paired flags, the state after `t`) for lines `t` in file order.

        `t` has string `process`, `type`, `f` and integer `time`, `value`,
        `partition` columns; `usable[i]` says line i is a well-formed client
        op (resets count only on those). `self` is not changed: the caller
        keeps the returned state once it accepts the chunk.
        """
        n = t.num_rows
        state = Pairing(dict(self.procs), dict(self.fs), self.nemesis_lines,
                        {k: v.copy() for k, v in self.last.items()}, dict(self.high), self.lines + n)
        line = np.arange(self.lines, self.lines + n, dtype=np.int64)
        proc = _codes(t.column("process"), state.procs, grow=True)
        nem_code = state.procs.get("nemesis", _NONE)
        nem = (proc == nem_code) if nem_code != _NONE else np.zeros(n, bool)
        line_epoch = state.nemesis_lines + np.cumsum(nem) - nem
        state.nemesis_lines += int(nem.sum())
        type_ = _codes(t.column("type"), TYPE_CODES, grow=False)
        f = _codes(t.column("f"), state.fs, grow=True)
        time, value, part = (_ints(t.column(c)) for c in ("time", "value", "partition"))
        producer = _ints(t.column("producer")) if "producer" in t.column_names else np.full(n, _NULL, np.int64)
        size = len(state.procs)
        for k, arr in state.last.items():
            if len(arr) < size:
                fill = 0 if k == "stream" else (_NONE if k in ("type", "f") else _NULL)
                state.last[k] = np.concatenate([arr, np.full(size - len(arr), fill, np.int64)])
        last = state.last

        # Small integer keys take numpy's radix sort.
        order = np.argsort(proc.astype(np.int16) if len(state.procs) < 32000 else proc, kind="stable")
        sp = proc[order]  # process codes in sorted order
        first = np.ones(n, bool)
        first[1:] = sp[1:] != sp[:-1]
        # The previous line of each line's process: in this chunk, or carried.
        prev = {}
        for name, col in (("type", type_), ("f", f), ("time", time), ("value", value),
                          ("partition", part), ("producer", producer), ("line", line), ("epoch", line_epoch)):
            p = np.empty(n, np.int64)
            p[1:] = col[order[:-1]]
            carried = last[name][np.maximum(sp, 0)]
            p[first] = carried[first]
            if name in ("type", "f"):
                p[sp < 0] = _NONE
            else:
                p[sp < 0] = _NULL
            prev[name] = np.empty(n, np.int64)
            prev[name][order] = p
        paired = ((proc >= 0) & (type_ != _INVOKE) & (type_ >= 0) & (prev["type"] == _INVOKE)
                  & (prev["f"] == f) & (f >= 0))
        latency = np.where(paired & (time != _NULL) & (prev["time"] != _NULL), time - prev["time"], _NULL)
        value = np.where(paired & (value == _NULL), prev["value"], value)
        part = np.where(paired & (part == _NULL), prev["partition"], part)
        producer = np.where(paired & (producer == _NULL), prev["producer"], producer)
        invoked_line = np.where(paired, prev["line"], line)
        epoch = np.where(paired, prev["epoch"], line_epoch)

        poll, assign = state.fs.get("poll", -2), state.fs.get("assign", -2)
        reset = usable & ((f == assign) | ((f == poll) & (type_ == _INFO)))
        rs = reset[order].astype(np.int64)
        cs = np.cumsum(rs)
        start = np.maximum.accumulate(np.where(first, np.arange(n), 0)) if n else np.zeros(0, np.int64)
        base = np.where(start > 0, cs[start - 1], 0) if n else cs
        stream_sorted = last["stream"][np.maximum(sp, 0)] + cs - base
        stream_sorted[sp < 0] = 0
        stream = np.empty(n, np.int64)
        stream[order] = stream_sorted

        ends = np.ones(n, bool)
        ends[:-1] = sp[1:] != sp[:-1]
        ends &= sp >= 0
        rows = order[ends]
        codes = sp[ends]
        for name, col in (("type", type_), ("f", f), ("time", time), ("value", value),
                          ("partition", part), ("producer", producer), ("line", line),
                          ("epoch", line_epoch), ("stream", stream)):
            last[name][codes] = col[rows]
        acked = usable & (f == state.fs.get("send", -2)) & (type_ == _OK) & (part != _NULL)
        before = state._acked_before(np.nonzero(acked)[0], proc, part, _ints(t.column("offset")))
        cols = {"latency_ns": _arrow(latency), "value": _arrow(value), "partition": _arrow(part),
                "stream": pa.array(stream, pa.int64()), "epoch": pa.array(epoch, pa.int64()),
                "acked_before": _arrow(before), "producer": _arrow(producer),
                "invoked_line": pa.array(invoked_line, pa.int64())}
        return cols, paired, state


    def _acked_before(self, rows: np.ndarray, proc: np.ndarray, part: np.ndarray,
                      offset: np.ndarray) -> np.ndarray:
        """`acked_before` for a chunk: at `rows` (ok sends, file order), the running maximum of
        earlier offsets per (process, partition), carried in `self.high`."""
        out = np.full(len(proc), _NULL, np.int64)
        rows = rows[offset[rows] != _NULL]
        if not len(rows):
            return out
        kp, kq = proc[rows], part[rows]
        order = np.lexsort((kq, kp))  # stable: file order within each (process, partition)
        sp, sq = kp[order], kq[order]
        cut = np.flatnonzero((sp[1:] != sp[:-1]) | (sq[1:] != sq[:-1])) + 1
        for lo, hi in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [len(order)]]).tolist()):
            at = rows[order[lo:hi]]
            key = (int(sp[lo]), int(sq[lo]))
            top = np.maximum.accumulate(offset[at])
            prior = self.high.get(key, _NULL)
            out[at] = np.maximum(np.concatenate([[prior], top[:-1]]), prior)
            self.high[key] = max(prior, int(top[-1]))
        return out


def usable_mask(t: pa.Table, corrupt: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Lines that are well-formed client ops: a process other than the nemesis, a known type, an f."""
    proc, type_, f = t.column("process"), t.column("type"), t.column("f")
    ok = pc.and_(pc.and_(pc.is_valid(proc), pc.not_equal(proc, "nemesis")),
                 pc.and_(pc.is_in(type_, pa.array(list(TYPE_CODES))), pc.is_valid(f)))
    ok = pc.and_(pc.fill_null(ok, False), pc.is_null(corrupt))
    return (ok.to_numpy(zero_copy_only=False) if isinstance(ok, pa.Array)
            else ok.combine_chunks().to_numpy(zero_copy_only=False))
