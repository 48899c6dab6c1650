"""A stretch of txn history read as arrays, where its transactions are in the exact form kchaos writes them.

`scan` runs one pattern over the whole stretch. It picks out every transaction invocation and completion in
kchaos's own form (keys in kchaos's order, compact JSON, integers of at most 18 digits written as JSON writes
them); every other line goes to a `LineParser` as JSON. The transactions are then paired per process with numpy,
and the completions read all at once from their joined text: each must mirror its invocation (its text, with a
send's partition and offset and a poll's records taken out, equals the invocation's), and their sends and polled
records become rows of integers. Where the patterns cannot decide a stretch as `LineParser` would (a transaction
line in any other form, a completion that completes nothing or does not mirror its invocation, a bad line),
`Unsettled` says to parse it with `LineParser` alone, which decides it and raises its errors. Python's cost per
micro-op and per record was most of a parse; here it is paid per line at most.

Pure Python and numpy, so that Spark's workers can take it by value.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kchaos.checkers.txn.lines import NULL, TYPES, BadLine, Head, LineParser, Parsed, Txn

__all__ = ["Scanned", "Unsettled", "places", "scan"]

_INT = rb"(?:0|-?[1-9][0-9]{0,17})"  # as JSON writes an int64: no -0, no leading zeros, never beyond 64 bits
_REC = rb"\[" + _INT + rb"," + _INT + rb"," + _INT + rb"\]"
_RECS = rb"\[(?:" + _REC + rb"(?:," + _REC + rb")*+)?\]"
_SEND_DONE = rb'\["send",' + _INT + rb"," + _INT + rb"," + _INT + rb",(?:" + _INT + rb"|null)\]"
_MOP_DONE = rb"(?:" + _SEND_DONE + rb'|\["poll",(?:null|' + _RECS + rb")\])"
_MOP_INVOKED = rb'(?:\["send",' + _INT + rb"," + _INT + rb'\]|\["poll"\])'


def _list(item: bytes) -> bytes:
    return rb"\[(?:" + item + rb"(?:," + item + rb")*+)?\]"


# Every line of a stretch, one match each: groups index, process, invoked micro-ops, completion type, completed
# micro-ops, error (a JSON string, still to be checked) for a txn line in kchaos's form; any other line whole.
_ROWS = re.compile(rb'^(?:\{"index":(' + _INT + rb'),"time":' + _INT + rb',"process":(' + _INT + rb'),"type":"'
                   rb'(?:invoke","f":"txn","value":(' + _list(_MOP_INVOKED) + rb")"
                   rb'|(ok|fail|info)","f":"txn","value":(' + _list(_MOP_DONE) + rb"))"
                   rb'(?:,"error":("(?:[^"\\\n]|\\.)*+"))?\}|(.*))$', re.MULTILINE)
# What a completion adds to its invocation's micro-ops: a poll's records, then (no records left to look like
# one) a send's partition and offset, the only two integers before a "]". Replaced by plain text, as C does it.
_POLL_PARTS = re.compile(rb'\["poll",(?:null|\[\]|\[\[.*?\]\])\]')
_SEND_PARTS = re.compile(rb',-?[0-9]+,(?:-?[0-9]+|null)\]')
_SENDS = re.compile(rb'\["send",-?[0-9]+,(-?[0-9]+,-?[0-9]+,(?:-?[0-9]+|null))\]')  # value,partition,offset
_POLLS = re.compile(rb'\["poll",(\[\[.*?\]\])\]')  # a poll's records, when it returned any
_CODES = {k.encode(): v for k, v in TYPES.items()}


class Unsettled(Exception):
    """The patterns could not decide a stretch as `LineParser` would: parse it with `LineParser` alone."""


@dataclass
class Scanned:
    """A stretch read. The transactions it completed, in invocation order, as `txns` rows (invocation index,
    process, completion index, outcome code of TYPES); their sends as `sends` rows (value, partition, offset or
    NULL, row in `txns`, place in the transaction) and their polled records as `records` rows (partition, offset,
    value, row in `txns`, place in the completion); how many transactions were invoked, and how many a later
    invocation of the same process replaced. `parser` read every other line: its `heads`, `first` and `tails`
    are the stretch's, and `parsed` is its `finish()`."""

    parser: LineParser
    parsed: Parsed
    txns: np.ndarray
    sends: np.ndarray
    records: np.ndarray
    invoked: int
    abandoned: int


def scan(data: bytes, n0: int, ended: bool, loads: Callable[[bytes], Any]) -> Scanned:
    """The lines of `data` (line `n0` first; a last line that is not JSON left out unless `ended`), read as a
    partial `LineParser` reads them. Unsettled where the patterns cannot decide them."""
    rows = _ROWS.findall(data)
    if len(rows) != data.count(b"\n") + 1:
        raise Unsettled
    parser = LineParser(partial=True)
    at = []  # the txn lines' places in `rows`
    for i, (index, _, _, _, _, error, other) in enumerate(rows):
        if index:
            if error and not _string(error, loads):
                raise Unsettled
            at.append(i)
        elif other.strip():
            try:
                op = loads(other)
            except ValueError:
                if i == len(rows) - 1 and not ended:
                    break
                raise Unsettled from None
            if isinstance(op, dict) and op.get("f") == "txn":
                raise Unsettled
            try:
                parser.feed(n0 + i, op)
            except BadLine:
                raise Unsettled from None
    parsed = parser.finish()
    txns, sends, records, invoked, abandoned = _pair(parser, [rows[i] for i in at], np.array(at, np.int64) + n0,
                                                     loads)
    return Scanned(parser, parsed, txns, sends, records, invoked, abandoned)


def _pair(parser: LineParser, rows: list[tuple[bytes, ...]], line: np.ndarray, loads: Callable[[bytes], Any]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Pair the txn lines `rows` (at `line`) per process, as `LineParser.feed` does one at a time: an invocation
    with the next txn line of its process if that completes it; a completion that is its process's first txn line
    in the stretch is a head; an invocation its process's last is a tail."""
    if not rows:
        return np.zeros((0, 4), np.int64), np.zeros((0, 5), np.int64), np.zeros((0, 5), np.int64), 0, 0
    index = _ints(b",".join(r[0] for r in rows), len(rows))
    proc = _ints(b",".join(r[1] for r in rows), len(rows))
    inv = np.array([bool(r[2]) for r in rows], bool)
    order = np.lexsort((line, proc))
    p, i = proc[order], inv[order]
    same = p[1:] == p[:-1]
    first, last = np.r_[True, ~same], np.r_[~same, True]
    paired = np.r_[False, i[:-1] & ~i[1:] & same]  # a completion whose process's previous txn line invoked it
    if (~i & ~paired & ~first).any():
        raise Unsettled  # a completion of nothing: LineParser raises the error
    # Heads, first and tails in the order LineParser's dicts and lists hold them: a tail's process went into its
    # open invocations when the run of invocations that ends the process's stretch began.
    for k in np.sort(order[~i & ~paired]):
        parser.heads.append(Head(int(line[k]), int(index[k]), int(proc[k]), rows[k][3].decode(), loads(rows[k][4])))
    for k in np.sort(order[first]):
        parser.first[int(proc[k])] = "invoke" if inv[k] else "complete"
    began = np.maximum.accumulate(np.where(i & (first | np.r_[True, ~i[:-1]]), np.arange(len(i)), 0))
    tails = np.flatnonzero(i & last)
    for j in tails[np.argsort(order[began[tails]], kind="stable")]:
        k = order[j]
        parser.tails[int(proc[k])] = (Txn(index=int(index[k]), process=int(proc[k])), loads(rows[k][2]))
    comp = order[paired]
    start = order[np.flatnonzero(paired) - 1]
    by_start = np.argsort(start, kind="stable")  # invocation order
    start, comp = start[by_start], comp[by_start]
    done = b"\n".join(rows[k][4] for k in comp)
    if _SEND_PARTS.sub(b"]", _POLL_PARTS.sub(b'["poll"]', done)) != b"\n".join(rows[k][2] for k in start):
        raise Unsettled  # a completion that does not mirror its invocation: LineParser raises the error
    txns = np.stack([index[start], proc[start], index[comp],
                     np.array([_CODES[rows[k][3]] for k in comp], np.int64)], 1).reshape(-1, 4)
    texts = done.split(b"\n") if len(comp) else []
    values = _SENDS.findall(done)
    flat = _ints(b",".join(values).replace(b"null", str(NULL).encode()), 3 * len(values)).reshape(-1, 3)
    n_sends = np.array([t.count(b'["send"') for t in texts], np.int64)
    sends = np.column_stack([flat, *places(n_sends)])
    polls = _POLLS.findall(done)
    recs = b",".join(polls).translate(None, b"[]")
    n_recs = np.array([t.count(b"[") - 1 - t.count(b'["') - t.count(b'["poll",[') for t in texts], np.int64)
    records = np.column_stack([_ints(recs, 3 * int(n_recs.sum())).reshape(-1, 3), *places(n_recs)])
    invocations = int(inv.sum())
    return txns, sends.reshape(-1, 5), records.reshape(-1, 5), invocations, \
        invocations - len(comp) - int((i & last).sum())


def places(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items counted per transaction: each item's transaction row and its place within the transaction."""
    rows = np.repeat(np.arange(len(counts)), counts)
    return rows, np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)


def _ints(text: bytes, n: int) -> np.ndarray:
    """`n` comma-separated integers; Unsettled if `text` holds any other number of them."""
    if not n:
        return np.zeros(0, np.int64)
    a = np.fromstring(text, np.int64, sep=",")
    if len(a) != n:
        raise Unsettled
    return a


def _string(text: bytes, loads: Callable[[bytes], Any]) -> bool:
    """Whether `text` is a JSON string that `loads` takes."""
    try:
        return isinstance(loads(text), str)
    except ValueError:
        return False
