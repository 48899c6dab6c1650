"""A share history's ops as arrays of integers, for the Spark checker's collect tasks: the pairing of the
reference's `collect` (each process's invocations with its own completions, a share-ack's completion with the
oldest open share-ack of its process that holds any of its records), with each record's deliveries and
acknowledgements as rows of integers rather than objects.

A share-poll or share-ack line in the exact form kchaos writes it is read by a pattern, and its records or
acknowledgements by numpy; any other line is parsed as JSON and goes the same way. Python's cost per record was
most of the collect's time; here it is paid per line.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from kchaos.checkers.share.reference import ACK_KINDS, NS_PER_S, new_second

__all__ = ["ACK_WIDTH", "DELIVERY_WIDTH", "KEY_BITS", "KINDS", "OUTCOMES", "Arrays", "collect_arrays", "code"]

KINDS = ACK_KINDS  # an acknowledgement's kind code is its place here; any other kind is len(KINDS)
OUTCOMES = ("ok", "fail", "info")  # the same for outcomes
_INFO = OUTCOMES.index("info")
# A delivery: partition, offset, value, count, process, the poll's invocation and completion (history indexes),
# acquired from (index and ns), completion ns. An acknowledgement: partition, offset, kind, outcome, process,
# invocation, completion (-1: never completed).
DELIVERY_WIDTH, ACK_WIDTH = 10, 7
KEY_BITS = 40  # offsets below 2**40: a record's key is partition << 40 | offset

_LINE = re.compile(rb'\{"index":(\d+),"time":(\d+),"process":(\d+),"type":"(invoke|ok|info|fail)",'
                   rb'"f":"share-(poll|ack)","topic":"[^"\\]*"(.*)\}')
_RECORDS, _ACKS = b',"records":', b',"acks":'
# An invocation's acknowledgements end with their kind; a completion's with their outcome, after their kind.
_INVOKED = tuple((f'"{k}"]'.encode(), f"{i}]".encode()) for i, k in enumerate(KINDS))
_TOLD = (tuple((f'"{k}",'.encode(), f"{i},".encode()) for i, k in enumerate(KINDS))
         + tuple((f'"{o}"]'.encode(), f"{i}]".encode()) for i, o in enumerate(OUTCOMES)))


def code(text: Any, names: tuple[str, ...]) -> int:
    """`text`'s place in `names`, or len(names) for any other value."""
    return names.index(text) if text in names else len(names)


@dataclass
class Arrays:
    """What one bucket of processes' ops say (the reference's `Collected`, as arrays): deliveries and
    acknowledgements as rows (DELIVERY_WIDTH and ACK_WIDTH columns), acknowledged sends (value, partition, offset
    or -1, in history order), each process's leaves ([(index, crashed)]), the final `share-state`, and the
    per-second tallies."""

    deliveries: np.ndarray
    acks: np.ndarray
    acked: np.ndarray
    left: dict[Any, list[tuple[int, bool]]]
    state: dict[int, Any] | None
    seconds: dict[int, dict[str, Any]]


def _ints(text: bytes, width: int, swaps: tuple[tuple[bytes, bytes], ...] = (), names: int = 0) -> np.ndarray | None:
    """The JSON array of arrays `text` as rows of `width` integers, with `names` names in each row swapped for
    their codes by `swaps`; None when it is anything else."""
    swapped = 0
    for old, new in swaps:
        swapped += text.count(old)
        text = text.replace(old, new)
    flat = text.translate(None, b"[]")
    if not flat:
        return np.zeros((0, width), np.int64) if text == b"[]" else None
    if flat.translate(None, b"0123456789,-"):
        return None
    values = np.fromstring(flat, np.int64, sep=",")
    rows = text.count(b"[") - 1
    if values.size != flat.count(b",") + 1 or values.size != rows * width or swapped != rows * names:
        return None
    return values.reshape(rows, width)


def _rows(items: Any, width: int) -> np.ndarray:
    """Rows parsed from JSON (lists of `width` items; names already coded)."""
    return np.array(items, np.int64).reshape(-1, width)


class _Pairing:
    """The state of `collect_arrays`'s one pass."""

    def __init__(self) -> None:
        self.open_polls: dict[Any, tuple[int, int, int, int]] = {}  # process -> index, ns, acquired from index, ns
        self.floor: dict[Any, tuple[int, int]] = {}  # as the reference's `collect`
        self.open_acks: dict[Any, list[tuple[int, np.ndarray]]] = defaultdict(list)
        self.records: list[np.ndarray] = []
        self.polls: list[tuple[Any, int, int, int, int, int]] = []  # each records' process, inv, index, since...
        self.told: list[np.ndarray] = []
        self.ack_ops: list[tuple[Any, int, int]] = []  # each told's process, invocation, completion
        self.seconds: list[tuple[int, int]] = []  # (second, records delivered)
        self.ack_seconds: list[tuple[int, np.ndarray]] = []  # each completion's second and the kinds it told
        self.acked: list[tuple[int, int, int]] = []
        self.left: dict[Any, list[tuple[int, bool]]] = defaultdict(list)
        self.state: dict[int, Any] | None = None

    def poll(self, t: str | None, p: Any, index: int, ns: int, records: np.ndarray | None) -> None:
        if t == "invoke":
            self.open_polls[p] = (index, ns, *self.floor.get(p, (index, ns)))
            return
        if p not in self.open_polls:
            return
        inv, inv_ns, since, since_ns = self.open_polls.pop(p)
        if t != "ok":
            return
        if records is None or not len(records):
            self.floor[p] = (inv, inv_ns)
            return
        self.seconds.append((ns // NS_PER_S, len(records)))
        self.records.append(records)
        self.polls.append((p, inv, index, since, since_ns, ns))

    def ack(self, t: str | None, p: Any, index: int, ns: int, acks: np.ndarray | None) -> None:
        """`acks`: an invocation's rows (partition, offset, kind), a completion's (and outcome), or None."""
        if t == "invoke":
            self.open_acks[p].append((index, acks if acks is not None else np.zeros((0, 3), np.int64)))
            return
        still = self.open_acks.get(p)
        if not still:
            return
        inv, invoked = still.pop(_owner(still, acks))
        if acks is None or not len(acks):
            told = np.column_stack([invoked, np.full(len(invoked), _INFO, np.int64)])
        elif t != "ok":
            told = acks.copy()
            told[:, 3] = _INFO
        else:
            told = acks
        self._told(told, p, inv, index)
        self.ack_seconds.append((ns // NS_PER_S, told[:, 2]))

    def _told(self, told: np.ndarray, p: Any, inv: int, done: int) -> None:
        self.told.append(told)
        self.ack_ops.append((p, inv, done))

    def op(self, op: dict[str, Any], n: int) -> None:
        """One op parsed from JSON (`n`: its place, when it has no index)."""
        f, t, p = op.get("f"), op.get("type"), op.get("process")
        index, ns = int(op.get("index", n)), int(op.get("time", 0))
        if f == "send" and t == "ok":
            offset = op.get("offset")
            self.acked.append((int(op["value"]), int(op["partition"]), -1 if offset is None else int(offset)))
        elif f == "share-poll":
            self.poll(t, p, index, ns, _rows(op.get("records") or [], 4) if t == "ok" else None)
        elif f == "share-ack":
            acks = op.get("acks") or []
            if t == "invoke":
                self.ack(t, p, index, ns, _rows([[a, o, code(k, KINDS)] for a, o, k in acks], 3))
            else:
                self.ack(t, p, index, ns, _rows([[a, o, code(k, KINDS), code(r, OUTCOMES)] for a, o, k, r in acks],
                                                4) if acks else None)
        elif f == "share-leave" and t in ("ok", "info"):
            self.left[p].append((index, t == "info"))
        elif f == "share-state" and t == "ok":
            self.state = {int(k): v for k, v in (op.get("partitions") or {}).items()}

    def line(self, line: bytes, n: int) -> None:
        m = _LINE.fullmatch(line)
        if m is not None:
            index_, ns_, p_, t_, what, rest = m.groups()
            index, ns, p, t = int(index_), int(ns_), int(p_), t_.decode()
            parsed: np.ndarray | None = None
            if what == b"poll" and not rest:
                return self.poll(t, p, index, ns, None)
            if what == b"poll" and t == "ok" and rest.startswith(_RECORDS):
                parsed = _ints(rest[len(_RECORDS):], 4)
                if parsed is not None:
                    return self.poll(t, p, index, ns, parsed)
            elif what == b"ack" and rest.startswith(_ACKS):
                invoke = t == "invoke"
                parsed = _ints(rest[len(_ACKS):], 3 if invoke else 4, _INVOKED if invoke else _TOLD, 1 if invoke else 2)
                if parsed is not None:
                    return self.ack(t, p, index, ns, parsed)
        try:
            op = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None  # the cut-off last line of a killed run, as the reference's reader skips it
        if isinstance(op, dict):
            self.op(op, n)
        return None

    def arrays(self) -> Arrays:
        for p, still in self.open_acks.items():  # never completed: unknown
            for inv, invoked in still:
                self._told(np.column_stack([invoked, np.full(len(invoked), _INFO, np.int64)]), p, inv, -1)
        return Arrays(_deliveries(self.records, self.polls), _acks(self.told, self.ack_ops),
                      np.array(self.acked, np.int64).reshape(-1, 3), dict(self.left), self.state, self._seconds())

    def _seconds(self) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for sec, n in self.seconds:
            out.setdefault(sec, new_second())["delivered"] += n
        if self.ack_seconds:
            secs = np.repeat(np.array([sec for sec, _ in self.ack_seconds], np.int64),
                             [len(kinds) for _, kinds in self.ack_seconds])
            kinds = np.concatenate([kinds for _, kinds in self.ack_seconds])
            told = (kinds >= 0) & (kinds < len(KINDS))
            keys, counts = np.unique(secs[told] * len(KINDS) + kinds[told], return_counts=True)
            for key, n in zip(keys.tolist(), counts.tolist()):
                sec, kind = divmod(key, len(KINDS))
                out.setdefault(sec, new_second())[KINDS[kind]] += n
        return out


def _owner(still: list[tuple[int, np.ndarray]], told: np.ndarray | None) -> int:
    """The reference's `_owner`: the oldest open share-ack holding any record `told` names; the oldest if none."""
    if len(still) == 1 or told is None or not len(told):
        return 0
    keys = (told[:, 0] << KEY_BITS) | told[:, 1]
    for i, (_, rows) in enumerate(still):
        if len(rows) and np.isin((rows[:, 0] << KEY_BITS) | rows[:, 1], keys).any():
            return i
    return 0


def _deliveries(records: list[np.ndarray], polls: list[tuple[Any, ...]]) -> np.ndarray:
    if not records:
        return np.zeros((0, DELIVERY_WIDTH), np.int64)
    each = np.repeat(np.array(polls, np.int64), [len(r) for r in records], axis=0)
    return np.column_stack([np.concatenate(records), each])


def _acks(told: list[np.ndarray], ops: list[tuple[Any, int, int]]) -> np.ndarray:
    if not told:
        return np.zeros((0, ACK_WIDTH), np.int64)
    each = np.repeat(np.array(ops, np.int64), [len(r) for r in told], axis=0)
    return np.column_stack([np.concatenate(told), each])


def collect_arrays(lines: list[bytes]) -> Arrays:
    """The arrays of the ops on `lines` (history.jsonl lines of some processes, in history order)."""
    pairing = _Pairing()
    for n, line in enumerate(lines):
        if line:
            pairing.line(line, n)
    return pairing.arrays()
