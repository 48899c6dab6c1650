"""Compact builders for handmade histories in checker tests."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from corpora.queue import PLANTS
from corpora.sim import NEEDS_CONSUMER, NEEDS_OFFSETS, TAIL_PLANTS
from hypothesis import strategies as st

from kchaos import nemesis
from kchaos.core.faults import write_faults

MS = 1_000_000


def write_registry_faults(run_dir: Path, ops: Iterable[Mapping[str, Any]]) -> Path:
    """Write run_dir/faults.json as the runner writes it: the nemesis registry's word on each spec the nemesis
    lines of `ops` name."""
    specs = dict.fromkeys(op["nemesis"] for op in ops
                          if op.get("process") == "nemesis" and isinstance(op.get("nemesis"), str))
    return write_faults(run_dir, [nemesis.fault_kind(s) for s in specs])


class HistoryBuilder:
    """Appends history records with consecutive indexes and increasing times.

    Each op advances time by `step_ms` unless a latency is given; high-level
    helpers (`send`, `poll`, `drain`) record an invocation and its completion
    back to back.
    """

    def __init__(self, step_ms: float = 1.0):
        self.ops: list[dict[str, Any]] = []
        self.t = 0
        self.step = int(step_ms * MS)

    def op(self, process: int | str, type_: str, f: str, *, after_ms: float | None = None,
           **fields: Any) -> dict[str, Any]:
        """Append one raw record `after_ms` (default: one step) after the previous one."""
        self.t += self.step if after_ms is None else int(after_ms * MS)
        rec = {"index": len(self.ops), "time": self.t, "process": process, "type": type_,
               "f": f, **fields}
        self.ops.append(rec)
        return rec

    def send(self, process: int, value: int, partition: int = 0, outcome: str = "ok",
             offset: int | None = None, latency_ms: float | None = None) -> HistoryBuilder:
        """A send of `value` to `partition` completing with `outcome` (ok needs `offset`)."""
        self.op(process, "invoke", "send", topic="t", partition=partition, value=value)
        done: dict[str, Any] = {"topic": "t", "partition": partition, "value": value}
        if outcome == "ok":
            assert offset is not None, "an ok send needs an offset"
            done["offset"] = offset
        else:
            done["error"] = "boom"
        self.op(process, outcome, "send", after_ms=latency_ms, **done)
        return self

    def poll(self, process: int, records: list[tuple[int, int, int]], outcome: str = "ok",
             latency_ms: float | None = None) -> HistoryBuilder:
        """A poll returning `records` as [partition, offset, value] triples."""
        self.op(process, "invoke", "poll")
        extra = {"records": [list(r) for r in records]} if outcome == "ok" else {"error": "x"}
        self.op(process, outcome, "poll", after_ms=latency_ms, **extra)
        return self

    def drain(self, process: int, partition: int, records: list[tuple[int, int, int]],
              complete: bool = True) -> HistoryBuilder:
        """One ok drain of `partition`; `complete` says it reached the high watermark."""
        self.op(process, "invoke", "drain", partition=partition)
        self.op(process, "ok", "drain", partition=partition,
                records=[list(r) for r in records], complete=complete, node="n1")
        return self

    def nemesis(self, f: str, **fields: Any) -> HistoryBuilder:
        """A nemesis invocation and its info completion carrying `fields`."""
        self.op("nemesis", "invoke", f, **fields)
        self.op("nemesis", "info", f, **fields)
        return self

    def fault(self, f: str = "kill", nemesis: str = "kill-leader", outcome: str = "ok",
              **fields: Any) -> HistoryBuilder:
        """A fault of `nemesis` (break op `f`): its invocation and its completion, `ok` (applied) by default."""
        self.op("nemesis", "invoke", f, nemesis=nemesis)
        self.op("nemesis", outcome, f, nemesis=nemesis, **fields)
        return self

    def text(self) -> str:
        """The history as JSON lines, each ending in a newline."""
        return "".join(json.dumps(r) + "\n" for r in self.ops)

    def write(self, run_dir: Path, test: dict[str, Any] | None = None, tail: str = "") -> Path:
        """Write history.jsonl (plus `tail` verbatim), faults.json as the runner writes it (the nemesis registry's
        word on each spec the history names) and test.json if given; return run_dir."""
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "history.jsonl").write_text(self.text() + tail, encoding="utf-8")
        write_registry_faults(run_dir, self.ops)
        if test is not None:
            (run_dir / "test.json").write_text(json.dumps(test), encoding="utf-8")
        return run_dir


def idempotent_test(on: bool) -> dict[str, Any]:
    """A minimal test.json with producer idempotence on or off and 2 partitions."""
    return {"name": "queue", "producer": {"acks": "all", "idempotence": on},
            "topic": {"name": "t", "partitions": 2}}


def model(ops: list[dict[str, Any]], idempotent: bool) -> tuple[Any, dict[str, int]]:
    """(valid, counts) for `ops` per docs/checkers.md, transcribed naively into plain Python.

    Assumes a well-formed history without nemesis ops.
    """
    sends = [o for o in ops if o["f"] == "send"]
    invoked = {o["value"] for o in sends if o["type"] == "invoke"}
    acked = {(o["partition"], o["offset"], o["value"]) for o in sends if o["type"] == "ok"}
    failed = {o["value"] for o in sends if o["type"] == "fail"}
    reads = {tuple(r) for o in ops if o["type"] == "ok" and o["f"] in ("poll", "drain")
             for r in o["records"]}
    done = {o["partition"] for o in ops if o["f"] == "drain" and o["type"] == "ok" and o["complete"]}
    seen = {v for _, _, v in reads}
    drained = {r[2] for o in ops if o["type"] == "ok" and o["f"] == "drain" for r in o["records"]}
    where = {v: {(p, o) for p, o, w in reads if w == v} for v in seen}
    at = {(p, o): {v for q, f, v in reads if (q, f) == (p, o)} for p, o, _ in reads}
    c = {"acked": len({v for *_, v in acked}),
         "lost": len({v for p, _, v in acked if v not in drained and p in done}),
         "unseen": len({v for p, _, v in acked if v not in seen and p not in done}),
         "acked_offset_mismatch": len({v for p, o, v in acked if at.get((p, o), {v}) - {v}}),
         "duplicate": sum(len(w) >= 2 for w in where.values()),
         "inconsistent_offset": sum(len(vs) >= 2 for vs in at.values()),
         "unexpected": len(seen - invoked),
         "failed_visible": len(failed & seen)}
    invalid = any(c[k] for k in ("lost", "acked_offset_mismatch", "inconsistent_offset", "unexpected"))
    valid = False if invalid or (idempotent and c["duplicate"]) else "unknown" if c["unseen"] else True
    return valid, c


# One random send: (outcome, partition 0..1, offset 0..4, where it is read [(p, o), ...]).
SEND = st.tuples(st.sampled_from(["ok", "ok", "fail", "info"]), st.integers(0, 1),
                 st.integers(0, 4), st.lists(st.tuples(st.integers(0, 1), st.integers(0, 4)), max_size=2))


def add_random_sends(h: HistoryBuilder, sends: list[tuple], strays: list[int]) -> list[tuple[int, int, int]]:
    """Record `sends` (drawn from SEND) on `h`, value i for the i-th; return every read they imply
    as [p, o, v], plus reads at partition 0 of values nobody sent (`strays`)."""
    polled: list[tuple[int, int, int]] = []
    for value, (outcome, partition, offset, read_at) in enumerate(sends):
        h.send(value % 3, value, partition, outcome, offset if outcome == "ok" else None)
        polled += [(p, o, value) for p, o in read_at]
    return polled + [(0, o, 100 + o) for o in strays]


@st.composite
def run_shapes(draw: st.DrawFn, *, sends: int, partitions: int, producers: int, consumers: int,
               empty_partitions: int, idempotence: bool = False) -> dict[str, Any]:
    """generate() arguments for a random run shape up to these sizes, without plants
    (`idempotent` drawn too if `idempotence`)."""
    kw = dict(seed=draw(st.integers(0, 2 ** 32 - 1)), sends=draw(st.integers(0, sends)),
              partitions=draw(st.integers(1, partitions)), producers=draw(st.integers(1, producers)),
              consumers=draw(st.integers(0, consumers)), empty_partitions=draw(st.integers(0, empty_partitions)),
              acks=draw(st.sampled_from(["all", "1", "0"])), drain_complete=draw(st.booleans()),
              info_rate=draw(st.sampled_from([0.0, 0.05, 0.3])),
              fail_rate=draw(st.sampled_from([0.0, 0.02, 0.2])))
    if idempotence:
        kw["idempotent"] = draw(st.booleans())
    return kw


def hostable_plants(shape: dict[str, Any], planting: bool = True) -> set[str]:
    """The corpus plant kinds a generate() shape can host."""
    allowed = set(PLANTS) if planting else set()
    if not shape["consumers"]:
        allowed -= set(NEEDS_CONSUMER)
    if shape["acks"] == "0":
        allowed -= set(NEEDS_OFFSETS)
    return allowed


def drop_impossible_loss(shape: dict[str, Any], plant: dict[str, int]) -> dict[str, int]:
    """`plant` without drain-based loss when no partition's final read can complete."""
    if not shape["drain_complete"] or (shape["partitions"] == 1 and any(plant.get(k) for k in TAIL_PLANTS)):
        plant.pop("lost", None)
    return plant

