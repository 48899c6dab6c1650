"""A txn process's consumer (workloads/txn/consumer.py): every change of its assignment is one rebalance line,
and an abandoned consumer's callbacks record nothing; with stand-ins for confluent-kafka's consumers."""
from __future__ import annotations

from confluent_kafka import TopicPartition

import kchaos.workloads.txn.consumer as tc
from kchaos.core.config import TestConfig, WorkloadConfig
from kchaos.core.history import History, read_history


class Fake:
    """A consumer that remembers what it was told; `fire(f, partitions)` runs a subscribe callback. As a member,
    `unsubscribe` queues the revocation of what it holds, served by the next `consume`; `close` records what it
    still held when it was closed."""

    def __init__(self):
        self.assigned, self.callbacks, self.closed = None, None, False
        self.held: set[int] = set()
        self.paused: list[int] = []
        self.queued: list[int] | None = None
        self.held_at_close: set[int] | None = None

    def assign(self, tps):
        self.assigned = [(tp.partition, tp.offset) for tp in tps]

    def subscribe(self, topics, on_assign, on_revoke, on_lost):
        self.callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}

    def assignment(self):
        return [TopicPartition("kchaos", p) for p in sorted(self.held)]

    def pause(self, tps):
        self.paused = [tp.partition for tp in tps]

    def unsubscribe(self):
        self.queued = sorted(self.held) if self.held else None

    def consume(self, num_messages, timeout):
        if self.queued is not None:
            queued, self.queued = self.queued, None
            self.fire("revoke", queued)
        return []

    def consumer_group_metadata(self):
        return b"CGMDv2:" + (7).to_bytes(4, "little") + b"rest"

    def fire(self, f, partitions):
        self.held = self.held | set(partitions) if f == "assign" else self.held - set(partitions)
        self.callbacks[f](self, [TopicPartition("kchaos", p) for p in partitions])

    def close(self):
        self.closed, self.held_at_close = True, set(self.held)


def consumer(tmp_path, monkeypatch, mode: str) -> tuple[tc.TxnConsumer, list[Fake], History]:
    made: list[Fake] = []

    def make(*a, **k):
        made.append(Fake())
        return made[-1]
    monkeypatch.setattr(tc, "make_consumer", make)
    monkeypatch.setattr(tc, "make_group_consumer", make)
    cfg = TestConfig(workload=WorkloadConfig(kind="txn", consumer_mode=mode))
    h = History(tmp_path / "h.jsonl")
    return tc.TxnConsumer(cfg, "x:9092", h, 1), made, h


def lines(h: History) -> list[tuple]:
    h.close()
    return [(o["f"], o["revoked"], o["assigned"], o.get("generation"), o.get("lost"))
            for o in read_history(h.path)]


def test_assign_mode_records_every_manual_change_but_the_first(tmp_path, monkeypatch):
    c, made, h = consumer(tmp_path, monkeypatch, "assign")
    c.start()
    assert made[0].assigned == [(0, 0), (1, 0), (2, 0)]  # every partition from offset 0, as before: no line
    c.assign([1])
    c.subscribe()
    made[2].fire("assign", [0, 1, 2])
    c.abandon()
    made[2].fire("revoke", [0, 1, 2])  # an abandoned consumer's callback: nothing
    c.start(again=True)
    assert made[3].assigned == [(0, -1001), (1, -1001), (2, -1001)]  # from the committed offsets
    assert made[0].closed and made[1].closed and not made[2].closed
    assert lines(h) == [("rebalance", [0, 1, 2], [], None, None), ("rebalance", [], [1], None, None),
                        ("rebalance", [1], [], None, None), ("rebalance", [], [0, 1, 2], 7, None),
                        ("rebalance", [], [0, 1, 2], None, None)]


def test_subscribe_mode_records_each_callback_with_its_generation(tmp_path, monkeypatch):
    c, made, h = consumer(tmp_path, monkeypatch, "subscribe")
    c.start()
    made[0].fire("assign", [0, 2])
    made[0].fire("revoke", [2])
    made[0].fire("lost", [0])
    assert c.commits_offsets()
    c.assign([1])
    assert not c.commits_offsets()  # a member assigned by hand commits nothing over the group's live members
    assert lines(h) == [("rebalance", [], [0, 2], 7, None), ("rebalance", [2], [], 7, None),
                        ("rebalance", [0], [], 7, True), ("rebalance", [], [1], None, None)]


def test_a_leaving_member_serves_its_revocation_before_it_closes_and_a_crashed_one_is_never_closed(
        tmp_path, monkeypatch):
    c, made, h = consumer(tmp_path, monkeypatch, "subscribe")
    c.start()
    made[0].fire("assign", [0, 1])
    c.subscribe()  # --txn-sub-p: the member leaves; its revocation is served by consume, recorded, then it closes
    assert made[0].paused == [0, 1] and made[0].closed and made[0].held_at_close == set()
    made[1].fire("assign", [2])
    c.abandon()
    c.start(again=True)
    made[2].fire("assign", [0, 1, 2])
    c.close()
    assert not made[1].closed and c.abandoned == []  # dropped unclosed: no callback served inside a close
    assert made[2].closed and made[2].held_at_close == set()
    assert lines(h) == [("rebalance", [], [0, 1], 7, None), ("rebalance", [0, 1], [], 7, None),
                        ("rebalance", [], [2], 7, None), ("rebalance", [], [0, 1, 2], 7, None),
                        ("rebalance", [0, 1, 2], [], 7, None)]
