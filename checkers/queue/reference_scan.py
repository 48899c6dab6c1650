"""Pass 1 of the reference checker: one streaming pass from history ops to compact columns.

Every number the anomaly definitions need is appended to an `array` (8 bytes
a number, no per-record Python objects kept), so a 10M-op history fits in a
few hundred MB; pass 2 (the reference checker) works on these columns with
numpy. Per op the work is O(1) plus the op's records, which are appended in
bulk.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any, TypeGuard

import numpy as np

OP_TYPES = ("invoke", "ok", "fail", "info")
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
# Counters reported under `stats`, as the Spark checker names them.
COUNTERS = ("send_invoke", "send_ok", "send_fail", "send_info", "poll_ok", "drain_ok",
            "nemesis_ops", "malformed_client_ops", "malformed_records")


@dataclass(frozen=True)
class Columns:
    """What pass 1 keeps of a history. Arrays are int64 unless noted; rows are in history order.

    `reads` holds one row [partition, offset, value] per well-formed record of an
    ok poll or drain: the first `polled` rows come from polls (`poll_stream`
    gives each its stream: one consumer process between two resets), the rest
    from drains. Acks are ok sends with an integer value; their partition and
    offset may be absent (`ack_has_partition`, `ack_has_offset`, bool).
    `poll_generation` gives each polled row the `generation` of its poll (a
    consumer group member's, `--consumer-mode subscribe`), INT64_MIN for none;
    `committed` is each partition's offset in the last ok `committed` op of it.
    """

    invoked: np.ndarray
    failed: np.ndarray
    ack_value: np.ndarray
    ack_partition: np.ndarray
    ack_offset: np.ndarray
    ack_has_partition: np.ndarray
    ack_has_offset: np.ndarray
    reads: np.ndarray
    polled: int
    poll_stream: np.ndarray
    stream_process: tuple[int, ...]
    poll_generation: np.ndarray
    committed: dict[int, int]
    complete: frozenset[int]
    partitions: frozenset[int]
    nonmonotonic_send: np.ndarray
    counters: dict[str, int]


def is_int64(x: Any) -> TypeGuard[int]:
    """True for a Python int (not a bool) that fits in 64 signed bits."""
    return type(x) is int and INT64_MIN <= x <= INT64_MAX


def _append_records(records: list[Any], out: array) -> tuple[int, int]:
    """Append the well-formed [p, o, v] entries of `records` to `out`; return (kept, malformed)."""
    try:
        # Fast path: every entry has length 3 and every item is an int64 (bools are not ints here).
        if set(map(len, records)) <= {3}:
            flat = list(chain.from_iterable(records))
            if set(map(type, flat)) <= {int}:
                out.extend(array("q", flat))  # OverflowError beyond 64 bits: nothing appended
                return len(records), 0
    except (TypeError, OverflowError):
        pass
    good = [r for r in records
            if type(r) is list and len(r) == 3 and all(is_int64(x) for x in r)]
    out.extend(array("q", chain.from_iterable(good)))
    return len(good), len(records) - len(good)


def scan(ops: Iterable[dict[str, Any]]) -> Columns:
    """One pass over `ops` (in history order) keeping what the definitions need.

    Nemesis ops are only counted. A client op is malformed (counted, otherwise
    ignored) if its process is not an integer, its type unknown, its f not a
    string, its partition or offset not a 64-bit integer, its `complete` not a
    boolean, a send has no integer value (after inheriting from its
    invocation), or an ok poll or drain has no records list. A completion
    whose previous op of the same process is an invocation of the same f
    takes `value` and `partition` from it when it has none.
    """
    invoked, failed = array("q"), array("q")
    ack_v, ack_p, ack_o = array("q"), array("q"), array("q")
    ack_hp, ack_ho = bytearray(), bytearray()
    polls, drains, poll_sid, poll_gen = array("q"), array("q"), array("q"), array("q")
    committed: dict[int, int] = {}
    stream_of: dict[int, int] = {}
    stream_process: list[int] = []
    last: dict[int, tuple[Any, ...]] = {}
    # Located acks for nonmonotonic_send: producer instance (kind, id), partition, invocation, offset, value.
    sent = array("q")
    complete: set[int] = set()
    partitions: set[int] = set()
    n = dict.fromkeys(COUNTERS, 0)
    for ordinal, op in enumerate(ops):
        get = op.get
        proc = get("process")
        if proc == "nemesis":
            n["nemesis_ops"] += 1
            continue
        type_, f, value, partition, offset = get("type"), get("f"), get("value"), get("partition"), get("offset")
        # is_int64, inlined: this test runs for every op.
        if (type(proc) is not int or type_ not in OP_TYPES or type(f) is not str
                or (partition is not None
                    and (type(partition) is not int or not INT64_MIN <= partition <= INT64_MAX))
                or (offset is not None
                    and (type(offset) is not int or not INT64_MIN <= offset <= INT64_MAX))
                or ("complete" in op and type(op["complete"]) is not bool)):
            n["malformed_client_ops"] += 1
            continue
        producer = get("producer")
        prev = last.get(proc)
        last[proc] = (type_, f, value, partition, producer, ordinal)
        invoked_at = ordinal
        if type_ != "invoke" and prev is not None and prev[0] == "invoke" and prev[1] == f:
            value = prev[2] if value is None else value
            partition = prev[3] if partition is None else partition
            producer = prev[4] if producer is None else producer
            invoked_at = prev[5]
        if f == "send":
            if not is_int64(value):
                n["malformed_client_ops"] += 1
                continue
            n["send_" + type_] += 1
            if partition is not None:
                partitions.add(partition)
            if type_ == "invoke":
                invoked.append(value)
            elif type_ == "fail":
                failed.append(value)
            elif type_ == "ok":
                ack_v.append(value)
                ack_p.append(partition if partition is not None else 0)
                ack_o.append(offset if offset is not None else 0)
                ack_hp.append(partition is not None)
                ack_ho.append(offset is not None)
                if partition is not None and offset is not None:
                    # A send without a producer instance went through its own process's.
                    if is_int64(producer):
                        sent.extend((0, producer, partition, invoked_at, offset, value))
                    else:
                        sent.extend((1, proc, partition, invoked_at, offset, value))
        elif f in ("poll", "drain") and type_ == "ok":
            records = get("records")
            if type(records) is not list:
                n["malformed_client_ops"] += 1
                continue
            n[f + "_ok"] += 1
            kept, bad = _append_records(records, polls if f == "poll" else drains)
            n["malformed_records"] += bad
            if f == "poll":
                sid = stream_of.get(proc)
                if sid is None:
                    sid = stream_of[proc] = len(stream_process)
                    stream_process.append(proc)
                poll_sid.extend(repeat(sid, kept))
                gen = get("generation")
                poll_gen.extend(repeat(gen if is_int64(gen) else INT64_MIN, kept))
            else:
                if partition is not None:
                    partitions.add(partition)
                    if get("complete") is True:
                        complete.add(partition)
        elif f == "drain" and partition is not None:
            partitions.add(partition)
        elif f == "committed" and type_ == "ok" and partition is not None and offset is not None:
            committed[partition] = offset
        elif f == "assign" or (f == "poll" and type_ == "info"):
            # A new assignment restarts the consumer's position, and an info poll may
            # have consumed records the history does not show: either ends its stream.
            stream_of.pop(proc, None)
    reads = np.frombuffer(polls + drains, dtype=np.int64).reshape(-1, 3)
    return Columns(
        invoked=np.frombuffer(invoked, dtype=np.int64), failed=np.frombuffer(failed, dtype=np.int64),
        ack_value=np.frombuffer(ack_v, dtype=np.int64),
        ack_partition=np.frombuffer(ack_p, dtype=np.int64),
        ack_offset=np.frombuffer(ack_o, dtype=np.int64),
        ack_has_partition=np.frombuffer(ack_hp, dtype=np.bool_),
        ack_has_offset=np.frombuffer(ack_ho, dtype=np.bool_),
        reads=reads, polled=len(polls) // 3, poll_stream=np.frombuffer(poll_sid, dtype=np.int64),
        stream_process=tuple(stream_process), poll_generation=np.frombuffer(poll_gen, dtype=np.int64),
        committed=committed, complete=frozenset(complete),
        partitions=frozenset(partitions), nonmonotonic_send=_nonmonotonic(sent), counters=n)


def _nonmonotonic(sent: array) -> np.ndarray:
    """Values acked at (p, o) whose send was invoked, through the same producer instance, after an
    earlier-invoked send to p that was acked at an offset >= o."""
    a = np.frombuffer(sent, dtype=np.int64).reshape(-1, 6)
    own, who, p, inv, o, v = a.T
    order = np.lexsort((inv, p, who, own))
    own, who, p, o, v = own[order], who[order], p[order], o[order], v[order]
    out = []
    start = 0
    for end in [*np.flatnonzero((own[1:] != own[:-1]) | (who[1:] != who[:-1]) | (p[1:] != p[:-1])) + 1, len(o)]:
        if end - start > 1:
            prior = np.maximum.accumulate(o[start:end - 1])
            out.append(v[start + 1:end][o[start + 1:end] <= prior])
        start = end
    return np.concatenate(out) if out else np.zeros(0, np.int64)
