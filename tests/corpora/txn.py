"""A labelled corpus of txn histories: a correct Kafka's history with anomalies planted at known places.

`generate(seed, ...)` returns the ops, test.json and, per anomaly kind of checkers/txn/reference.py COUNTS, the
exact set of keys the definitions (docs/checkers.md) make anomalous. The base is a history of a correct Kafka
(transactions one at a time, ok, fail or info, whose polls see what their isolation level shows, in order); each
plant is a short scripted block on partitions and processes of its own, after the base, built to cause exactly
its own key. `write` stores a corpus as a run directory. Deterministic by seed.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLANTS = ("lost_write", "unseen", "G1a", "aborted_read", "torn_transaction", "duplicate", "precommitted_read",
          "inconsistent_offsets", "poll_skip", "nonmonotonic_poll", "int_poll_skip", "int_nonmonotonic_poll",
          "nonmonotonic_send", "int_send_skip", "int_nonmonotonic_send", "G0", "G1c", "G1c_wr", "rebalanced_skip",
          "revoked_skip", "polled_then_lost", "cut_off_torn")
# rebalanced_skip: a jump across a rebalance of the partition, which is no anomaly (it has no label). revoked_skip:
# the same as --consumer-mode subscribe records it (docs/history.md): the partition revoked (with a generation) and
# assigned again later, a crash line and sub-p assign and subscribe ops between, lines no checker counts.
UNLABELLED = ("rebalanced_skip", "revoked_skip")
# Plants named otherwise than the kind they cause: a committed value a poll returned and the complete final read
# lacks (lost_write), and a transaction the run cut off, one of whose values the final read shows (torn).
LABEL = {"polled_then_lost": "lost_write", "cut_off_torn": "torn_transaction"}
UNSENT = 1 << 40  # values above every sent one


@dataclass(frozen=True)
class TxnCorpus:
    """A history (`ops`), its test.json (`test`) and `planted[kind]`: the keys of every kind of COUNTS."""

    ops: list[dict[str, Any]]
    test: dict[str, Any]
    planted: dict[str, set[Any]]


def write(corpus: TxnCorpus, run_dir: Path) -> Path:
    """Write `corpus` as run_dir/history.jsonl and run_dir/test.json; return the history's path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "test.json").write_text(json.dumps(corpus.test) + "\n", encoding="utf-8")
    history = run_dir / "history.jsonl"
    history.write_text("".join(json.dumps(op, separators=(",", ":")) + "\n" for op in corpus.ops), encoding="utf-8")
    return history


class Builder:
    """Builds a txn history op by op (kept in `ops`); `add` is the one place an op goes, so a subclass can
    stream them elsewhere."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.value = 0

    def add(self, **op: Any) -> int:
        self.ops.append({"index": len(self.ops), "time": len(self.ops) * 1000, **op})
        return len(self.ops) - 1

    def fresh(self) -> int:
        self.value += 1
        return self.value

    def txn(self, process: int, type_: str, mops: list[list[Any]]) -> int:
        """A transaction of completed micro-ops (["send", k, v, p, o] or ["poll", records]); its invocation index."""
        at = self.add(process=process, type="invoke", f="txn",
                      value=[m[:3] if m[0] == "send" else ["poll"] for m in mops])
        self.add(process=process, type=type_, f="txn", value=mops,
                 **({"error": "aborted on purpose"} if type_ == "fail" else {}))
        return at

    def drain(self, process: int, p: int, records: list[list[int]], complete: bool = True) -> None:
        self.add(process=process, type="invoke", f="drain", partition=p)
        self.add(process=process, type="ok", f="drain", partition=p, records=records, complete=complete)


def generate(seed: int, *, txns: int = 40, partitions: int = 3, processes: int = 3,
             isolation: str = "read_committed", plant: dict[str, int] | None = None,
             cut_off: bool = False) -> TxnCorpus:
    """A base of `txns` transactions by `processes` processes over `partitions` partitions, polls under
    `isolation`, then `plant[kind]` blocks of each kind of PLANTS, then complete final reads of every partition
    (and, with `cut_off`, an invocation the run never completed). ValueError for an unknown kind, or an
    aborted_read under read_committed (the same read is a G1a there)."""
    plant = {k: n for k, n in (plant or {}).items() if n}
    if set(plant) - set(PLANTS):
        raise ValueError(f"unknown plant kinds {sorted(set(plant) - set(PLANTS))}; known: {PLANTS}")
    if plant.get("aborted_read") and isolation != "read_uncommitted":
        raise ValueError("aborted_read needs read_uncommitted polls")
    rng, b = random.Random(seed), Builder()
    labels: dict[str, set[Any]] = {"aborted_read": set(), "precommitted_read": set()}
    total = partitions + 2 * sum(plant.values())  # test.json's partition count: the base's and two per block
    logs = _base(rng, b, txns, partitions, total, processes, isolation, labels)
    state = {"p": partitions, "proc": processes + 1}  # process `processes` drains

    def take(n_parts: int, n_procs: int) -> tuple[list[int], list[int]]:
        ps = list(range(state["p"], state["p"] + n_parts))
        procs = list(range(state["proc"], state["proc"] + n_procs))
        state["p"] += n_parts
        state["proc"] += n_procs
        return ps, procs

    for kind in PLANTS:
        for _ in range(plant.get(kind, 0)):
            ps, procs = take(2, 3)
            for k, key in plant_block(kind, b, ps, procs, processes).items():
                labels.setdefault(k, set()).add(key)
    for p in range(partitions):
        b.drain(processes, p, [[p, o, v] for o, v, vis in logs[p] if vis])
    if cut_off:
        b.add(process=0, type="invoke", f="txn", value=[["send", 0, b.fresh()]])
    test = {"workload": {"kind": "txn", "options": {"isolation": isolation}}, "topic": {"partitions": state["p"]}}
    return TxnCorpus(b.ops, test, labels)


def _base(rng: random.Random, b: Builder, n: int, partitions: int, total: int, processes: int, isolation: str,
          labels: dict[str, set[Any]]) -> dict[int, list[tuple[int, int, bool]]]:
    """Transactions of a correct Kafka, one at a time, on partitions 0..`partitions`-1 of a topic of `total`
    (a send's partition is its key mod `total`); each partition's log as (offset, value, visible). Under
    read_uncommitted its polls read aborted values and their own sends: those go into `labels`."""
    fails: set[int] = set()
    logs: dict[int, list[tuple[int, int, bool]]] = {p: [] for p in range(partitions)}
    ends = dict.fromkeys(range(partitions), 0)
    pos = {proc: dict.fromkeys(range(partitions), 0) for proc in range(processes)}
    for _ in range(n):
        proc = rng.randrange(processes)
        type_ = rng.choice(["ok", "ok", "ok", "fail", "info"])
        visible = type_ == "ok" or (type_ == "info" and rng.random() < 0.5)
        mops: list[list[Any]] = []
        mine: list[tuple[int, int]] = []
        sent: set[int] = set()
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.5:
                k = rng.randrange(2 * partitions)
                p, v = k % partitions, b.fresh()
                mops.append(["send", p + total * (k // partitions), v, p, ends[p]])
                mine.append((p, len(logs[p])))
                sent.add(v)
                logs[p].append((ends[p], v, False))
                ends[p] += 1
            else:
                records = []
                for p in range(partitions):
                    for o, v, vis in logs[p]:
                        if o >= pos[proc][p] and (vis or isolation == "read_uncommitted"):
                            records.append([p, o, v])
                            pos[proc][p] = o + 1
                mops.append(["poll", records[:rng.randint(0, 6)] if records else []])
                if isolation == "read_uncommitted":
                    for _, _, v in mops[-1][1]:
                        labels["aborted_read"].add(v)  # kept below if its transaction failed
                        if v in sent:
                            labels["precommitted_read"].add(v)
                for p, o, _ in records[len(mops[-1][1]):]:  # not returned this time: the position stays before
                    pos[proc][p] = min(pos[proc][p], o)
        for p, i in mine:
            o, v, _ = logs[p][i]
            logs[p][i] = (o, v, visible)
        for p in {p for p, _ in mine}:
            ends[p] += 1  # the commit or abort marker
        if type_ == "info" and not visible:
            mops = [m[:4] + [None] if m[0] == "send" else m for m in mops]
        b.txn(proc, type_, mops)
        if type_ == "fail":
            fails |= sent
    # what a read_uncommitted poll returned is an aborted_read only if its transaction failed
    labels["aborted_read"] &= fails
    return logs


def plant_block(kind: str, b: Any, ps: list[int], procs: list[int], drainer: int) -> dict[str, Any]:
    """One block causing exactly the returned {kind: key} (nothing for UNLABELLED; G1c_wr is a G1c too), on
    partitions `ps` and processes `procs` nobody else uses."""
    q, r = ps
    a, c, d = procs
    v = [b.fresh() for _ in range(4)]

    def send(i: int, p: int, o: int | None) -> list[Any]:  # key p: partition p of any larger topic
        return ["send", p, v[i], p, o]

    def three() -> None:  # values 0, 1, 2 at offsets 0, 1, 2 of q, committed
        b.txn(a, "ok", [send(0, q, 0), send(1, q, 1), send(2, q, 2)])

    def rec(i: int) -> list[int]:
        return [q, i, v[i]]
    reads = {q: [rec(0), rec(1), rec(2)]}
    out: dict[str, Any] = {}
    if kind == "lost_write":
        b.txn(a, "ok", [send(0, q, 0)])
        b.txn(a, "ok", [send(1, q, 1)])
        reads = {q: [rec(1)]}
        out[kind] = v[0]
    elif kind == "polled_then_lost":  # one value a transaction, so that under read_uncommitted none is torn
        b.txn(a, "ok", [send(0, q, 0)])
        b.txn(a, "ok", [send(1, q, 1)])
        b.txn(c, "ok", [["poll", [rec(0)]]])
        reads = {q: [rec(1)]}
        out["lost_write"] = v[0]
    elif kind == "cut_off_torn":  # invoked, never completed: info, its sends in partitions q and r by their keys
        out["torn_transaction"] = b.add(process=a, type="invoke", f="txn",
                                        value=[send(0, q, None)[:3], send(1, r, None)[:3]])
        reads = {q: [rec(0)], r: []}
    elif kind == "unseen":
        b.txn(a, "ok", [send(0, q, 0)])
        reads = {q: []}
        out[kind] = v[0]
    elif kind in ("G1a", "aborted_read"):
        b.txn(a, "fail", [send(0, q, 0)])
        if kind == "aborted_read":
            b.txn(c, "ok", [["poll", [rec(0)]]])
        reads = {q: [rec(0)] if kind == "G1a" else []}
        out[kind] = v[0]
    elif kind == "torn_transaction":
        out[kind] = b.txn(a, "info", [send(0, q, 0), send(1, r, 0)])
        reads = {q: [rec(0)], r: []}
    elif kind == "duplicate":
        b.txn(a, "ok", [send(0, q, 0)])
        reads = {q: [rec(0), [q, 1, v[0]]]}
        out[kind] = v[0]
    elif kind == "precommitted_read":
        b.txn(a, "ok", [send(0, q, 0), ["poll", [rec(0)]]])
        reads = {q: [rec(0)]}
        out[kind] = v[0]
    elif kind == "inconsistent_offsets":
        b.txn(a, "ok", [send(0, q, 0)])
        b.txn(c, "ok", [["poll", [[q, 0, UNSENT + v[1]]]]])
        reads = {q: [rec(0)]}
        out[kind] = (q, 0)
    elif kind in ("poll_skip", "nonmonotonic_poll", *UNLABELLED):
        three()
        first, then = ((0, 2) if kind != "nonmonotonic_poll" else (1, 1))
        b.txn(c, "ok", [["poll", [rec(first)]]])
        if kind == "rebalanced_skip":
            b.add(process=c, type="ok", f="rebalance", revoked=[q], assigned=[q, r])
        elif kind == "revoked_skip":
            b.add(process=c, type="ok", f="rebalance", revoked=[q, r], assigned=[], generation=3)
            b.add(process=c, type="info", f="crash", restart_after=2.0, error="crashed (crash-client)")
            for f, value in (("assign", [r]), ("subscribe", "kchaos")):
                b.add(process=c, type="invoke", f=f, value=value)
                b.add(process=c, type="ok", f=f, value=value)
            b.add(process=c, type="ok", f="rebalance", revoked=[], assigned=[q], generation=5, lost=False)
        b.txn(c, "ok", [["poll", [rec(then)]]])
        if kind not in UNLABELLED:
            out[kind] = (c, q, first, then)
    elif kind in ("int_poll_skip", "int_nonmonotonic_poll"):
        three()
        first, then = (0, 2) if kind == "int_poll_skip" else (1, 0)
        out[kind] = (b.txn(c, "ok", [["poll", [rec(first)]], ["poll", [rec(then)]]]), q, first, then)
    elif kind == "nonmonotonic_send":
        b.txn(a, "ok", [send(0, q, 5)])
        b.txn(a, "ok", [send(1, q, 3)])
        reads = {q: [[q, 3, v[1]], [q, 5, v[0]]]}
        out[kind] = (a, q, 5, 3)
    elif kind == "int_send_skip":
        out[kind] = (b.txn(a, "ok", [send(0, q, 0), send(1, q, 2)]), q, 0, 2)
        b.txn(c, "ok", [["poll", [[q, 1, UNSENT + v[2]]]]])  # offset 1 exists, written by nobody the graph knows
        reads = {q: [rec(0), [q, 2, v[1]]]}
    elif kind == "int_nonmonotonic_send":
        out[kind] = (b.txn(a, "ok", [send(0, q, 1), send(1, q, 0)]), q, 1, 0)
        reads = {q: [[q, 0, v[1]], [q, 1, v[0]]]}
    elif kind == "G0":
        t1 = b.txn(a, "ok", [send(0, q, 0), send(1, r, 1)])
        t2 = b.txn(c, "ok", [send(2, q, 1), send(3, r, 0)])
        reads = {q: [rec(0), [q, 1, v[2]]], r: [[r, 0, v[3]], [r, 1, v[1]]]}
        out[kind] = (t1, t2)
    elif kind == "G1c":
        t1 = b.txn(a, "ok", [send(0, q, 0), ["poll", [[r, 0, v[2]]]]])
        t2 = b.txn(c, "ok", [send(1, q, 1), send(2, r, 0)])
        reads = {q: [rec(0), rec(1)], r: [[r, 0, v[2]]]}
        out[kind] = (t1, t2)
    elif kind == "G1c_wr":  # each polls the other's send: wr edges both ways, no ww edge
        t1 = b.txn(a, "ok", [send(0, q, 0), ["poll", [[r, 0, v[1]]]]])
        t2 = b.txn(c, "ok", [send(1, r, 0), ["poll", [rec(0)]]])
        reads = {q: [rec(0)], r: [[r, 0, v[1]]]}
        out["G1c"] = out[kind] = (t1, t2)
    for p in ps:
        b.drain(drainer, p, reads.get(p, []))
    return out
