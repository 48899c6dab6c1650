"""A txn process's consumer (workloads/txn_consumer.py): every change of its assignment is one rebalance line,
and an abandoned consumer's callbacks record nothing; with stand-ins for confluent-kafka's consumers."""
from __future__ import annotations

from confluent_kafka import TopicPartition

import workloads.txn_consumer as tc
from core.config import TestConfig, WorkloadConfig
from core.history import History, read_history


class Fake:
    """A consumer that remembers what it was told; `fire(f, partitions)` runs a subscribe callback."""

    def __init__(self):
        self.assigned, self.callbacks, self.closed = None, None, False

    def assign(self, tps):
        self.assigned = [(tp.partition, tp.offset) for tp in tps]

    def subscribe(self, topics, on_assign, on_revoke, on_lost):
        self.callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}

    def consumer_group_metadata(self):
        return b"CGMDv2:" + (7).to_bytes(4, "little") + b"rest"

    def fire(self, f, partitions):
        self.callbacks[f](self, [TopicPartition("kchaos", p) for p in partitions])

    def close(self):
        self.closed = True


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
