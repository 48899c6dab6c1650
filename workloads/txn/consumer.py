"""A txn process's consumer, and the lines that record its assignment changing.

Assign mode (`--consumer-mode assign`): the process's first consumer is assigned every partition from offset 0;
its group, `kchaos-txn<process>`, only stores what the process's transactions commit. Subscribe mode: the
consumer is a member of the run's group (`kchaos-<seed>-group`, every txn process in it, `--group-protocol`),
with auto-commit off: the polls' offsets commit with the transaction (`send_offsets_to_transaction`), the
exactly-once pattern. Either way the polls read at `--txn-isolation`.

Every change of the assignment is one `rebalance` line of the process (docs/history.md, "Rebalances"):
`revoked` and `assigned` partitions and, from a group, the `generation` (`lost` for an assignment lost). A
group's callbacks (`rebalance.subscribe`) each write one. The `assign` and `subscribe` ops of
`--txn-sub-p` replace the consumer: the old one is closed (a group member's revocation is its callback's
line; a manual assignment's, a line), and the new one is assigned the op's partitions by hand (one line:
assigned), or subscribes. A manual assignment after the first resumes from the offsets the process's group
committed (else the log start); so does a consumer started again after a crash.

A crashed consumer is abandoned (`abandon`): never polled again, as a killed process leaves it (the group
evicts it when its session or max.poll.interval.ms runs out), its callbacks record nothing, and at the end of
the run it is let go of unclosed (`rebalance.drop`). A member that leaves (an `assign` or
`subscribe` op, the end of the run) serves its revocation before it closes (`leave`).
"""
from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kchaos.core.config import TestConfig
from kchaos.core.history import History, Op
from kchaos.workloads.clients import make_consumer, make_group_consumer, to_records
from kchaos.workloads.rebalance import Rebalance, drop, group_id, leave, subscribe

POLL_TIMEOUT_S = 0.1
BATCH = 100  # records one poll micro-op returns at most



def txn_group(cfg: TestConfig, process: int) -> str:
    """The consumer group of a process's consumer: the run's one group in subscribe mode, else its own (the group
    its transactions commit the polled offsets to)."""
    return group_id(cfg.seed) if cfg.workload.consumer_mode == "subscribe" else f"kchaos-txn{process}"

class TxnConsumer:
    """One consumer of a txn process at a time: made by `start`, read by `poll`, committed through `positions`
    and `group_metadata`, replaced by `assign` and `subscribe`, left for a new one by `abandon`. `assign` and
    `subscribe` raise only ERRORS."""

    ERRORS: tuple[type[Exception], ...] = (KafkaException,)

    def __init__(self, cfg: TestConfig, bootstrap: str, history: History, process: int):
        self.cfg, self.bootstrap, self.history, self.process = cfg, bootstrap, history, process
        self.topic, self.partitions = cfg.topic.name, cfg.topic.partitions
        self.subscribe_mode = cfg.workload.consumer_mode == "subscribe"
        self.group = txn_group(cfg, process)
        self.consumer: Consumer | None = None
        self.manual: list[int] = []  # the partitions assigned by hand; [] while subscribed
        self.member = False  # subscribed to self.group
        self.abandoned: list[Consumer] = []

    def start(self, again: bool = False) -> None:
        """The process's consumer as its mode says: subscribed, or assigned every partition (from offset 0 the
        first time; `again`, after a crash, from what the process committed, with a rebalance line)."""
        if self.subscribe_mode:
            self.subscribe()
        elif again:
            self.assign(list(range(self.partitions)))
        else:
            self.consumer = self._manual_consumer()
            self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            self.manual = list(range(self.partitions))

    def assign(self, partitions: list[int]) -> None:
        """Replace the consumer by one assigned `partitions` by hand, resuming from the group's committed offsets
        (else the log start); record its rebalance line."""
        self._leave()
        self.consumer = self._manual_consumer()
        self.consumer.assign([TopicPartition(self.topic, p) for p in partitions])
        self.manual = sorted(partitions)
        self._line(revoked=[], assigned=self.manual)

    def subscribe(self) -> None:
        """Replace the consumer by a member of the group (the run's in subscribe mode, else the process's own,
        where it is alone); its callbacks record the rebalance lines."""
        self._leave()
        w = self.cfg.workload
        consumer = make_group_consumer(self.bootstrap, f"txn{self.process}", self.group, auto_commit=False,
                                       protocol=w.group_protocol, isolation=w.options.isolation)
        self.consumer, self.member = consumer, True
        subscribe(consumer, self.topic, self._on_rebalance, live=lambda: consumer is self.consumer)

    def _manual_consumer(self) -> Consumer:
        return make_consumer(self.bootstrap, f"txn{self.process}", self.cfg.workload.options.isolation,
                             group=self.group)

    def _leave(self) -> None:
        """Close the consumer, cleanly: a member's close runs its revoke callback; a manual assignment's end is
        recorded here."""
        if self.consumer is None:
            return
        if self.manual:
            self._line(revoked=self.manual, assigned=[])
        self._close()
        self.consumer, self.member, self.manual = None, False, []

    def _close(self) -> None:
        assert self.consumer is not None
        if self.member:
            leave(self.consumer)
            return
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError):
            pass

    def poll(self) -> list[list[int]]:
        """One poll micro-op's records (rebalance callbacks may run inside it and record their lines)."""
        assert self.consumer is not None
        records, _ = to_records(self.consumer.consume(num_messages=BATCH, timeout=POLL_TIMEOUT_S))
        return records

    def positions(self) -> list[TopicPartition]:
        """The next offset of every assigned partition that has one: what a transaction's polls consumed."""
        assert self.consumer is not None
        return [tp for tp in self.consumer.position(self.consumer.assignment()) if tp.offset >= 0]

    def group_metadata(self) -> Any:
        """The consumer's group metadata, for `send_offsets_to_transaction` (the broker fences a stale one)."""
        assert self.consumer is not None
        return self.consumer.consumer_group_metadata()

    def commits_offsets(self) -> bool:
        """Whether a transaction commits this consumer's positions: always, except when a member of the run's
        group was assigned partitions by hand (an `assign` op in subscribe mode): with no generation, its
        commit would go over the group's live members."""
        return self.member or not self.subscribe_mode

    def _on_rebalance(self, r: Rebalance) -> None:
        if r.f == "assign":
            self._line(revoked=[], assigned=r.partitions, generation=r.generation)
        else:
            self._line(revoked=r.partitions, assigned=[], generation=r.generation, **({"lost": True} if r.lost else {}))

    def _line(self, revoked: list[int], assigned: list[int], **extra: Any) -> None:
        self.history.append(Op(self.process, "ok", "rebalance", {"revoked": revoked, "assigned": assigned, **extra}))

    def abandon(self) -> None:
        """Leave the consumer as a killed process would: no commit, no LeaveGroup, no close until `close`."""
        if self.consumer is not None:
            self.abandoned.append(self.consumer)
        self.consumer, self.member, self.manual = None, False, []

    def close(self) -> None:
        """Close the consumer (a member's revocation recorded) and let go of every abandoned one (recording
        nothing: `drop`)."""
        drop(self.abandoned)
        if self.consumer is not None:
            self._close()
            self.consumer = None
