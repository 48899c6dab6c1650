"""The Spark txn checker's first job: each task parses one stretch of history.jsonl into flat numpy columns.

A task (`parse_task`) reads its byte range of the history with `patterns.scan` (or a `LineParser` where the
patterns cannot decide it), and writes its read
records and sends twice, bucketed by Kafka partition (`r<range>.p<bucket>.npz`) and by value
(`r<range>.v<bucket>.npz`), into a work directory beside the history; it returns a small summary (`Stretch`).
The driver then pairs completions with invocations across stretches (`stitch`): a transaction is named by its
invocation's line index, and a completion whose invocation lies in an earlier stretch was written under a
placeholder (-1 - its own index) that later tasks translate through `Stitched.fixup`.

Columns (int64; NULL for none): reads `p o v txn proc line seq role type` (role 0 poll, 1 drain; `line` the
completion's index, `seq` the record's place in it; `type` the reading transaction's outcome, 0 for a drain),
sends `p o v txn proc pos type` (sends of completed transactions, `pos` the send's place in the transaction).
The sends of the transactions the run cut off are known only once the stretches are joined: `stitch` returns
them, and the driver writes them as one more range's bucket files.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import numpy as np

try:  # several times faster than json on these lines; json remains the judge of what is not JSON
    from orjson import loads as _orjson_loads
    _fast_loads: Callable[[bytes], Any] = _orjson_loads
except ImportError:  # pragma: no cover - orjson is a dependency; this keeps a bare environment working
    _fast_loads = json.loads

from kchaos.checkers.txn.lines import NULL, TYPES, BadLine, Head, LineParser, Txn, complete, cut_off
from kchaos.checkers.txn.patterns import Scanned, Unsettled, places, scan

READ_COLS = ("p", "o", "v", "txn", "proc", "line", "seq", "role", "type")
SEND_COLS = ("p", "o", "v", "txn", "proc", "pos", "type")
HASH = np.uint64(0x9E3779B97F4A7C15)


def value_bucket(v: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each value: a multiplicative hash, so consecutive values spread over every bucket."""
    return ((v.astype(np.uint64) * HASH) >> np.uint64(40)).astype(np.int64) % buckets


@dataclass
class Stretch:
    """What one parse task returns besides its files."""

    error: tuple[int, str] | None = None
    heads: list[Head] = field(default_factory=list)
    tails: dict[int, tuple[int, list[list[Any]]]] = field(default_factory=dict)  # process -> (index, micro-ops)
    first: dict[int, str] = field(default_factory=dict)
    invoked: int = 0
    types: dict[str, int] = field(default_factory=dict)  # completed in the stretch, by outcome
    abandoned: int = 0  # invocations a later invocation of the same process replaced within the stretch
    committed_sends: int = 0
    drain_ok: int = 0
    nemesis_ops: int = 0
    complete: set[int] = field(default_factory=set)
    partitions: set[int] = field(default_factory=set)
    rebalances: list[tuple[int, int, frozenset[int]]] = field(default_factory=list)
    top: dict[int, int] = field(default_factory=dict)  # partition -> highest offset read
    writers: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))  # (value, txn, type)


def parse_task(job: tuple[str, int, int, int, int, bool, str, int, int]) -> Stretch:
    """Parse bytes [start, end) of the history at `path` (line `n0` first; `last`: the file's final stretch),
    write its bucket files into `out`, and return its Stretch. Parsing stops at the first bad line."""
    path, r, start, end, n0, last, out, pbuckets, vbuckets = job
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    st = Stretch()
    try:
        got = _scan(data, n0, data.endswith(b"\n") or not last)
    except BadLine as e:
        st.error = (e.n, e.why)
        return st
    parser, parsed = got.parser, got.parsed
    heads = []
    for h in parser.heads:  # the driver checks them against their invocations; here, only rows if well-formed
        t = Txn(index=-1 - h.index, process=h.process, type=h.type, done=h.index)
        try:
            complete(t, [d[:3] if isinstance(d, list) and d[:1] == ["send"] else ["poll"] for d in h.value],
                     h.value, ValueError)
        except (TypeError, ValueError):
            continue
        heads.append(t)
    txns, sends, records = _join((got.txns, got.sends, got.records), _txn_rows(heads))
    st.invoked, st.abandoned, st.heads, st.first = got.invoked, got.abandoned, parser.heads, parser.first
    st.tails = {p: (t.index, mops) for p, (t, mops) in parser.tails.items()}
    n = np.bincount(txns[:, 3], minlength=max(TYPES.values()) + 1)
    st.types = {name: int(n[code]) for name, code in TYPES.items() if n[code]}
    st.committed_sends = int((txns[sends[:, 3], 3] == TYPES["ok"]).sum())
    st.drain_ok, st.nemesis_ops, st.complete = parsed.drain_ok, parsed.nemesis_ops, parsed.complete
    st.partitions = parsed.partitions | set(sends[:, 1].tolist())
    st.rebalances = parsed.rebalances
    reads, send_rows = _columns(txns, sends, records, parsed.drains)
    if len(reads):
        order = np.argsort(reads[:, 0], kind="stable")
        ps, at = np.unique(reads[order, 0], return_index=True)
        st.top = dict(zip(ps.tolist(), np.maximum.reduceat(reads[order, 1], at).tolist()))
    st.writers = send_rows[:, [2, 3, 6]].copy()
    write_buckets(out, r, reads, send_rows, pbuckets, vbuckets)
    return st


def _scan(data: bytes, n0: int, ended: bool) -> Scanned:
    """The lines of `data` (line `n0` first; a last line that is not JSON left out unless `ended`): read by
    `patterns.scan` where it can decide them, else parsed line by line as JSON. BadLine at the first line the
    checker cannot use."""
    try:
        return scan(data, n0, ended, _loads)
    except Unsettled:
        pass
    parser = LineParser(partial=True)
    lines = data.split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            op = _loads(raw)
        except ValueError as e:
            if i == len(lines) - 1 and not ended:
                break
            raise BadLine(n0 + i, f"not JSON ({getattr(e, 'msg', e)})") from None
        parser.feed(n0 + i, op)
    parsed = parser.finish()
    pending = {id(t) for t, _ in parser.tails.values()}
    abandoned = sum(1 for t in parsed.txns if t.done is None and id(t) not in pending)
    rows = _txn_rows([t for t in parsed.txns if t.done is not None])
    return Scanned(parser, parsed, *rows, invoked=len(parsed.txns), abandoned=abandoned)


def _txn_rows(txns: list[Txn]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Completed transactions as `Scanned`'s txns, sends and records rows."""
    # Records go into numpy in one piece: per-record Python tuples cost more than parsing the JSON did.
    flat: list[list[int]] = []
    counts: list[int] = []
    sends: list[tuple[int, ...]] = []
    for row, t in enumerate(txns):
        n = 0
        for records in t.polls:
            flat += records
            n += len(records)
        counts.append(n)
        sends += [(v, p, NULL if o is None else o, row, i) for i, (v, p, o) in enumerate(t.sends)]
    meta = np.array([(t.index, t.process, cast(int, t.done), TYPES[t.type]) for t in txns], np.int64)
    return (meta.reshape(-1, 4), np.array(sends, np.int64).reshape(-1, 5),
            np.column_stack([np.array(flat, np.int64).reshape(-1, 3), *places(np.array(counts, np.int64))]
                            ).reshape(-1, 5))


def _join(a: tuple[np.ndarray, np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray, np.ndarray]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two sets of txns, sends and records rows as one, `b`'s transactions after `a`'s."""
    shift = np.array([0, 0, 0, len(a[0]), 0], np.int64)
    return np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1] + shift]), np.concatenate([a[2], b[2] + shift])


def _columns(txns: np.ndarray, sends: np.ndarray, records: np.ndarray, drains: list[list[int]]
             ) -> tuple[np.ndarray, np.ndarray]:
    """READ_COLS rows (the records, then the drains') and SEND_COLS rows, each with its transaction's columns."""
    t = txns[records[:, 3]]
    zero = np.zeros(len(records), np.int64)
    reads = np.column_stack([records[:, :3], t[:, 0], t[:, 1], t[:, 2], records[:, 4], zero, t[:, 3]])
    d = np.array(drains, np.int64).reshape(-1, 3)
    none = np.full(len(d), NULL)
    drained = np.column_stack([d, none, none, none, np.arange(len(d)), np.ones(len(d), np.int64),
                               np.zeros(len(d), np.int64)])
    t = txns[sends[:, 3]]
    return (np.concatenate([reads.reshape(-1, len(READ_COLS)), drained.reshape(-1, len(READ_COLS))]),
            np.column_stack([sends[:, 1], sends[:, 2], sends[:, 0], t[:, 0], t[:, 1], sends[:, 4], t[:, 3]]
                            ).reshape(-1, len(SEND_COLS)))


def write_buckets(out: str, r: int, reads: np.ndarray, sends: np.ndarray, pbuckets: int, vbuckets: int) -> None:
    """Write READ_COLS `reads` and SEND_COLS `sends` rows as range `r`'s bucket files in directory `out`: by Kafka
    partition (`r<r>.p<b>.npz`) and by value (`r<r>.v<b>.npz`)."""
    for kind, col, n, bucket in (("p", 0, pbuckets, lambda a: a % pbuckets),
                                 ("v", 2, vbuckets, lambda a: value_bucket(a, vbuckets))):
        rb, sb = bucket(reads[:, col]), bucket(sends[:, col])
        for b in range(n):
            np.savez(f"{out}/r{r:04d}.{kind}{b}.npz", reads=reads[rb == b], sends=sends[sb == b])


def _loads(raw: bytes) -> Any:
    """The line's JSON as json.loads reads it (and its error when it is not JSON)."""
    try:
        return _fast_loads(raw)
    except ValueError:  # not JSON, or JSON orjson does not take (ints beyond 64 bits, NaN): json decides
        return json.loads(raw)


@dataclass
class Stitched:
    """The stretches joined: the first error (line, why), placeholders -> invocation indexes, transaction counts,
    and the sends of the transactions the run cut off (SEND_COLS rows: type info, offset NULL)."""

    error: tuple[int, str] | None
    fixup: np.ndarray  # (placeholder, invocation index), sorted by placeholder
    types: dict[str, int]
    invoked: int
    cut: np.ndarray


def stitch(stretches: list[Stretch], partitions: int | None = None) -> Stitched:
    """Pair each stretch's heads with the invocations earlier stretches left open, in history order. The
    invocations still open at the end were cut off; their sends lie in partition key mod `partitions`, or -1 when
    that is None (`lines.cut_off`)."""
    errors = [s.error for s in stretches if s.error]
    open_: dict[int, tuple[int, list[list[Any]]]] = {}
    fixup, types = [], {"ok": 0, "fail": 0, "info": 0}
    for s in stretches:
        for k, n in s.types.items():
            types[k] += n
        types["info"] += s.abandoned
        if s.error:
            break
        for h in s.heads:
            if h.process not in open_:
                errors.append((h.n, f"{h.type} txn of process {h.process} completes no invocation"))
                continue
            index, mops = open_.pop(h.process)
            try:
                complete(Txn(index=index, process=h.process), mops, h.value, partial(BadLine, h.n))
            except BadLine as e:
                errors.append((e.n, e.why))
            fixup.append((-1 - h.index, index))
        for proc, kind in s.first.items():
            if kind == "invoke" and proc in open_:
                del open_[proc]
                types["info"] += 1
        open_.update(s.tails)
    cut = []
    for proc, (index, mops) in open_.items():
        t = Txn(index=index, process=proc)
        cut_off(t, mops, partitions)
        cut += [(p, NULL, v, index, proc, i, TYPES["info"]) for i, (v, p, _) in enumerate(t.sends)]
        types["info"] += 1
    fix = np.array(sorted(fixup), np.int64).reshape(-1, 2)
    return Stitched(min(errors) if errors else None, fix, types, sum(s.invoked for s in stretches),
                    np.array(cut, np.int64).reshape(-1, len(SEND_COLS)))
